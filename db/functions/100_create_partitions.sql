-- Daily partitions of metastore.events and metastore.event_datasets, made ahead of time. For the
-- owner (a DBA, the deploy below): any range may take minutes and holds ingest off meanwhile. The
-- service calls metastore.ensure_partitions, which makes the fixed window only.
CREATE OR REPLACE FUNCTION metastore.create_partitions(
    p_from       date DEFAULT current_date - 1,
    p_days_ahead integer DEFAULT 14
) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'          -- days are UTC days
SET "DateStyle" = 'ISO, YMD'
SET lock_timeout = '100ms'      -- see the lock loop below
AS $fn$
DECLARE
    c_attempts constant integer := 20;
    v_last     date := current_date + p_days_ahead;
    v_days     date[];
    v_day      date;
    v_table    text;
    v_name     text;
    v_lo       timestamptz;
    v_hi       timestamptz;
    v_created  integer := 0;
BEGIN
    IF p_from IS NULL OR p_days_ahead IS NULL OR p_days_ahead < 0 OR p_days_ahead > 366 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('p_from must be a date and p_days_ahead from 0 to 366, not %s and %s', p_from, p_days_ahead);
    END IF;
    IF v_last - p_from > 3660 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('%s to %s is more than 3660 daily partitions', p_from, v_last);
    END IF;

    -- One maintainer at a time (this function and apply_retention): a second caller waits here,
    -- then finds the partitions made and returns 0. A lock on a table only the owner may lock (the
    -- ledger of changes, there from the first deploy; the app role reaches it only through
    -- ensure_partitions, for its own transaction), not an advisory lock, which any role that
    -- connects can take and hold for as long as its session lasts.
    PERFORM set_config('lock_timeout', '0', true);
    LOCK TABLE metastore_migrations.schema_version IN SHARE UPDATE EXCLUSIVE MODE;
    PERFORM set_config('lock_timeout', '100ms', true);

    v_days := ARRAY(SELECT d::date
                      FROM generate_series(p_from::timestamp, v_last::timestamp, interval '1 day') AS d
                     WHERE to_regclass(format('metastore.events_p%s', to_char(d, 'YYYYMMDD'))) IS NULL
                        OR to_regclass(format('metastore.event_datasets_p%s', to_char(d, 'YYYYMMDD'))) IS NULL
                     ORDER BY d);
    IF cardinality(v_days) = 0 THEN
        RETURN 0;
    END IF;

    -- Ingest is held off while partitions are attached (milliseconds): an insert routed to the
    -- default partition just before a new partition takes over its day would fail the partition
    -- constraint (23514). Links have no foreign key into metastore.datasets (change 5), so attaching
    -- one does not lock it. Writers lock events first, readers event_datasets or events: so every
    -- lock is taken up front, each wait is cut short by lock_timeout, and on a timeout all are
    -- released and tried again. Maintenance backs off; ingest and reads never deadlock with it.
    FOR v_attempt IN 1 .. c_attempts LOOP
        BEGIN
            LOCK TABLE ONLY metastore.events, ONLY metastore.event_datasets IN SHARE ROW EXCLUSIVE MODE;
            LOCK TABLE metastore.events_default, metastore.event_datasets_default IN ACCESS EXCLUSIVE MODE;
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF v_attempt = c_attempts THEN
                RAISE EXCEPTION USING
                    ERRCODE = '55P03',
                    MESSAGE = 'could not lock metastore.events and event_datasets to create partitions',
                    HINT = 'A long transaction holds them, e.g. CALL metastore.backfill(). Try again later.';
            END IF;
            PERFORM pg_sleep(0.05 + random() * 0.1);
        END;
    END LOOP;

    FOREACH v_day IN ARRAY v_days LOOP
        v_lo := v_day::timestamptz;
        v_hi := (v_day + 1)::timestamptz;
        FOREACH v_table IN ARRAY ARRAY['events', 'event_datasets'] LOOP
            v_name := format('%s_p%s', v_table, to_char(v_day, 'YYYYMMDD'));
            CONTINUE WHEN to_regclass(format('metastore.%I', v_name)) IS NOT NULL;

            -- Made standalone, filled, then attached: the CHECK constraint proves the bounds, so
            -- ATTACH does not scan it; the parent's indexes and trigger follow it.
            EXECUTE format('CREATE TABLE metastore.%I (LIKE metastore.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS '
                           'INCLUDING STORAGE INCLUDING COMPRESSION)', v_name, v_table);
            EXECUTE format('ALTER TABLE metastore.%I ADD CONSTRAINT %I CHECK (event_time >= %L AND event_time < %L)',
                           v_name, v_name || '_bounds', v_lo, v_hi);

            -- Rows of that day that waited in the default partition move in. For events the
            -- append-only trigger is bypassed for the move only: disabled and enabled again in
            -- this transaction, so no other session ever sees it off. On the parent, which passes
            -- it on to every partition: Citus cannot switch one partition's trigger alone, and
            -- switches a distributed table's only when told that such triggers are wanted.
            IF v_table = 'events' THEN
                IF EXISTS (SELECT 1 FROM metastore.events_default AS e WHERE e.event_time >= v_lo AND e.event_time < v_hi) THEN
                    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
                    ALTER TABLE metastore.events DISABLE TRIGGER events_append_only;
                    EXECUTE format('WITH moved AS (DELETE FROM metastore.events_default AS e '
                                   'WHERE e.event_time >= $1 AND e.event_time < $2 RETURNING e.*) '
                                   'INSERT INTO metastore.%I SELECT * FROM moved', v_name)
                        USING v_lo, v_hi;
                    ALTER TABLE metastore.events ENABLE TRIGGER events_append_only;
                END IF;
            ELSE
                EXECUTE format('WITH moved AS (DELETE FROM metastore.event_datasets_default AS l '
                               'WHERE l.event_time >= $1 AND l.event_time < $2 RETURNING l.*) '
                               'INSERT INTO metastore.%I SELECT * FROM moved', v_name)
                    USING v_lo, v_hi;
            END IF;

            EXECUTE format('ALTER TABLE metastore.%I ATTACH PARTITION metastore.%I FOR VALUES FROM (%L) TO (%L)',
                           v_table, v_name, v_lo, v_hi);
            EXECUTE format('ALTER TABLE metastore.%I DROP CONSTRAINT %I', v_name, v_name || '_bounds');
            v_created := v_created + 1;
        END LOOP;
    END LOOP;
    RETURN v_created;
