CREATE OR REPLACE FUNCTION metastore.ingest_events(
    p_bodies           bytea[],
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL
) RETURNS TABLE (status text, event_id bigint, error_code text, error_message text, event_type text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_count    integer := coalesce(array_length(p_bodies, 1), 0);
    v_payloads jsonb[] := '{}';
    v_checked  metastore.checked_event[] := '{}';
    v_i        integer;
    v_text     text;
BEGIN
    -- 1. Read and check every body; nothing is written yet.
    FOR v_i IN 1 .. v_count LOOP
        v_payloads[v_i] := NULL;
        BEGIN
            v_text := convert_from(p_bodies[v_i], 'UTF8');
            v_payloads[v_i] := v_text::jsonb;
            -- jsonb would keep the last of duplicate keys: not the event sent (037_json_unique_keys.sql).
            IF NOT metastore.json_has_unique_keys(v_text, v_payloads[v_i]) THEN
                v_payloads[v_i] := NULL;
                RAISE EXCEPTION USING ERRCODE = '22030', MESSAGE = 'an object has the same key twice';
            END IF;
        EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
            GET STACKED DIAGNOSTICS error_code = RETURNED_SQLSTATE, error_message = MESSAGE_TEXT;
            v_checked[v_i] := ROW(NULL, error_code, error_message)::metastore.checked_event;
            CONTINUE;
        END;
        v_checked[v_i] := metastore.check_event(v_payloads[v_i]);
    END LOOP;

    -- 2. Lock the datasets they share with other writers, in one order; then store, in the order received.
    PERFORM metastore.lock_datasets(ARRAY(SELECT (c).valid FROM unnest(v_checked) AS c
                                           WHERE (c).error_code IS NULL));
    FOR v_i IN 1 .. v_count LOOP
        IF (v_checked[v_i]).error_code IS NOT NULL THEN
            IF v_payloads[v_i] IS NOT NULL THEN
                INSERT INTO metastore.rejected_events (payload, sqlstate, reason, source_kind, source_principal)
                VALUES (v_payloads[v_i], (v_checked[v_i]).error_code, (v_checked[v_i]).error_message,
                        p_source_kind, p_source_principal);
            END IF;
            status := 'rejected';
            event_id := NULL;
            error_code := (v_checked[v_i]).error_code;
            error_message := (v_checked[v_i]).error_message;
            event_type := CASE WHEN jsonb_typeof(v_payloads[v_i] -> 'eventType') = 'string'
                               THEN left(v_payloads[v_i] ->> 'eventType', 64) END;
        ELSE
            SELECT s.event_id, CASE WHEN s.duplicate THEN 'duplicate' ELSE 'stored' END
              INTO event_id, status
              FROM metastore.store_event(v_payloads[v_i], (v_checked[v_i]).valid, p_source_kind,
                                         p_source_principal) AS s;
            error_code := NULL;
            error_message := NULL;
            event_type := ((v_checked[v_i]).valid).event_type;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_events(bytea[], text, text) IS
    'Ingests several separately received events (each UTF-8 JSON bytes) in one transaction: one result row '
    'per body, in order, as metastore.ingest_event gives it. Used by the service''s asynchronous writer.';

REVOKE ALL ON FUNCTION metastore.ingest_events(bytea[], text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ingest_events(bytea[], text, text) TO %I', metastore.group_role('app'));
END
$grant$;
