-- Citus: the event feed's order, assigned after commit by one sequencer (docs/events.md, "On
-- Citus"). Where the citus extension is present, ingest writes one row per new event to
-- metastore.feed_pending in the event's transaction, and metastore.sequence_feed moves the rows
-- whose event is visible to metastore.feed_order, numbering them; the feed reads by that number.
-- Both tables are plain tables of the coordinator (neither distributed nor reference tables: one
-- sequencer's local transaction is what makes the order). On plain PostgreSQL this change does
-- nothing: the feed's order there is (transaction id, event id) below the snapshot horizon.
DO $citus$
DECLARE
    v_ids bigint[];
    v_at  timestamptz[];
    v_target text;
    v_pos    text[];
    v_count  bigint;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus') THEN
        RETURN;
    END IF;
    -- One connection per node for the reads of the events below: the functions changed later in
    -- the same transaction cannot follow a parallel read of a distributed table.
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    CREATE TABLE metastore.feed_pending (
        event_id   bigint      NOT NULL,
        event_time timestamptz NOT NULL,
        CONSTRAINT feed_pending_pkey PRIMARY KEY (event_id)
    );
    COMMENT ON TABLE metastore.feed_pending IS
        'Citus only: events stored and not yet numbered in metastore.feed_order, written by ingest in the event''s '
        'transaction; metastore.sequence_feed moves each once its event is visible.';
    CREATE TABLE metastore.feed_order (
        seq        bigint      GENERATED ALWAYS AS IDENTITY,
        event_id   bigint      NOT NULL,
        event_time timestamptz NOT NULL,
        CONSTRAINT feed_order_pkey PRIMARY KEY (seq),
        CONSTRAINT feed_order_event_key UNIQUE (event_id)
    );
    -- Retention deletes the rows of the days it drops.
    CREATE INDEX feed_order_time_idx ON metastore.feed_order (event_time);
    COMMENT ON TABLE metastore.feed_order IS
        'Citus only: the event feed''s order. seq is assigned by metastore.sequence_feed (one at a time) once the '
        'event is visible; the feed reads by seq (docs/events.md). Gaps in seq are normal.';
    -- The events stored before: first, in the order the feed had on one server.
    SELECT pg_catalog.array_agg(e.id ORDER BY e.xact_id, e.id), pg_catalog.array_agg(e.event_time ORDER BY e.xact_id, e.id)
      INTO v_ids, v_at
      FROM metastore.events AS e;
    INSERT INTO metastore.feed_order (event_id, event_time)
    SELECT u.id, u.at FROM unnest(v_ids, v_at) WITH ORDINALITY AS u (id, at, n) ORDER BY u.n;
    -- Forwarding goes on where it was: a cursor (transaction id, event id) of one server's feed
    -- becomes the seq of the last event at or before it, which is their count (numbered from 1 in
    -- that order just above). A cursor that does not read as one starts over (sent again, not lost).
    FOR v_target, v_pos IN
        SELECT t.name, pg_catalog.regexp_match(pg_catalog.convert_from(pg_catalog.decode(
                   pg_catalog.translate(t.cursor, '-_', '+/'), 'base64'), 'UTF8'), '^([0-9]{1,20}):([0-9]{1,19})$')
          FROM metastore.forward_targets AS t
         WHERE t.cursor IS NOT NULL
    LOOP
        v_count := NULL;
        IF v_pos IS NOT NULL THEN
            SELECT pg_catalog.count(*) INTO v_count FROM metastore.events AS e
             WHERE (e.xact_id, e.id) <= (v_pos[1]::xid8, v_pos[2]::bigint);
        END IF;
        UPDATE metastore.forward_targets AS t
           SET cursor = CASE WHEN v_count > 0
                             THEN pg_catalog.translate(pg_catalog.encode(pg_catalog.convert_to('s:' || v_count::text, 'UTF8'),
                                                                         'base64'), E'+/\n', '-_') END
         WHERE t.name = v_target;
    END LOOP;
END
$citus$;
