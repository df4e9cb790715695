-- Which order the event feed reads: false on one server (transaction ids below the snapshot
-- horizon), true on Citus (metastore.feed_order, numbered after commit; docs/events.md, "On
-- Citus"). On Citus without that order (its change reverted) the feed is refused rather than read
-- in one server's order, which would skip events there.
CREATE OR REPLACE FUNCTION metastore.feed_sequenced() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus') THEN
        RETURN false;
    END IF;
    IF pg_catalog.to_regclass('metastore.feed_order') IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '0A000',
            MESSAGE = 'the event feed is not available: the events are distributed over Citus workers and '
                      'the feed''s order there (metastore.feed_order) is not deployed',
            HINT = 'Deploy this release''s changes (docs/events.md, "On Citus").';
    END IF;
    RETURN true;
END
$fn$;

COMMENT ON FUNCTION metastore.feed_sequenced() IS
    'Whether the event feed reads metastore.feed_order (Citus) rather than one server''s order. Error code: '
    '0A000 on Citus without that order.';

REVOKE ALL ON FUNCTION metastore.feed_sequenced() FROM PUBLIC;
