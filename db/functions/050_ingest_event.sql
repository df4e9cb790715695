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
    v_payload   jsonb;
    v_checked   metastore.checked_event;
    v_duplicate boolean;
    v_text      text;
BEGIN
    BEGIN
        v_text := convert_from(p_body, 'UTF8');
        v_payload := v_text::jsonb;
        -- jsonb would keep the last of duplicate keys: not the event sent (037_json_unique_keys.sql).
        IF NOT metastore.json_has_unique_keys(v_text, v_payload) THEN
            RAISE EXCEPTION USING ERRCODE = '22030', MESSAGE = 'an object has the same key twice';
        END IF;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
        -- Not JSON PostgreSQL can hold: refused, and nothing to keep.
        GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
        status := 'rejected';
        RETURN;
    END;
    v_checked := metastore.check_event(v_payload);
    IF v_checked.error_code IS NOT NULL THEN
        -- The client's mistake: nothing of the event is stored, only a record of why.
        status := 'rejected';
        error_code := v_checked.error_code;
        error_message := v_checked.error_message;
        IF jsonb_typeof(v_payload -> 'eventType') = 'string' THEN
            event_type := left(v_payload ->> 'eventType', 64);
        END IF;
        INSERT INTO metastore.rejected_events (payload, sqlstate, reason, source_kind, source_principal)
        VALUES (v_payload, error_code, error_message, p_source_kind, p_source_principal);
        RETURN;
    END IF;
    SELECT s.event_id, s.duplicate INTO event_id, v_duplicate
      FROM metastore.store_event(v_payload, v_checked.valid, p_source_kind, p_source_principal) AS s;
    status := CASE WHEN v_duplicate THEN 'duplicate' ELSE 'stored' END;
    event_type := (v_checked.valid).event_type;
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_event(bytea, text, text) IS
    'Ingests one OpenLineage event given as UTF-8 JSON bytes. status: stored, duplicate (an equal event '
    'was stored before; event_id is that one) or rejected (error_code is the SQLSTATE, error_message says '
    'why; well-formed JSON is kept in metastore.rejected_events); event_type is the eventType sent, if any. '
    'Rejection codes: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 22030 a duplicate key; '
    '54001 nested too deep; and '
    'those of metastore.validate_event.';

REVOKE ALL ON FUNCTION metastore.ingest_event(bytea, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ingest_event(bytea, text, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
