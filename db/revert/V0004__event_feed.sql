-- Reverts V0004: the functions go first (they name the column and the table), then the table,
-- the index and the column.
DROP FUNCTION IF EXISTS metastore.forward_status();
DROP FUNCTION IF EXISTS metastore.forward_ack(text, text, text, integer, integer, text);
DROP FUNCTION IF EXISTS metastore.forward_claim(text, text, integer);
DROP FUNCTION IF EXISTS metastore.read_events(integer, text, text, text, text, text, text, text, text, text, text);
DROP TABLE metastore.forward_targets;
DROP INDEX metastore.events_feed_idx;
ALTER TABLE metastore.events DROP COLUMN xact_id;
