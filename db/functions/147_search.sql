-- One search over dataset names, job names and field names, ranked: exact, prefix, substring.
CREATE OR REPLACE FUNCTION metastore.search(p_q text, p_limit integer DEFAULT 20) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Planned once per session (plans do not depend on the values: key lookups and ranges); a
-- custom plan of each statement cost more to make than to run. Every read here goes through an
-- index: on a small table the generic plan read the schema versions whole, a jsonpath per row.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
DECLARE
    -- Substring candidates ranked per kind (the first in storage order): 2 x p_limit, at least this.
    c_sample  constant integer := 50;
    -- Without a trigram index, names looked through per kind for a substring (the answer says
    -- partial): of datasets and fields (where pg_trgm is missing), of jobs the newest (they have none).
    c_scan    constant integer := 50000;
    -- q of one or two characters has no trigram: looked for in fewer names (it is in most of them).
    c_scan_short constant integer := 10000;
    c_scan_jobs constant integer := 2000;
    -- Schema versions looked through for the datasets that have a field now: through the index of
    -- field names, and walked first.
    c_versions constant integer := 500;
    c_walk    constant integer := 100;
    v_hide    record;
    v_q       text;
    v_lq      text;
    v_key     bytea;
    v_like    text;
    v_partial boolean := false;
    v_scan    integer;
    v_cand    record;
    v_results jsonb := '[]';
    v_field   jsonb;
    v_more    boolean;
    v_fields  integer := 0;
