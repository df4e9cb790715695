-- Retention: forgets the events (and their links) older than p_keep, a whole day at a time, and
-- the refused events received before the same cutoff.
-- For the owner (a DBA or a scheduled job), not for the service.
CREATE OR REPLACE FUNCTION metastore.apply_retention(p_keep interval) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
SET "DateStyle" = 'ISO, YMD'
SET lock_timeout = '100ms'      -- see the lock loop below
AS $fn$
DECLARE
    c_attempts constant integer := 20;
    v_cutoff   timestamptz;
    v_old      regclass[] := '{}';
    v_part     regclass;
    v_parent   regclass;
    v_count    bigint;
    v_events   bigint := 0;
    v_gone     timestamptz;
    v_rejected bigint := 0;
BEGIN
    IF p_keep IS NULL OR p_keep < interval '1 day' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = pg_catalog.format('p_keep must be at least 1 day, not %s', p_keep);
    END IF;
    v_cutoff := pg_catalog.now() - p_keep;

    -- Refused events are kept as long as events: rows only, no lock that ingest would wait for.
    DELETE FROM metastore.rejected_events AS r WHERE r.received_at < v_cutoff;
    GET DIAGNOSTICS v_rejected = ROW_COUNT;

    -- One maintainer at a time (this function and create_partitions), through a lock on a table
    -- only the owner may lock, not an advisory lock, which any role that connects can hold.
    PERFORM pg_catalog.set_config('lock_timeout', '0', true);
    LOCK TABLE metastore_migrations.schema_version IN SHARE UPDATE EXCLUSIVE MODE;
    PERFORM pg_catalog.set_config('lock_timeout', '100ms', true);

    -- Daily partitions (of either table) that end at or before the cutoff. The default
    -- partitions have no bound; a range ending at MAXVALUE has no date and is kept. Events are
    -- counted before the drop, without blocking anyone: an event stored for one of these old
    -- days in that instant is dropped with it, uncounted.
    FOR v_part, v_parent IN
        SELECT c.oid::regclass, i.inhparent::regclass
          FROM pg_catalog.pg_inherits AS i
          JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
         CROSS JOIN LATERAL (
               SELECT CASE WHEN i.inhparent IN ('metastore.events'::regclass, 'metastore.event_datasets'::regclass)
                           THEN pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                                     'TO \(''([^'']+)''\)$')::timestamptz
                      END AS upper_bound) AS b
         WHERE i.inhparent IN ('metastore.events'::regclass, 'metastore.event_datasets'::regclass)
           AND b.upper_bound <= v_cutoff
         ORDER BY b.upper_bound, c.relname
    LOOP
        v_old := v_old || v_part;
        IF v_parent = 'metastore.events'::regclass THEN
            EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s', v_part) INTO v_count;
            v_events := v_events + v_count;
        END IF;
    END LOOP;

    IF pg_catalog.cardinality(v_old) = 0
       AND NOT EXISTS (SELECT 1 FROM metastore.events_default AS e WHERE e.event_time < v_cutoff)
       AND NOT EXISTS (SELECT 1 FROM metastore.event_datasets_default AS l WHERE l.event_time < v_cutoff) THEN
        RETURN pg_catalog.jsonb_build_object('cutoff', v_cutoff, 'partitions_dropped', 0, 'events_removed', 0,
                                             'rejected_removed', v_rejected);
    END IF;

    -- Dropping a partition takes an ACCESS EXCLUSIVE lock on its parent until commit: ingest and
    -- reads wait for the drops (milliseconds). DETACH PARTITION ... CONCURRENTLY would not, but it
    -- cannot run inside a function (a transaction block), and a plain DETACH before the DROP
    -- would add work for nothing. Both parents are locked up front, events first as every writer and reader does;
    -- each wait is cut short by lock_timeout, so retention never queues long behind a long
    -- transaction (ingest would queue behind it): it releases everything and tries again, and
    -- gives up with 55P03 after c_attempts tries.
    FOR v_attempt IN 1 .. c_attempts LOOP
        BEGIN
            LOCK TABLE ONLY metastore.events, ONLY metastore.event_datasets IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF v_attempt = c_attempts THEN
                RAISE EXCEPTION USING
                    ERRCODE = '55P03',
                    MESSAGE = 'could not lock metastore.events and event_datasets to apply retention',
                    HINT = 'A long transaction holds them, e.g. CALL metastore.backfill(). Try again later.';
            END IF;
            PERFORM pg_catalog.pg_sleep(0.05 + pg_catalog.random() * 0.1);
        END;
    END LOOP;

    FOREACH v_part IN ARRAY v_old LOOP
        EXECUTE pg_catalog.format('DROP TABLE %s', v_part);
    END LOOP;

    -- Rows of the default partitions older than the cutoff go one by one; for events the
    -- append-only trigger is bypassed for this delete only, inside this transaction (on the
    -- parent, which passes it on to every partition, as create_partitions does: for Citus).
    IF EXISTS (SELECT 1 FROM metastore.events_default AS e WHERE e.event_time < v_cutoff) THEN
        PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
        ALTER TABLE metastore.events DISABLE TRIGGER events_append_only;
        DELETE FROM metastore.events_default AS e WHERE e.event_time < v_cutoff;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        v_events := v_events + v_count;
        ALTER TABLE metastore.events ENABLE TRIGGER events_append_only;
    END IF;
    DELETE FROM metastore.event_datasets_default AS l WHERE l.event_time < v_cutoff;

    -- Citus: the feed's rows (metastore.feed_order, feed_pending) of the events now gone, i.e. all
    -- before the cutoff, or before the day holding it where that day's partition stays. (A row
    -- whose event is gone is passed over by the feed anyway: this only frees the space.)
    IF pg_catalog.to_regclass('metastore.feed_order') IS NOT NULL THEN
        SELECT LEAST(v_cutoff, pg_catalog.min(b.lower_bound)) INTO v_gone
          FROM pg_catalog.pg_inherits AS i
          JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
         CROSS JOIN LATERAL (
               SELECT pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                           'FROM \(''([^'']+)''\)')::timestamptz AS lower_bound,
                      pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                           'TO \(''([^'']+)''\)$')::timestamptz AS upper_bound) AS b
         WHERE i.inhparent = 'metastore.events'::regclass
           AND b.upper_bound > v_cutoff;
        DELETE FROM metastore.feed_order AS o WHERE o.event_time < v_gone;
        DELETE FROM metastore.feed_pending AS p WHERE p.event_time < v_gone;
    END IF;

    RETURN pg_catalog.jsonb_build_object('cutoff', v_cutoff, 'partitions_dropped', pg_catalog.cardinality(v_old),
                                         'events_removed', v_events, 'rejected_removed', v_rejected);
END
$fn$;

COMMENT ON FUNCTION metastore.apply_retention(interval) IS
    'Forgets the events whose eventTime is older than now() - p_keep, with their links: drops the daily '
    'partitions of metastore.events and metastore.event_datasets that end at or before that cutoff, and '
    'deletes the older rows of their default partitions. Datasets keep what was learned (kind, first_seen, '
    'last_seen, counts, symlinks); CALL metastore.backfill() afterwards recomputes them from the events that '
    'remain. Also deletes the rows of metastore.rejected_events received before the cutoff. Returns '
    '{"cutoff", "partitions_dropped" (of both tables), "events_removed", "rejected_removed"}. Ingest waits while '
    'the partitions are dropped. Error codes: 22023 p_keep under 1 day; 55P03 the tables stayed locked by '
    'another transaction (e.g. a backfill): nothing was removed, try again later.';

REVOKE ALL ON FUNCTION metastore.apply_retention(interval) FROM PUBLIC;
