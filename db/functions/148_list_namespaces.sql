-- The namespaces datasets and jobs are in, with how many of each: what the view offers to choose from.
CREATE OR REPLACE FUNCTION metastore.list_namespaces(p_limit integer DEFAULT 1000) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Planned once per session (plans do not depend on the values: key lookups and ranges); a
-- custom plan of each statement cost more to make than to run.
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    v_hide  record;
    v_names text[] := '{}';
    v_after bytea;
    v_next  text;
    v_kind  text;
    v_seen  integer;
    v_rows  jsonb;
    -- Counted up to this many of each kind (more_datasets, more_jobs: there are more): the count of
    -- a namespace of a million datasets would read a million rows (the order index holds the key, not
    -- the columns: each entry is checked on its row).
    c_count constant integer := 1000;
    v_ns       text;
    v_lo       bytea;
    v_hi       bytea;
    v_datasets bigint;
    v_jobs     bigint;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    v_hide := metastore.hidden_names();
    -- The distinct namespaces of each table, one index probe each: datasets_order_idx and
    -- jobs_order_idx are in metastore.dataset_key order, where a namespace's keys lie between its
    -- bytes followed by 0 and by 1; the next namespace is the first key past the 1.
    FOREACH v_kind IN ARRAY ARRAY['dataset', 'job'] LOOP
        v_after := '\x'::bytea;
        v_seen := 0;
        LOOP
            IF v_kind = 'dataset' THEN
                SELECT d.namespace INTO v_next FROM metastore.datasets AS d
                 WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= substr(v_after, 1, 1024)
                   AND metastore.dataset_key(d.namespace, d.name) > v_after
                 ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024),
                          metastore.dataset_key(d.namespace, d.name)
                 LIMIT 1;
            ELSE
                SELECT j.namespace INTO v_next FROM metastore.jobs AS j
                 WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= substr(v_after, 1, 1024)
                   AND metastore.dataset_key(j.namespace, j.name) > v_after
                 ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                          metastore.dataset_key(j.namespace, j.name)
                 LIMIT 1;
            END IF;
            EXIT WHEN NOT FOUND;
            IF v_next <> ALL (v_hide.namespaces) THEN
                v_seen := v_seen + 1;
                IF v_next <> ALL (v_names) THEN
                    v_names := v_names || v_next;
                END IF;
            END IF;
            v_after := substr(metastore.dataset_key(v_next, ''), 1, length(metastore.dataset_key(v_next, '')) - 1)
                       || '\x01'::bytea;
            -- Enough of this kind: the answer holds the first p_limit of both, in order.
            EXIT WHEN v_seen > p_limit;
        END LOOP;
    END LOOP;

    -- The first p_limit in code point order, each counted along the order index up to c_count + 1
    -- entries (ordered, so that the scan stops there: a bitmap would read the whole range): a
    -- namespace's keys lie between its bytes followed by 0 and by 1; one of more than 1022 bytes shares
    -- the index's 1024-byte prefix with others: checked on the row.
    v_rows := '[]';
    FOR v_ns, v_lo, v_hi IN
        SELECT x.ns, substr(k.k, 1, 1024), substr(substr(k.k, 1, length(k.k) - 1) || '\x01'::bytea, 1, 1024)
          FROM unnest(v_names) AS x (ns) CROSS JOIN LATERAL (SELECT metastore.dataset_key(x.ns, '') AS k) AS k
         ORDER BY k.k
         LIMIT p_limit
    LOOP
        IF octet_length(v_ns) <= 1022 THEN
            SELECT count(*) INTO v_datasets FROM (
                SELECT FROM metastore.datasets AS d
                 WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) <= v_hi
                 ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
            SELECT count(*) INTO v_jobs FROM (
                SELECT FROM metastore.jobs AS j
                 WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_hi
                 ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
        ELSE
            SELECT count(*) INTO v_datasets FROM (
                SELECT FROM metastore.datasets AS d
                 WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) <= v_hi AND d.namespace = v_ns
                 ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
            SELECT count(*) INTO v_jobs FROM (
                SELECT FROM metastore.jobs AS j
                 WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_hi AND j.namespace = v_ns
                 ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
        END IF;
        -- Hidden ones are not counted (a handful: their ids).
        IF cardinality(v_hide.dataset_ids) > 0 OR cardinality(v_hide.job_ids) > 0 THEN
            v_datasets := v_datasets - (SELECT count(*) FROM metastore.datasets AS d
                                         WHERE d.id = ANY (v_hide.dataset_ids) AND d.namespace = v_ns);
            v_jobs := v_jobs - (SELECT count(*) FROM metastore.jobs AS j
                                 WHERE j.id = ANY (v_hide.job_ids) AND j.namespace = v_ns);
        END IF;
        -- A namespace whose every dataset and job is hidden one by one is gone too.
        CONTINUE WHEN v_datasets + v_jobs = 0;
        v_rows := v_rows || jsonb_build_array(jsonb_build_object(
            'namespace', v_ns, 'datasets', least(v_datasets, c_count), 'jobs', least(v_jobs, c_count),
            'more_datasets', v_datasets > c_count, 'more_jobs', v_jobs > c_count));
    END LOOP;
    RETURN jsonb_build_object('namespaces', v_rows, 'truncated', cardinality(v_names) > p_limit);
END
$fn$;

COMMENT ON FUNCTION metastore.list_namespaces(integer) IS
    'The namespaces of datasets and jobs, in code point order, each with how many datasets and jobs it has, '
    'counted up to 1000 each: {"namespaces": [{"namespace", "datasets", "jobs", "more_datasets", '
    '"more_jobs"}], "truncated"}, the first p_limit (truncated: there are more; more_*: more than 1000). '
    'Hidden namespaces are left out, hidden datasets and jobs not counted (metastore.hide). Error codes: 22023 '
    'limit outside 1..1000.';

REVOKE ALL ON FUNCTION metastore.list_namespaces(integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.list_namespaces(integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
