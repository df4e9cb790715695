-- The namespaces datasets and jobs are in, with how many of each: what the view offers to choose from.
CREATE OR REPLACE FUNCTION metastore.list_namespaces(p_limit integer DEFAULT 1000) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_hide  record;
    v_names text[] := '{}';
    v_after bytea;
    v_next  text;
    v_kind  text;
    v_seen  integer;
    v_rows  jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 10000, not %s', p_limit);
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

    -- The first p_limit in code point order, each counted on the index (an index-only range count;
    -- a namespace of more than 1022 bytes shares the index's 1024-byte prefix with others: checked).
    SELECT coalesce(jsonb_agg(jsonb_build_object('namespace', n.ns, 'datasets', c.datasets, 'jobs', c.jobs)
                              ORDER BY n.k), '[]')
      INTO v_rows
      FROM (SELECT x.ns, metastore.dataset_key(x.ns, '') AS k FROM unnest(v_names) AS x (ns)
             ORDER BY 2 LIMIT p_limit) AS n
     CROSS JOIN LATERAL (
            SELECT substr(n.k, 1, 1024) AS lo,
                   substr(substr(n.k, 1, length(n.k) - 1) || '\x01'::bytea, 1, 1024) AS hi,
                   octet_length(n.ns) > 1022 AS long) AS b
     CROSS JOIN LATERAL (
            SELECT (SELECT count(*) FROM metastore.datasets AS d
                     WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= b.lo
                       AND substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) <= b.hi
                       AND (NOT b.long OR d.namespace = n.ns))
                   - (SELECT count(*) FROM metastore.datasets AS d
                       WHERE d.id = ANY (v_hide.dataset_ids) AND d.namespace = n.ns) AS datasets,
                   (SELECT count(*) FROM metastore.jobs AS j
                     WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= b.lo
                       AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= b.hi
                       AND (NOT b.long OR j.namespace = n.ns))
                   - (SELECT count(*) FROM metastore.jobs AS j
                       WHERE j.id = ANY (v_hide.job_ids) AND j.namespace = n.ns) AS jobs) AS c
     -- A namespace whose every dataset and job is hidden one by one is gone too.
     WHERE c.datasets + c.jobs > 0;
    RETURN jsonb_build_object('namespaces', v_rows, 'truncated', cardinality(v_names) > p_limit);
END
$fn$;

COMMENT ON FUNCTION metastore.list_namespaces(integer) IS
    'The namespaces of datasets and jobs, in code point order, each with how many datasets and jobs it has: '
    '{"namespaces": [{"namespace", "datasets", "jobs"}], "truncated"}, the first p_limit (truncated: there are '
    'more). Hidden namespaces are left out, hidden datasets and jobs not counted (metastore.hide). Error codes: '
    '22023 limit outside 1..10000.';

REVOKE ALL ON FUNCTION metastore.list_namespaces(integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.list_namespaces(integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
