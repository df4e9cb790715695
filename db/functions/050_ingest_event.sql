CREATE OR REPLACE FUNCTION metastore.ingest_event(
    p_body             bytea,
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL,
    OUT status         text,
    OUT event_id       bigint,
    OUT error_code     text,
    OUT error_message  text,
    OUT event_type     text
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_kind text := metastore.check_source(p_source_kind, p_source_principal);
BEGIN
    SELECT i.status, i.event_id, i.error_code, i.error_message, i.event_type
      INTO status, event_id, error_code, error_message, event_type
      FROM metastore.read_event(p_body) AS r
     CROSS JOIN LATERAL metastore.ingest_checked(ARRAY[p_body], ARRAY[r.payload], ARRAY[r.checked], v_kind,
                                                p_source_principal) AS i;
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_event(bytea, text, text) IS
    'Ingests one OpenLineage event given as UTF-8 JSON bytes. status: stored, duplicate (an equal event '
    'was stored before; event_id is that one) or rejected (error_code is the SQLSTATE, error_message says '
    'why; well-formed JSON is recorded in metastore.rejected_events); event_type is the eventType sent, if any. '
    'Rejection codes: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 22030 an object with the same '
    'key twice; 54001 nested too deep; and '
    'those of metastore.validate_event. p_source_kind null means unauthenticated; raises 22023 for an unknown '
    'kind or a principal with the unauthenticated kind.';

REVOKE ALL ON FUNCTION metastore.ingest_event(bytea, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ingest_event(bytea, text, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
