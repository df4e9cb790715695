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
    v_kind      text := metastore.check_source(p_source_kind, p_source_principal);
    v_read      record;
    v_payload   jsonb;
    v_valid     metastore.valid_event;
    v_duplicate boolean;
BEGIN
    SELECT r.payload, r.checked INTO v_read FROM metastore.read_event(p_body) AS r;
    v_payload := v_read.payload;
    v_valid := (v_read.checked).valid;
    error_code := (v_read.checked).error_code;
    error_message := (v_read.checked).error_message;
    IF error_code IS NOT NULL THEN
        -- The client's mistake: nothing of the event is stored, only a record of why (of
        -- well-formed JSON: a body that is not JSON is refused without a record).
        status := 'rejected';
        IF v_payload IS NOT NULL THEN
            IF pg_catalog.jsonb_typeof(v_payload -> 'eventType') = 'string' THEN
                event_type := pg_catalog.left(v_payload ->> 'eventType', 64);
            END IF;
            PERFORM metastore.record_rejection(p_body, error_code, error_message, v_kind, p_source_principal);
        END IF;
        RETURN;
    END IF;
    SELECT s.event_id, s.duplicate INTO event_id, v_duplicate
      FROM metastore.store_event(v_payload, v_valid, v_kind, p_source_principal) AS s;
    status := CASE WHEN v_duplicate THEN 'duplicate' ELSE 'stored' END;
    event_type := v_valid.event_type;
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_event(bytea, text, text) IS
    'Ingests one OpenLineage event given as UTF-8 JSON bytes. status: stored, duplicate (an equal event '
    'was stored before; event_id is that one) or rejected (error_code is the SQLSTATE, error_message says '
    'why; well-formed JSON is recorded in metastore.rejected_events); event_type is the eventType sent, if any. '
    'Rejection codes: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 54001 nested too deep; and '
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