BEGIN
    IF p_q IS NULL OR btrim(p_q) = '' OR octet_length(p_q) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'q must be a text of 1 to 1000 bytes, not only spaces';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 100, not %s', p_limit);
    END IF;
    v_q := btrim(p_q);
    v_lq := lower(v_q);
    -- The key of the search indexes: the first 400 bytes of the lower-case name.
    v_key := metastore.search_key(v_q);
    v_like := replace(replace(replace(v_lq, E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_');
    v_hide := metastore.hidden_names();
    v_scan := CASE WHEN length(v_lq) < 3 THEN c_scan_short ELSE c_scan END;

    -- Candidates of every kind and tier, best first. Exact (0): the name, or its last part, is q.
    -- Prefix (1): it starts with q; the closer first. Substring (2): the trigram index where there
    -- is one (or a bounded look), the first max(c_sample, 2 x p_limit) of each kind ranked: a word
    -- that starts with q first (after ., _, / and the like), then where q starts, then the shorter name.
    FOR v_cand IN
        WITH ranged AS (
            -- A dataset or job whose name or last part (metastore.name_tail) starts with q: ranges of
            -- the search indexes, the first 2 x p_limit of each in name order.
            (SELECT 'dataset' AS type, d.id, d.namespace, d.name, d.kind
               FROM metastore.datasets AS d
              WHERE metastore.search_key(d.name) >= v_key AND metastore.search_key(d.name) < v_key || '\xff'::bytea
                AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(d.name), d.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT 'dataset', d.id, d.namespace, d.name, d.kind
               FROM metastore.datasets AS d
              WHERE metastore.search_key(metastore.name_tail(d.name)) >= v_key
                AND metastore.search_key(metastore.name_tail(d.name)) < v_key || '\xff'::bytea
                AND (strpos(d.name, '/') > 0 OR strpos(d.name, '.') > 0)
                AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(metastore.name_tail(d.name)), d.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT 'job', j.id, j.namespace, j.name, NULL
               FROM metastore.jobs AS j
              WHERE metastore.search_key(j.name) >= v_key AND metastore.search_key(j.name) < v_key || '\xff'::bytea
                AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(j.name), j.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT 'job', j.id, j.namespace, j.name, NULL
               FROM metastore.jobs AS j
              WHERE metastore.search_key(metastore.name_tail(j.name)) >= v_key
                AND metastore.search_key(metastore.name_tail(j.name)) < v_key || '\xff'::bytea
                AND (strpos(j.name, '/') > 0 OR strpos(j.name, '.') > 0)
                AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(metastore.name_tail(j.name)), j.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT DISTINCT ON (metastore.search_key(f.name), f.name) 'field', NULL::bigint, NULL::text, f.name, NULL
               FROM metastore.field_names AS f
              WHERE metastore.search_key(f.name) >= v_key AND metastore.search_key(f.name) < v_key || '\xff'::bytea
              ORDER BY metastore.search_key(f.name), f.name
              LIMIT 2 * p_limit)
        ), matched AS (
            -- A key cut at 400 bytes matches more than the name does: the whole name decides.
            SELECT r.*, lower(r.name) AS lname,
                   CASE WHEN r.type = 'field' THEN lower(r.name) ELSE lower(metastore.name_tail(r.name)) END AS ltail
              FROM ranged AS r
        ), tiered AS (
            SELECT m.type, m.id, m.namespace, m.name, m.kind, m.lname,
                   CASE WHEN v_lq IN (m.lname, m.ltail) THEN 0 ELSE 1 END AS tier,
                   -- The closer the better: how much longer than q the part it starts is.
                   least(CASE WHEN m.lname LIKE v_like || '%' THEN length(m.lname) END,
                         CASE WHEN m.ltail LIKE v_like || '%' THEN length(m.ltail) END) AS word,
                   0 AS pos
              FROM matched AS m
             WHERE m.lname LIKE v_like || '%' OR m.ltail LIKE v_like || '%'
            UNION ALL
            SELECT s.type, s.id, s.namespace, s.name, s.kind, s.lname, 2,
                   -- A word of the name that starts with q before one that only holds it.
                   CASE WHEN substr(s.lname, strpos(s.lname, v_lq) - 1, 1) ~ '[[:alnum:]]' THEN 1 ELSE 0 END,
                   strpos(s.lname, v_lq)
              FROM metastore.search_substrings(v_lq, v_like, greatest(c_sample, 2 * p_limit), v_scan, c_scan_jobs,
                                               v_hide.dataset_ids, v_hide.job_ids, v_hide.namespaces) AS s
             WHERE (SELECT count(*) FROM matched AS m WHERE m.lname LIKE v_like || '%' OR m.ltail LIKE v_like || '%')
                   < p_limit
        )
        SELECT t.* FROM tiered AS t
         ORDER BY t.tier, t.word, t.pos, length(t.name), t.lname COLLATE "C", t.name COLLATE "C", t.type,
                  t.namespace COLLATE "C", t.id
    LOOP
        IF v_cand.type = 'field' THEN
            -- The datasets whose current fields have it, a few (with a mark when there are more); a
            -- name no current version has is left out. Bounded both ways: a common field is found
            -- among the first c_walk versions (the walk stops at the sixth dataset), and only a rarer
            -- one goes to the index of field names, whose bitmap is as large as the versions that
            -- have the name (so about 6 / c_walk of them at most), c_versions of them looked at.
            EXIT WHEN v_fields >= 2 * p_limit;
            v_fields := v_fields + 1;
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                                      ORDER BY x.namespace COLLATE "C", x.name COLLATE "C", x.id)
                                FILTER (WHERE x.n <= 5), '[]'),
                   count(*) > 5
              INTO v_field, v_more
              FROM (SELECT f.*, row_number() OVER (ORDER BY f.id) AS n
                      FROM (SELECT d.id, d.namespace, d.name
                              FROM ((SELECT w.* FROM (SELECT * FROM metastore.dataset_schema_versions
                                                       ORDER BY dataset_id, fields_sha256 LIMIT c_walk) AS w
                                      WHERE w.fields @> jsonb_build_array(jsonb_build_object('name', v_cand.name)))
                                    UNION ALL
                                    -- Read only when the walk found fewer than six (the Limit below
                                    -- stops before it), past the versions walked.
                                    (SELECT v.* FROM metastore.dataset_schema_versions AS v
                                      WHERE jsonb_path_query_array(v.fields, '$[*].name')
                                            @> jsonb_build_array(v_cand.name)
                                        AND (v.dataset_id, v.fields_sha256) > (
                                                SELECT w.dataset_id, w.fields_sha256
                                                  FROM metastore.dataset_schema_versions AS w
                                                 ORDER BY w.dataset_id, w.fields_sha256
                                                 OFFSET c_walk - 1 LIMIT 1)
                                      LIMIT c_versions)) AS v
                              -- A dataset has one current version: no dataset twice. Taken as
                              -- they come, the walk stops at the sixth.
                              JOIN metastore.datasets AS d ON d.id = v.dataset_id
                             WHERE NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                                WHERE n.dataset_id = v.dataset_id
                                                  AND (n.last_seen, n.first_seen, v.fields_sha256)
                                                      > (v.last_seen, v.first_seen, n.fields_sha256))
                               AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                             LIMIT 6) AS f) AS x;
            CONTINUE WHEN v_field = '[]';
            v_results := v_results || jsonb_build_array(jsonb_build_object(
                'type', 'field', 'match', (ARRAY['exact', 'prefix', 'substring'])[v_cand.tier + 1],
                'field', v_cand.name, 'datasets', v_field, 'more_datasets', v_more));
        ELSE
            v_results := v_results || jsonb_build_array(jsonb_build_object(
                'type', v_cand.type, 'match', (ARRAY['exact', 'prefix', 'substring'])[v_cand.tier + 1],
                'id', v_cand.id, 'namespace', v_cand.namespace, 'name', v_cand.name)
                || CASE WHEN v_cand.type = 'dataset' THEN jsonb_build_object('kind', v_cand.kind) ELSE '{}' END);
        END IF;
        EXIT WHEN jsonb_array_length(v_results) >= p_limit;
    END LOOP;

    -- Partial: a substring search looked through part of the names only (no trigram index there).
    IF jsonb_array_length(v_results) < p_limit THEN
        -- The large tables by their row estimate; jobs past the newest c_scan_jobs by their index.
        v_partial := ((to_regclass('metastore.datasets_name_trgm_idx') IS NULL OR length(v_lq) < 3)
                      AND (SELECT c.reltuples FROM pg_class AS c WHERE c.oid = 'metastore.datasets'::regclass) > v_scan)
                  OR EXISTS (SELECT FROM metastore.jobs AS j ORDER BY j.id DESC OFFSET c_scan_jobs)
                  OR ((to_regclass('metastore.field_names_name_trgm_idx') IS NULL OR length(v_lq) < 3)
                      AND (SELECT c.reltuples FROM pg_class AS c WHERE c.oid = 'metastore.field_names'::regclass) > v_scan);
    END IF;
    RETURN jsonb_build_object('q', v_q, 'results', v_results, 'partial', v_partial);
END
$fn$;

COMMENT ON FUNCTION metastore.search(text, integer) IS
    'Dataset names, job names and top-level field names that contain p_q (trimmed, compared in lower case), '
    'ranked: exact (the name, or the last part of a dataset or job name, after its last / or else its last ., '
    'is q), then prefix (it starts with q; the closer first), then substring (a word starting with it first, '
    'then where it starts, then shorter names): {"q", "results": [...], "partial"}, at most p_limit. A dataset or job '
    'result has its id, namespace and name; a field result the field and up to 5 datasets whose current '
    'fields have it (more_datasets: there are more). partial: a substring search looked through part of the '
    'names of some kind: job names (the newest 2000; they have no trigram index), or dataset or field names '
    '(the first 50000, or 10000 for q of one or two characters) where pg_trgm is missing or q is that short. Hidden datasets, jobs and '
    'namespaces (metastore.hide) are left out. Error codes: 22023 q empty or over 1000 bytes, limit outside '
    '1..100.';

REVOKE ALL ON FUNCTION metastore.search(text, integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.search(text, integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
