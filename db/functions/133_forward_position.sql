-- Live forwarding: the place in the feed a cursor names, (transaction id, event id); a null cursor
-- names the place before the first event. The cursor is the one metastore.read_events returns.
CREATE OR REPLACE FUNCTION metastore.forward_position(
    p_cursor     text,
    OUT xact_id  xid8,
    OUT event_id bigint
)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_after text[];
BEGIN
    xact_id := '0';
    event_id := 0;
    IF p_cursor IS NULL THEN
        RETURN;
    END IF;
    BEGIN
        v_after := regexp_match(convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8'),
                                '^([0-9]{1,20}):([0-9]{1,19})$');
        -- PostgreSQL 15 reads a transaction id past 2^64 - 1 without an error: refuse it here.
        IF v_after[1]::numeric > 18446744073709551615 THEN
            v_after := NULL;
        END IF;
        xact_id := v_after[1]::xid8;
        event_id := v_after[2]::bigint;
    EXCEPTION WHEN data_exception THEN
        v_after := NULL;
    END;
    IF v_after IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = 'cursor is not valid: pass the cursor of an event or the next_cursor of a page unchanged';
    END IF;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_position(text) IS
    'The (transaction id, event id) a feed cursor names; (0, 0) for a null cursor. Error code: 22023 a cursor '
    'metastore.read_events did not return.';

REVOKE ALL ON FUNCTION metastore.forward_position(text) FROM PUBLIC;
