-- The event feed: every event carries the id of the transaction that stored it, so that a
-- reader can page through events in commit-safe order (metastore.read_events).
--
-- Why not the identity alone: ids are handed out when a row is inserted, not when its
-- transaction commits, so id 11 can become visible after id 12 was read; a reader whose cursor
-- is "id > 12" never sees 11. The feed orders by (xact_id, id) instead and returns only rows
-- whose transaction is below the reader's snapshot horizon, pg_snapshot_xmin(pg_current_snapshot()):
-- every transaction below it has finished, so no row can ever appear behind the cursor.
--
-- Existing rows get xact_id 0 without a rewrite: a constant default is stored in the catalog
-- (a "missing value") and read for rows written before the column existed. Only then does the
-- default become the inserting transaction's id, for rows stored from now on; no ingest
-- function has to name the column. xid8 is 64 bits (epoch and xid): it never wraps around.
ALTER TABLE metastore.events ADD COLUMN xact_id xid8 NOT NULL DEFAULT '0';
ALTER TABLE metastore.events ALTER COLUMN xact_id SET DEFAULT pg_catalog.pg_current_xact_id();

-- On the parent: cascades to every partition, present and future (create_partitions attaches
-- tables made LIKE the parent, which get it on ATTACH). Builds on every partition once, here.
CREATE INDEX events_feed_idx ON metastore.events (xact_id, id);

COMMENT ON COLUMN metastore.events.xact_id IS
    'Id of the transaction that stored the event (pg_current_xact_id(); 0 for events stored before '
    'the feed existed). With id, the order of metastore.read_events: a page returns only rows whose '
    'transaction is below the reader''s snapshot xmin, all finished, so a cursor never skips a row '
    'that commits later. Kept when create_partitions moves a row out of the default partition.';

-- Live forwarding: the events table is the outbox (durable, ordered by the feed), and each
-- downstream keeps here the feed cursor of the last event it acknowledged. A forwarder (any
-- replica of the service) holds a lease on a target while it sends; on a restart of either side
-- it resumes after the cursor, so every event is delivered at least once, in the feed's order.
CREATE TABLE metastore.forward_targets (
    name          text PRIMARY KEY,
    cursor        text,
    sent          bigint      NOT NULL DEFAULT 0 CHECK (sent >= 0),
    refused       bigint      NOT NULL DEFAULT 0 CHECK (refused >= 0),
    lease_owner   text,
    lease_until   timestamptz,
    last_error    text,
    last_error_at timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
COMMENT ON TABLE metastore.forward_targets IS
    'Downstreams that receive every stored event (live forwarding), with the feed cursor of the last event each '
    'acknowledged and the lease of the forwarder sending to it. Written by metastore.forward_claim and forward_ack.';
COMMENT ON COLUMN metastore.forward_targets.cursor IS
    'metastore.read_events cursor of the last event the target answered; null: from the first event.';
COMMENT ON COLUMN metastore.forward_targets.refused IS 'Events the target refused with a 4xx (skipped: they would never pass).';
