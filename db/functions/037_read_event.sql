-- One received body, read and checked: the first step of every ingest function. Writes nothing
-- (see 035_validate_event.sql), so its exception block costs no subtransaction id.
CREATE OR REPLACE FUNCTION metastore.read_event(
    p_body      bytea,
    OUT payload jsonb,
    OUT checked metastore.checked_event
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_text text;
BEGIN
    BEGIN
        v_text := pg_catalog.convert_from(p_body, 'UTF8');
        payload := v_text::jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
        -- Not JSON PostgreSQL can hold: refused, and nothing to keep.
        GET STACKED DIAGNOSTICS checked.error_code = RETURNED_SQLSTATE, checked.error_message = MESSAGE_TEXT;
        RETURN;
    END;
    checked := metastore.check_event(payload);
    -- jsonb would keep the last of duplicate keys: not the event sent (033_json_unique_keys.sql).
    -- Only for an event that passed its checks: on PostgreSQL 15 this one prints the jsonb, which
    -- the checks (22003, 54M01) have made safe to print by then.
    IF checked.error_code IS NULL AND NOT metastore.json_has_unique_keys(v_text, payload) THEN
        checked := ROW(NULL, '22030', 'an object has the same key twice')::metastore.checked_event;
    END IF;
END
$fn$;

COMMENT ON FUNCTION metastore.read_event(bytea) IS
    'p_body (UTF-8 JSON bytes) as jsonb, and metastore.check_event''s answer for it. A body that is not '
    'JSON gives a null payload and its error: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; '
    '54001 nested too deep; 22030 an object with the same key twice (the payload is kept for the record).';

REVOKE ALL ON FUNCTION metastore.read_event(bytea) FROM PUBLIC;
