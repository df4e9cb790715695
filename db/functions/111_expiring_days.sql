-- The days that metastore.apply_retention(p_keep) would remove if called in the same transaction,
-- held still until that transaction ends: `metastore db retention --archive` writes each to a
-- file, then calls apply_retention, then commits, so that exactly the events archived are removed.
-- For the owner, not for the service.
CREATE OR REPLACE FUNCTION metastore.expiring_days(p_keep interval)
RETURNS TABLE (day date, time_from timestamptz, time_to timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'          -- days are UTC days, and the cutoff is apply_retention's
SET "DateStyle" = 'ISO, YMD'
SET lock_timeout = '100ms'      -- see the lock loop below
AS $fn$
DECLARE
    c_attempts constant integer := 20;
    v_cutoff   timestamptz;
    v_old      regclass[];
    v_locked   regclass[];
    v_part     regclass;
    v_days     date[];
BEGIN
    IF p_keep IS NULL OR p_keep < interval '1 day' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('p_keep must be at least 1 day, not %s', p_keep);
    END IF;
    -- now() is the transaction's start: apply_retention, called later in it, finds the same cutoff.
    v_cutoff := now() - p_keep;

    -- No partition is created or dropped until the transaction ends (create_partitions and
    -- apply_retention take this lock first): the days found here stay the days removed.
    PERFORM set_config('lock_timeout', '0', true);
    LOCK TABLE metastore_migrations.schema_version IN SHARE UPDATE EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', '100ms', true);

    -- apply_retention's choice: partitions of events that end at or before the cutoff.
    v_old := ARRAY(
        SELECT c.oid::regclass
          FROM pg_inherits AS i
          JOIN pg_class AS c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'metastore.events'::regclass
           AND substring(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)$')::timestamptz <= v_cutoff
         ORDER BY c.relname);

    -- Nothing can be stored into those partitions until the transaction ends (SHARE: readers go
    -- on; only a late event for one of those old days waits). Each wait is cut short, as in
    -- apply_retention, and the whole set is tried again; 55P03 after c_attempts.
    -- Not on Citus: there an insert into events locks every partition on the coordinator, so this
    -- would hold all ingest off for the whole run. A late event is caught by the count comparison
    -- alone (apply_retention counts what it removes), and the run rolls back.
    v_locked := CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus')
                     THEN '{}' ELSE v_old END;
    FOR v_attempt IN 1 .. c_attempts LOOP
        BEGIN
            FOREACH v_part IN ARRAY v_locked LOOP
                EXECUTE format('LOCK TABLE %s IN SHARE MODE', v_part);
            END LOOP;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF v_attempt = c_attempts THEN
                RAISE EXCEPTION USING
                    ERRCODE = '55P03',
                    MESSAGE = 'could not lock the expiring partitions of metastore.events to archive them',
                    HINT = 'A long transaction is storing into them. Try again later.';
            END IF;
            PERFORM pg_sleep(0.05 + random() * 0.1);
        END;
    END LOOP;

    -- A day per expiring partition, and per day of the default partition's rows older than the
    -- cutoff (apply_retention deletes those rows; the cutoff's own day only up to the cutoff). Rows
    -- stored into the default partition after this are not held off: apply_retention counts what
    -- it deletes there, and the archive compares that count with its own.
    v_days := ARRAY(SELECT substring(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)')::timestamptz::date
                      FROM pg_class AS c WHERE c.oid = ANY (v_old));
    -- A statement of its own, as Citus plans a distributed table beside the catalog only so; the
    -- day in UTC whatever the zone of the node that reads the rows (on Citus, a worker).
    v_days := v_days || ARRAY(SELECT DISTINCT (e.event_time AT TIME ZONE 'UTC')::date
                                FROM metastore.events_default AS e WHERE e.event_time < v_cutoff);
    RETURN QUERY
    SELECT d.day, d.day::timestamptz, least((d.day + 1)::timestamptz, v_cutoff)
      FROM (SELECT DISTINCT u.day FROM unnest(v_days) AS u (day)) AS d
     ORDER BY d.day;
END
$fn$;

COMMENT ON FUNCTION metastore.expiring_days(interval) IS
    'The UTC days whose events metastore.apply_retention(p_keep) would remove if called later in the same '
    'transaction: one row per day, with the range [time_from, time_to) of eventTime removed (the '
    'cutoff''s own day ends at the cutoff). Locks the expiring partitions of metastore.events against '
    'writes (not on Citus, where that would hold off all ingest), and partition changes, until the transaction '
    'ends, so that an archive of these days written before apply_retention holds every event it removes. Error codes: 22023 p_keep under 1 day; 55P03 '
    'the expiring partitions stayed locked by another transaction. Owner only.';

REVOKE ALL ON FUNCTION metastore.expiring_days(interval) FROM PUBLIC;
