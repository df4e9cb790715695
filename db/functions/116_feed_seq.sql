-- The event feed on Citus: the place in metastore.feed_order a cursor names (its seq); 0 for a
-- null cursor, the place before the first event. The cursor is the one metastore.read_events and
-- metastore.forward_page return there: "s:" and the seq, in URL-safe base64. A cursor of the
-- feed on one server, "(transaction id):(event id)", names no place in this order and is refused.
CREATE OR REPLACE FUNCTION metastore.feed_seq(p_cursor text) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_seq text[];
BEGIN
    IF p_cursor IS NULL THEN
        RETURN 0;
    END IF;
    BEGIN
        v_seq := regexp_match(convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8'),
                              '^s:([0-9]{1,19})$');
        IF v_seq IS NOT NULL THEN
            RETURN v_seq[1]::bigint;
        END IF;
    EXCEPTION WHEN data_exception THEN
        v_seq := NULL;
    END;
    RAISE EXCEPTION USING
        ERRCODE = '22023',
        MESSAGE = 'cursor is not valid: pass the cursor of an event or the next_cursor of a page unchanged';
END
$fn$;

COMMENT ON FUNCTION metastore.feed_seq(text) IS
    'The seq of metastore.feed_order a feed cursor names on Citus; 0 for a null cursor. Error code: 22023 a cursor '
    'the feed did not return there (a cursor of the feed on one server included).';

REVOKE ALL ON FUNCTION metastore.feed_seq(text) FROM PUBLIC;
