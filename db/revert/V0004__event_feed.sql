-- Reverts V0004: the feed's function goes first (it names the column), then the index and column.
DROP FUNCTION IF EXISTS metastore.read_events(integer, text, text, text, text, text, text, text, text, text, text);
DROP INDEX metastore.events_feed_idx;
ALTER TABLE metastore.events DROP COLUMN xact_id;
