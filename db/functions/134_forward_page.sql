-- Live forwarding: the next events to send, in the feed's order, as few as make p_max_bytes of
-- rendered text (but always the first, whatever its size), at most p_limit. The feed's order and
-- horizon are those of metastore.read_events (the proof is there): only events of transactions
-- below the statement's snapshot xmin, ordered by (transaction id, event id), after the cursor.
--
-- Each event is rendered as it is returned, and the loop stops once the page holds p_max_bytes:
-- an event that prints to many megabytes (a stored 1e308 prints 309 digits) fills a page of its
-- own instead of making every page of 100 time out.
CREATE OR REPLACE FUNCTION metastore.forward_page(
    p_cursor    text,
    p_limit     integer DEFAULT 100,
    p_max_bytes integer DEFAULT 4194304
) RETURNS TABLE (cursor text, event_id bigint, payload text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_pos   record;
    v_row   record;
    v_bytes bigint := 0;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 OR p_max_bytes IS NULL OR p_max_bytes < 1 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('limit must be from 1 to 1000 and max_bytes 1 or more, not %s and %s',
                             p_limit, p_max_bytes);
    END IF;
    -- On Citus the order above does not hold: the events lie on the workers, each with its own
    -- transactions and visibility, and a horizon taken here can pass events a worker has not yet
    -- committed (docs/scale.md, section 5). Refused rather than skipping events silently.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus') THEN
        RAISE EXCEPTION USING
            ERRCODE = '0A000',
            MESSAGE = 'the event feed is not available where the events are distributed over Citus workers',
            HINT = 'Read datasets, jobs and runs through the read API; the feed, export, replay and forwarding '
                   'need the events on one PostgreSQL server (docs/scale.md, section 5).';
    END IF;
    SELECT * INTO v_pos FROM metastore.forward_position(p_cursor);
    FOR v_row IN
        SELECT e.xact_id, e.id, e.payload
          FROM metastore.events AS e
         WHERE (e.xact_id, e.id) > (v_pos.xact_id, v_pos.event_id)
           AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY e.xact_id, e.id
         LIMIT p_limit
    LOOP
        cursor := translate(encode(convert_to(v_row.xact_id::text || ':' || v_row.id::text, 'UTF8'), 'base64'),
                            E'+/\n', '-_');
        event_id := v_row.id;
        payload := v_row.payload::text;
        RETURN NEXT;
        v_bytes := v_bytes + octet_length(payload);
        EXIT WHEN v_bytes >= p_max_bytes;
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_page(text, integer, integer) IS
    'The next stored events after feed cursor p_cursor, in the order of metastore.read_events: each its cursor, '
    'id and payload as stored (JSON text); at most p_limit (1..1000), and no more once they add up to p_max_bytes '
    'of text (the first is returned whatever its size). Error codes: 22023 bad limits or a cursor not returned by '
    'the feed; 0A000 the events are distributed over Citus workers, where the feed''s order does not hold.';

REVOKE ALL ON FUNCTION metastore.forward_page(text, integer, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_page(text, integer, integer) TO %I',
                              metastore.group_role('app'));
END
$grant$;
