-- metastore.search's substring tier: names of each kind that hold q but do not start with it (nor
-- does their last part: metastore.name_tail).
CREATE OR REPLACE FUNCTION metastore.search_substrings(
    p_lq                text,
    p_like              text,
    p_sample            integer,
    p_scan              integer,
    p_scan_jobs         integer,
    p_hidden_datasets   bigint[],
    p_hidden_jobs       bigint[],
    p_hidden_namespaces text[]
) RETURNS TABLE (type text, id bigint, namespace text, name text, kind text, lname text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- metastore.search turns sequential scans off; here the plan of each pattern may walk the table
-- (a common substring is met within its first pages) where that is cheaper than the index.
SET enable_seqscan = on
AS $fn$
DECLARE
    -- With a trigram index (pg_trgm) and q long enough to have a trigram, the first p_sample matches
    -- in storage order (EXECUTE: planned for the pattern at hand). Of datasets, the first c_walk
    -- names are walked first: a common q has p_sample matches there, and the index would build a
    -- bitmap of all its matches (49 000 for a common word among a million names) to give the same
    -- first ones. The index looks for the last c_window characters of q only, each match checked
    -- for the whole: its cost grows with the trigrams looked up, and a whole qualified name has
    -- dozens of common ones (hive, .s0.) where its last part alone is as selective. Otherwise the
    -- first p_scan names of the table in storage order (of jobs, the p_scan_jobs newest), a bounded
    -- look, which metastore.search reports.
    c_indexed constant text := $q$
        WITH walked AS MATERIALIZED (
            SELECT 'dataset'::text AS type, d.id, d.namespace, d.name, d.kind, lower(d.name) AS lname
              FROM (SELECT * FROM metastore.datasets LIMIT $12) AS d
             WHERE $1 AND strpos(lower(d.name), $11) > 0 AND lower(d.name) NOT LIKE $3
               AND lower(metastore.name_tail(d.name)) NOT LIKE $3 AND d.id <> ALL ($5) AND d.namespace <> ALL ($7)
             LIMIT $4)
        SELECT * FROM walked WHERE (SELECT count(*) FROM walked) >= $4
        UNION ALL
        SELECT * FROM (
            SELECT 'dataset'::text, d.id, d.namespace, d.name, d.kind, lower(d.name)
              FROM metastore.datasets AS d
             WHERE $1 AND (SELECT count(*) FROM walked) < $4
               AND lower(d.name) LIKE $10 AND strpos(lower(d.name), $11) > 0 AND lower(d.name) NOT LIKE $3
               AND lower(metastore.name_tail(d.name)) NOT LIKE $3 AND d.id <> ALL ($5) AND d.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT 'job'::text, j.id, j.namespace, j.name, NULL::text, lower(j.name)
              FROM metastore.jobs AS j
             WHERE $8 AND lower(j.name) LIKE $10 AND strpos(lower(j.name), $11) > 0 AND lower(j.name) NOT LIKE $3
               AND lower(metastore.name_tail(j.name)) NOT LIKE $3 AND j.id <> ALL ($6) AND j.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT DISTINCT 'field'::text, NULL::bigint, NULL::text, f.name, NULL::text, lower(f.name)
              FROM metastore.field_names AS f
             WHERE $9 AND lower(f.name) LIKE $10 AND strpos(lower(f.name), $11) > 0 AND lower(f.name) NOT LIKE $3
             LIMIT $4) AS x
    $q$;
    c_scanned constant text := $q$
        SELECT * FROM (
            SELECT 'dataset'::text, d.id, d.namespace, d.name, d.kind, lower(d.name)
              FROM (SELECT * FROM metastore.datasets LIMIT $10) AS d
             WHERE NOT $1 AND lower(d.name) LIKE $2 AND lower(d.name) NOT LIKE $3
               AND lower(metastore.name_tail(d.name)) NOT LIKE $3 AND d.id <> ALL ($5) AND d.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT 'job'::text, j.id, j.namespace, j.name, NULL::text, lower(j.name)
              FROM (SELECT * FROM metastore.jobs ORDER BY id DESC LIMIT $11) AS j
             WHERE NOT $8 AND lower(j.name) LIKE $2 AND lower(j.name) NOT LIKE $3
               AND lower(metastore.name_tail(j.name)) NOT LIKE $3 AND j.id <> ALL ($6) AND j.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT DISTINCT 'field'::text, NULL::bigint, NULL::text, f.name, NULL::text, lower(f.name)
              FROM (SELECT * FROM metastore.field_names LIMIT $10) AS f
             WHERE NOT $9 AND lower(f.name) LIKE $2 AND lower(f.name) NOT LIKE $3
             LIMIT $4) AS x
    $q$;
    c_window   constant integer := 12;
    c_walk     constant integer := 3000;
    v_window   text := right(p_lq, c_window);
    v_long     boolean := length(p_lq) >= 3;
    v_datasets boolean := v_long AND to_regclass('metastore.datasets_name_trgm_idx') IS NOT NULL;
    -- Job names have no trigram index (V0009): always the bounded look, newest jobs first.
    v_jobs     boolean := false;
    v_fields   boolean := v_long AND to_regclass('metastore.field_names_name_trgm_idx') IS NOT NULL;
BEGIN
    IF v_datasets OR v_jobs OR v_fields THEN
        RETURN QUERY EXECUTE c_indexed
            USING v_datasets, '%' || p_like || '%', p_like || '%', p_sample, p_hidden_datasets, p_hidden_jobs,
                  p_hidden_namespaces, v_jobs, v_fields,
                  '%' || replace(replace(replace(v_window, E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%',
                  p_lq, c_walk;
    END IF;
    IF NOT (v_datasets AND v_jobs AND v_fields) THEN
        RETURN QUERY EXECUTE c_scanned
            USING v_datasets, '%' || p_like || '%', p_like || '%', p_sample, p_hidden_datasets, p_hidden_jobs,
                  p_hidden_namespaces, v_jobs, v_fields, p_scan, p_scan_jobs;
    END IF;
END
$fn$;

COMMENT ON FUNCTION metastore.search_substrings(text, text, integer, integer, integer, bigint[], bigint[], text[]) IS
    'For metastore.search: up to p_sample dataset names, job names and field names each whose lower case '
    'holds p_lq (p_like: it as a LIKE pattern) but does not start with it, without the hidden ones given: '
    'through the trigram indexes of dataset and field names where pg_trgm made them and p_lq has 3 characters '
    'or more, else among the first p_scan rows of the table (of jobs, the p_scan_jobs newest).';

REVOKE ALL ON FUNCTION metastore.search_substrings(text, text, integer, integer, integer, bigint[], bigint[], text[])
    FROM PUBLIC;