END
$fn$;

COMMENT ON FUNCTION metastore.create_partitions(date, integer) IS
    'Creates the missing daily partitions (UTC days, named events_pYYYYMMDD and event_datasets_pYYYYMMDD) of '
    'metastore.events and metastore.event_datasets from p_from through today + p_days_ahead, moving the rows '
    'of those days out of the default partitions; returns how many partitions it created (0 when none were '
    'missing: it is idempotent, and concurrent callers take turns). Holds ingest off for the milliseconds '
    'the partitions take to attach. Error codes: 22023 bad arguments; 55P03 the tables stayed locked by '
    'another transaction (e.g. a backfill), try again later. Owner only: the service calls '
    'metastore.ensure_partitions().';

REVOKE ALL ON FUNCTION metastore.create_partitions(date, integer) FROM PUBLIC;
-- Earlier releases granted it to the service.
DO $revoke$
BEGIN
    EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION metastore.create_partitions(date, integer) FROM %I',
                              metastore.group_role('app'));
END
$revoke$;

-- On every deploy: the daily partitions from yesterday to 14 days ahead (UTC), so that a fresh
-- deploy stores events in their days at once. A no-op when they exist; the service makes the same
-- days at start and every hour (metastore.ensure_partitions).
SELECT metastore.create_partitions();
