-- Reverts V0012: the feed's order on Citus. The functions that use it look for the tables before
-- each use (to_regclass), so ingest goes on until the older release's deploy replaces them; the
-- sequencing functions go first (the older release's verify lists the functions exactly).
DROP FUNCTION IF EXISTS metastore.sequence_feed();
DROP FUNCTION IF EXISTS metastore.feed_seq(text);
DROP FUNCTION IF EXISTS metastore.read_sequenced_events(integer, text, timestamptz, timestamptz, timestamptz,
                                                        timestamptz, text, text, text, text, text);
DROP TABLE IF EXISTS metastore.feed_order;
DROP TABLE IF EXISTS metastore.feed_pending;
