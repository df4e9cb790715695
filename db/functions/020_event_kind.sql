-- No SET clause: called from the SECURITY DEFINER functions, whose pinned search_path it
-- inherits; without one, PostgreSQL can inline or call it without a configuration switch.
CREATE OR REPLACE FUNCTION metastore.event_kind(p_payload jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    -- A member set to JSON null counts as absent.
    SELECT CASE
        WHEN jsonb_typeof(p_payload -> 'run') = 'object'
         AND jsonb_typeof(p_payload -> 'job') = 'object' THEN 'run'
        WHEN coalesce(jsonb_typeof(p_payload -> 'run'), 'null') = 'null'
         AND jsonb_typeof(p_payload -> 'job') = 'object' THEN 'job'
        WHEN coalesce(jsonb_typeof(p_payload -> 'run'), 'null') = 'null'
         AND coalesce(jsonb_typeof(p_payload -> 'job'), 'null') = 'null'
         AND jsonb_typeof(p_payload -> 'dataset') = 'object' THEN 'dataset'
    END
$fn$;

COMMENT ON FUNCTION metastore.event_kind(jsonb) IS
    'OpenLineage event kind, told apart by shape as the spec does: run (run and job objects), '
    'job (job without run), dataset (dataset without run or job); null when it is none of them. '
    'A member set to JSON null counts as absent.';

REVOKE ALL ON FUNCTION metastore.event_kind(jsonb) FROM PUBLIC;
