-- No SET clause: a SET keeps PostgreSQL from inlining a SQL function. Instead every function and
-- operator is qualified, so that no search_path can substitute another (db/CONVENTIONS.md).
CREATE OR REPLACE FUNCTION metastore.event_kind(p_payload jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    -- A member set to JSON null counts as absent.
    SELECT CASE
        WHEN pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'run'::text) OPERATOR(pg_catalog.=) 'object'::text
         AND pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'job'::text) OPERATOR(pg_catalog.=) 'object'::text
            THEN 'run'::text
        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'run'::text), 'null'::text)
                 OPERATOR(pg_catalog.=) 'null'::text
         AND pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'job'::text) OPERATOR(pg_catalog.=) 'object'::text
            THEN 'job'::text
        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'run'::text), 'null'::text)
                 OPERATOR(pg_catalog.=) 'null'::text
         AND coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'job'::text), 'null'::text)
                 OPERATOR(pg_catalog.=) 'null'::text
         AND pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'dataset'::text) OPERATOR(pg_catalog.=) 'object'::text
            THEN 'dataset'::text
    END
$fn$;

COMMENT ON FUNCTION metastore.event_kind(jsonb) IS
    'OpenLineage event kind, told apart by shape as the spec does: run (run and job objects), '
    'job (job without run), dataset (dataset without run or job); null when it is none of them. '
    'A member set to JSON null counts as absent.';

REVOKE ALL ON FUNCTION metastore.event_kind(jsonb) FROM PUBLIC;
