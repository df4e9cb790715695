-- A SHARE lock on metastore.events until the caller's transaction ends: ingest waits for it, and it
-- waits for the ingest transactions in flight. metastore.backfill takes it for a few statements
-- (the cut of a rebuild, and its end). It never sits in the lock queue ahead of ingest for more
-- than 100 ms at a time: on a timeout it steps out, lets the writers behind it through, and tries
-- again, as create_partitions does. It returns the greatest event id, read once the lock is held:
-- a statement of the procedure itself would read it with the snapshot its transaction began with
-- (a procedure that commits keeps one per transaction), before the writers the lock waited for
-- had committed, and the cut would miss their events.
--
-- The partitioned table only, not its partitions: every writer of events goes through it (an insert
-- locks the parent before its partition; create_partitions and apply_retention lock it ONLY too),
-- while a VACUUM or ANALYZE of a partition, autovacuum's included, holds SHARE UPDATE EXCLUSIVE on
-- that partition for as long as it runs and never locks the parent (one of metastore.events itself,
-- by hand, does, and holds this lock off like a writer). Locked with its partitions, a rebuild after
-- a restore or a bulk load waits for autovacuum on the new events, 100 ms at a time (too short for
-- PostgreSQL to cancel autovacuum for it), and gives up: a backfill of a million events
-- (python -m bench.run --only backfill) did, with nothing else writing
-- (tests/db/functions/test_lock_events_briefly.py).
CREATE OR REPLACE FUNCTION metastore.lock_events_briefly() RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '100ms'
AS $fn$
BEGIN
    FOR v_try IN 1..20 LOOP
        BEGIN
            LOCK TABLE ONLY metastore.events IN SHARE MODE;
            RETURN (SELECT max(e.id) FROM metastore.events AS e);
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.01);
        END;
    END LOOP;
    RAISE EXCEPTION USING
        ERRCODE = '55P03',
        MESSAGE = 'could not lock metastore.events within 20 tries of 100 ms: a long transaction writes to it',
        HINT = 'Run it again when that transaction has ended (pg_stat_activity shows it).';
END
$fn$;

COMMENT ON FUNCTION metastore.lock_events_briefly() IS
    'Takes a SHARE lock on metastore.events (the partitioned table, not its partitions: a VACUUM of one does '
    'not hold it up) for the rest of the transaction, waiting at most 100 ms at a time '
    '(20 tries), and returns the greatest event id (null when there is none). For metastore.backfill. Error '
    'codes: 55P03 not obtained.';

REVOKE ALL ON FUNCTION metastore.lock_events_briefly() FROM PUBLIC;
