-- The event feed on Citus: one sequencing pass. Moves the rows of metastore.feed_pending whose
-- event is visible here to metastore.feed_order, numbered in one statement; rows whose event a
-- worker has not yet made visible stay for a later pass. Ingest writes a pending row in its
-- event's transaction, so a row and its event are both visible once that transaction has
-- committed everywhere.
--
-- One pass at a time: each takes metastore.feed_order in EXCLUSIVE mode, held until its transaction
-- ends, i.e. after its commit is visible. So passes commit one after another in the order they
-- numbered their rows, which is what lets the feed read by seq without skipping (docs/events.md,
-- "On Citus"). A pass that finds another running waits for it rather than returning at once: it
-- then numbers what the other pass's snapshot was too early to see, so a page read after an event's
-- commit holds it. The wait is bounded below the read budget (lock_timeout); past it the pass
-- returns 0 and the reader reads what is numbered. A table lock, not an advisory lock, which any
-- role that connects could hold. Run in a transaction of its own: the service runs a pass before
-- each page of the feed and of forwarding; a pass that rolls back leaves a gap in seq and its rows
-- pending.
CREATE OR REPLACE FUNCTION metastore.sequence_feed() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '500ms'
AS $fn$
DECLARE
    -- Rows looked at per pass: one statement on the workers for all of them.
    c_batch constant integer := 5000;
    v_ids   bigint[];
    v_at    timestamptz[];
    v_ready bigint[];
    v_moved integer;
BEGIN
    IF to_regclass('metastore.feed_pending') IS NULL THEN
        RETURN NULL;  -- one server: the feed's order needs no sequencer
    END IF;
    -- At most half the caller's statement_timeout too, so that a short read budget is not spent
    -- waiting (0 would mean waiting without bound: hence at least 1 ms).
    PERFORM pg_catalog.set_config('lock_timeout',
                                  greatest(1, least(500, coalesce(nullif(s.setting::integer, 0) / 2, 500)))::text, true)
       FROM pg_catalog.pg_settings AS s WHERE s.name = 'statement_timeout';
    BEGIN
        LOCK TABLE metastore.feed_order IN EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;
    END;
    SELECT array_agg(p.event_id ORDER BY p.event_id), array_agg(p.event_time ORDER BY p.event_id)
      INTO v_ids, v_at
      FROM (SELECT q.event_id, q.event_time FROM metastore.feed_pending AS q ORDER BY q.event_id LIMIT c_batch) AS p;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    -- Ids are unique: the times only prune the shards asked.
    SELECT array_agg(e.id) INTO v_ready
      FROM metastore.events AS e
     WHERE e.id = ANY (v_ids) AND e.event_time = ANY (v_at);
    IF v_ready IS NULL THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM metastore.feed_pending AS p WHERE p.event_id = ANY (v_ready)
        RETURNING p.event_id, p.event_time
    )
    INSERT INTO metastore.feed_order (event_id, event_time)
    SELECT m.event_id, m.event_time FROM moved AS m ORDER BY m.event_id;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END
$fn$;

COMMENT ON FUNCTION metastore.sequence_feed() IS
    'Citus: one pass of the event feed''s sequencer: numbers (metastore.feed_order) the stored events of '
    'metastore.feed_pending that are visible, and returns how many; 0 when none is, or when another pass held the '
    'sequencer for longer than its wait (500 ms); NULL on '
    'one server, where the feed needs none. Call it in a transaction of its own before reading the feed.';

REVOKE ALL ON FUNCTION metastore.sequence_feed() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles): every reader of the feed runs it.
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.sequence_feed() TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
