CREATE SCHEMA metastore;

COMMENT ON SCHEMA metastore IS 'Metadata Store: raw OpenLineage events and the datasets derived from them. Tables are for DBAs; applications use the functions and the *_view views.';

CREATE SCHEMA metastore_migrations;

CREATE TYPE metastore.dataset_mention AS (
	namespace text,
	name text,
	direction text,
	symlink_of_namespace text,
	symlink_of_name text,
	symlink_type text
);

COMMENT ON TYPE metastore.dataset_mention IS 'One dataset an event mentions (metastore.extract_datasets); symlink_of_* name the dataset whose symlinks facet gave it, null for an input, output or DatasetEvent dataset itself.';

CREATE TYPE metastore.valid_event AS (
	event_kind text,
	event_type text,
	event_time timestamp with time zone,
	run_id text,
	job_namespace text,
	job_name text,
	producer text,
	schema_url text,
	mentions metastore.dataset_mention[]
);

COMMENT ON TYPE metastore.valid_event IS 'What metastore.validate_event read from an event that passed validation: the columns of metastore.events and the datasets it mentions.';

CREATE TYPE metastore.checked_event AS (
	valid metastore.valid_event,
	error_code text,
	error_message text
);

COMMENT ON TYPE metastore.checked_event IS 'metastore.check_event''s answer: what a valid event says, or why it was refused (SQLSTATE, message).';

CREATE TYPE metastore_migrations.schema_version_type AS ENUM (
    'auto',
    'manual'
);

CREATE FUNCTION metastore.apply_retention(p_keep interval) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET "DateStyle" TO 'ISO, YMD'
    SET lock_timeout TO '100ms'
    AS $_$
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
$_$;

COMMENT ON FUNCTION metastore.apply_retention(p_keep interval) IS 'Forgets the events whose eventTime is older than now() - p_keep, with their links: drops the daily partitions of metastore.events and metastore.event_datasets that end at or before that cutoff, and deletes the older rows of their default partitions. Datasets keep what was learned (kind, first_seen, last_seen, counts, symlinks); CALL metastore.backfill() afterwards recomputes them from the events that remain. Also deletes the rows of metastore.rejected_events received before the cutoff. Returns {"cutoff", "partitions_dropped" (of both tables), "events_removed", "rejected_removed"}. Ingest waits while the partitions are dropped. Error codes: 22023 p_keep under 1 day; 55P03 the tables stayed locked by another transaction (e.g. a backfill): nothing was removed, try again later.';

CREATE PROCEDURE metastore.backfill(IN p_batch_size integer DEFAULT 10000)
    LANGUAGE plpgsql
    AS $$
DECLARE
    -- Events per transaction (at most p_batch_size), one call of each derivation: big enough that a
    -- statement's cost is shared by many events, small enough that the payloads stay a few MB. One
    -- call per table and transaction is what keeps concurrent sessions from deadlocking: each
    -- statement takes its rows in key order, and no transaction comes back to a table.
    c_set       constant integer := 1000;
    -- Datasets folded per transaction.
    c_fold      constant integer := 10000;
    v_size      integer;
    v_rules     text;
    -- A record, not metastore.derive_state: a deploy to a change before V0005 applies db/functions too.
    v_state     record;
    -- The state this call found as it began, before it waited for any lock.
    v_found     record;
    v_started   boolean := false;
    v_finish    boolean := false;
    v_gen       integer;
    v_high      bigint;
    v_from      bigint := 0;
    v_low       bigint;
    v_top       bigint;
    v_done      bigint := 0;
    v_layer     boolean;
    v_jobs      boolean;
    v_runs_io   boolean;
    v_table     text;
    v_ids       bigint[];
    v_linked    bigint[];
    v_times     timestamptz[];
    v_payloads  jsonb[];
    v_events    metastore.valid_event[];
    v_datasets  jsonb;
    v_last      bigint;
    v_removed   bigint;
    v_locked    timestamptz;
    v_held_ms   numeric := 0;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
    IF p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'p_batch_size must be a positive number';
    END IF;
    v_size := least(p_batch_size, c_set);
    v_layer := pg_catalog.to_regclass('metastore.column_lineage') IS NOT NULL;
    v_jobs := pg_catalog.to_regclass('metastore.runs') IS NOT NULL;
    v_runs_io := pg_catalog.to_regclass('metastore.run_datasets') IS NOT NULL;
    -- The rules a rebuild derives with: a deploy that changed them since it started restarts it.
    SELECT pg_catalog.md5(pg_catalog.string_agg(p.prosrc, '' ORDER BY p.proname, p.oid)) INTO v_rules
      FROM pg_catalog.pg_proc AS p
     WHERE p.pronamespace = 'metastore'::regnamespace
       AND p.proname IN ('event_kind', 'extract_datasets', 'derive_datasets', 'derive_lineage', 'derive_job_run',
                         'derive_run_datasets');

    -- 1. Join the rebuild under way, or start one.
    SELECT s.generation, s.rebuild INTO v_found FROM metastore.derive_state AS s;
    LOOP
        SELECT * INTO v_state FROM metastore.derive_state FOR UPDATE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'metastore.derive_state has no row: the deploy makes it, see V0005';
        END IF;
        IF v_state.rebuild = 'none' AND v_state.rebuild_rules IS NOT DISTINCT FROM v_rules
           AND (v_state.generation > v_found.generation OR v_found.rebuild <> 'none') THEN
            -- A rebuild with these rules ended since this call began: one under way then, whose last
            -- session held this row while this call waited for it, or one started since (by this
            -- call, overtaken by the others). Starting another would derive everything again: a
            -- session of `metastore db backfill --sessions N` would, were it the last to arrive.
            COMMIT;
            RAISE NOTICE 'backfill: the rebuild of generation % ended as this call came to it', v_state.generation;
            RETURN;
        END IF;
        IF v_state.rebuild = 'none' OR v_state.rebuild_rules IS DISTINCT FROM v_rules THEN
            -- The cut: the lock waits for the ingest transactions in flight, and holds new ones
            -- until this transaction commits, a few statements on.
            v_high := metastore.lock_events_briefly();
            v_locked := pg_catalog.clock_timestamp();
            UPDATE metastore.derive_state
               SET generation = generation + 1, rebuild = 'starting', rebuild_rules = v_rules,
                   rebuild_high_id = coalesce(v_high, 0), rebuild_started_at = pg_catalog.clock_timestamp(),
                   rebuild_finished_at = NULL;
            v_held_ms := pg_catalog.round(extract(epoch FROM pg_catalog.clock_timestamp() - v_locked)::numeric * 1000, 1);
            v_started := true;
        ELSIF v_state.rebuild = 'starting' THEN
            -- The ranges of the cut, out of its lock (there may be many: ids are never reused). Who
            -- comes first after the cut writes them: its session, or one that finds it gone.
            DELETE FROM metastore.rebuild_ranges;
            INSERT INTO metastore.rebuild_ranges (low, high)
            SELECT r.low, least(r.low + v_size, v_state.rebuild_high_id)
              FROM pg_catalog.generate_series(0::bigint, v_state.rebuild_high_id - 1, v_size) AS r (low);
            UPDATE metastore.derive_state SET rebuild = 'deriving';
        ELSE
            v_gen := v_state.generation;
            -- A rebuild found finishing is finished by this call too (its finisher may be gone).
            v_finish := v_state.rebuild = 'finishing';
        END IF;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
        EXIT WHEN v_gen IS NOT NULL;
    END LOOP;
    IF v_started THEN
        RAISE NOTICE 'backfill: generation % started, for the events up to id % (ingest held % ms)', v_gen,
                     coalesce(v_high, 0), v_held_ms;
    ELSE
        RAISE NOTICE 'backfill: joined the rebuild of generation %', v_gen;
    END IF;

    -- 2. Derive a range per transaction until none is left.
    WHILE NOT v_finish LOOP
        SELECT * INTO v_state FROM metastore.derive_state FOR SHARE;
        EXIT WHEN v_state.rebuild <> 'deriving';
        IF v_state.generation <> v_gen THEN
            -- A newer rebuild started (a deploy of other rules): its ranges are the ones left.
            v_gen := v_state.generation;
            v_from := 0;
        END IF;
        SELECT r.low, r.high INTO v_low, v_top
          FROM metastore.rebuild_ranges AS r
         WHERE r.low >= v_from
         ORDER BY r.low LIMIT 1
           FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN
            COMMIT;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
            -- Ranges below were taken by sessions that may have stopped since: look once more from
            -- the start, then leave.
            EXIT WHEN v_from = 0;
            v_from := 0;
            CONTINUE;
        END IF;
        v_from := v_top;
        -- The lock a writer of events takes: create_partitions (SHARE ROW EXCLUSIVE) cannot move
        -- rows out of the default partition while the read below is planned. Without it, a plan
        -- made before the move without the new partition, run with a snapshot after it, misses
        -- the rows moved.
        LOCK TABLE ONLY metastore.events IN ROW EXCLUSIVE MODE;
        -- The rows first, extracted from after: Citus reads them from every shard, and refuses a
        -- function like extract_datasets inside such a read.
        WITH e AS MATERIALIZED (
            SELECT e.id, e.event_time, e.payload, e.event_kind, e.event_type, e.run_id, e.job_namespace, e.job_name,
                   e.producer, e.schema_url
              FROM metastore.events AS e
             WHERE e.id > v_low AND e.id <= v_top)
        SELECT pg_catalog.array_agg(e.id ORDER BY e.id), pg_catalog.array_agg(e.event_time ORDER BY e.id),
               pg_catalog.array_agg(e.payload ORDER BY e.id),
               pg_catalog.array_agg(ROW(e.event_kind, e.event_type, e.event_time, e.run_id, e.job_namespace,
                                        e.job_name, e.producer, e.schema_url, NULL)::metastore.valid_event ORDER BY e.id)
          INTO v_ids, v_times, v_payloads, v_events
          FROM e;
        -- None in the range when retention dropped its day, or ids were never used.
        IF v_ids IS NOT NULL THEN
            -- The datasets each event mentions, read from the array: it holds the payloads
            -- decompressed, where the column holds a large one compressed, and extract_datasets
            -- applies a dozen operators to an event, each of which decompressed the column again.
            v_events := ARRAY(SELECT ROW(u.event_kind, u.event_type, u.event_time, u.run_id, u.job_namespace,
                                         u.job_name, u.producer, u.schema_url,
                                         ARRAY(SELECT x FROM metastore.extract_datasets(u.payload) AS x)
                                         )::metastore.valid_event
                                FROM ROWS FROM (pg_catalog.unnest(v_payloads), pg_catalog.unnest(v_events)) WITH ORDINALITY
                                     AS u (payload)
                               ORDER BY u.ordinality);
            -- Links are per event: the range's are made anew.
            DELETE FROM metastore.event_datasets AS l WHERE l.event_id = ANY (v_ids) AND l.event_time = ANY (v_times);
            v_datasets := metastore.derive_datasets(v_ids, v_events, false);
            IF v_layer THEN
                PERFORM metastore.derive_lineage(v_ids, v_payloads, v_events, v_datasets);
            END IF;
            IF v_jobs THEN
                PERFORM metastore.derive_job_run(v_payloads, v_events);
                IF v_runs_io THEN
                    PERFORM metastore.derive_run_datasets(v_events, v_datasets);
                END IF;
            END IF;
            v_done := v_done + pg_catalog.cardinality(v_ids);
        END IF;
        DELETE FROM metastore.rebuild_ranges AS r WHERE r.low = v_low;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
        IF v_done > 0 AND v_done % 100000 < v_size THEN
            RAISE NOTICE 'backfill: % events derived by this session', v_done;
        END IF;
    END LOOP;

    -- 3. Datasets fold their activity, while the other sessions derive their last ranges; then the
    -- last session out folds what those added and removes what no event of the new generation
    -- reached. A range of dataset ids per transaction, each range's rows locked in (namespace,
    -- name) order as every writer takes them.
    LOOP
        v_last := 0;
        LOOP
            SELECT * INTO v_state FROM metastore.derive_state FOR SHARE;
            IF v_state.generation <> v_gen OR v_state.rebuild NOT IN ('deriving', 'finishing') THEN
                COMMIT;
                RAISE NOTICE 'backfill: % events derived by this session; generation % is over, or a newer one '
                             'started: its sessions finish it', v_done, v_gen;
                RETURN;
            END IF;
            v_ids := ARRAY(SELECT d.id FROM metastore.datasets AS d WHERE d.id > v_last ORDER BY d.id LIMIT c_fold);
            EXIT WHEN pg_catalog.cardinality(v_ids) = 0;
            PERFORM metastore.fold_rebuilt_datasets(v_ids, v_gen);
            v_last := v_ids[pg_catalog.cardinality(v_ids)];
            COMMIT;
            PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
        END LOOP;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
        EXIT WHEN v_finish;
        SELECT * INTO v_state FROM metastore.derive_state FOR UPDATE;
        IF v_state.generation <> v_gen OR v_state.rebuild <> 'deriving'
           OR EXISTS (SELECT FROM metastore.rebuild_ranges) THEN
            COMMIT;
            RAISE NOTICE 'backfill: % events derived by this session; the last session of generation % finishes it',
                         v_done, v_gen;
            RETURN;
        END IF;
        UPDATE metastore.derive_state SET rebuild = 'finishing';
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
        v_finish := true;
    END LOOP;

    -- Rows of the other tables that no event of the new generation reached, a table per
    -- transaction, locked in the key order ingest takes them in (jobs by namespace and name, runs by
    -- job and run id, collation C), and only while the generation is the one this session finishes.
    -- A table only where its change is deployed.
    FOREACH v_table IN ARRAY ARRAY['run_datasets', 'runs', 'jobs', 'column_lineage', 'lineage_edges',
                                   'dataset_schema_versions', 'dataset_symlinks'] LOOP
        CONTINUE WHEN (v_table = 'run_datasets' AND NOT v_runs_io) OR (v_table IN ('runs', 'jobs') AND NOT v_jobs)
                   OR (v_table IN ('column_lineage', 'lineage_edges', 'dataset_schema_versions') AND NOT v_layer);
        SELECT * INTO v_state FROM metastore.derive_state FOR SHARE;
        IF v_state.generation = v_gen AND v_state.rebuild = 'finishing' THEN
            CASE v_table
            WHEN 'run_datasets' THEN
                DELETE FROM metastore.run_datasets AS t
                 WHERE (t.run_id, t.dataset_id, t.direction) IN (
                        SELECT s.run_id, s.dataset_id, s.direction FROM metastore.run_datasets AS s
                         WHERE s.generation < v_gen ORDER BY 1, 2, 3 FOR UPDATE);
            WHEN 'runs' THEN
                DELETE FROM metastore.runs AS t
                 WHERE t.id IN (SELECT s.id FROM metastore.runs AS s WHERE s.generation < v_gen
                                 ORDER BY s.job_id, s.run_id COLLATE "C" FOR UPDATE);
            WHEN 'jobs' THEN
                DELETE FROM metastore.jobs AS t
                 WHERE t.id IN (SELECT s.id FROM metastore.jobs AS s WHERE s.generation < v_gen
                                 ORDER BY s.namespace COLLATE "C", s.name COLLATE "C" FOR UPDATE);
            WHEN 'column_lineage' THEN
                DELETE FROM metastore.column_lineage AS t
                 WHERE (t.output_dataset_id, t.input_dataset_id, t.edge_sha256) IN (
                        SELECT s.output_dataset_id, s.input_dataset_id, s.edge_sha256 FROM metastore.column_lineage AS s
                         WHERE s.generation < v_gen ORDER BY 1, 2, 3 FOR UPDATE);
            WHEN 'lineage_edges' THEN
                DELETE FROM metastore.lineage_edges AS t
                 WHERE (t.upstream_id, t.downstream_id, t.job_sha256) IN (
                        SELECT s.upstream_id, s.downstream_id, s.job_sha256 FROM metastore.lineage_edges AS s
                         WHERE s.generation < v_gen ORDER BY 1, 2, 3 FOR UPDATE);
            WHEN 'dataset_schema_versions' THEN
                DELETE FROM metastore.dataset_schema_versions AS t
                 WHERE (t.dataset_id, t.fields_sha256) IN (
                        SELECT s.dataset_id, s.fields_sha256 FROM metastore.dataset_schema_versions AS s
                         WHERE s.generation < v_gen ORDER BY 1, 2 FOR UPDATE);
            WHEN 'dataset_symlinks' THEN
                DELETE FROM metastore.dataset_symlinks AS t
                 WHERE (t.dataset_id, t.symlink_id, t.type) IN (
                        SELECT s.dataset_id, s.symlink_id, s.type FROM metastore.dataset_symlinks AS s
                         WHERE s.generation < v_gen ORDER BY 1, 2, 3 FOR UPDATE);
            END CASE;
        END IF;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
    END LOOP;

    -- Last, the datasets of the old generation: folded if an event of the new one named them since,
    -- removed otherwise, under the cut's locks again (a few statements): no event can name one of
    -- them between the fold and the delete. Links point only at datasets their events mention, so
    -- none point at those removed.
    SELECT * INTO v_state FROM metastore.derive_state FOR UPDATE;
    IF v_state.generation <> v_gen OR v_state.rebuild <> 'finishing' THEN
        COMMIT;
        RAISE NOTICE 'backfill: generation % is over, or a newer one started: its sessions finish it', v_gen;
        RETURN;
    END IF;
    PERFORM metastore.lock_events_briefly();
    v_locked := pg_catalog.clock_timestamp();
    v_ids := ARRAY(SELECT d.id FROM metastore.datasets AS d WHERE d.generation < v_gen);
    PERFORM metastore.fold_rebuilt_datasets(v_ids, v_gen);
    -- Those a link names, read first: Citus deletes from a table of the coordinator only with
    -- conditions on such tables (the links may be distributed).
    v_linked := ARRAY(SELECT DISTINCT l.dataset_id FROM metastore.event_datasets AS l WHERE l.dataset_id = ANY (v_ids));
    WITH stale AS (
        DELETE FROM metastore.datasets AS d
         WHERE d.id = ANY (v_ids) AND d.generation < v_gen
           AND d.id NOT IN (SELECT u.id FROM pg_catalog.unnest(v_linked) AS u (id))
           AND NOT EXISTS (SELECT FROM metastore.dataset_symlinks AS s WHERE d.id IN (s.dataset_id, s.symlink_id))
        RETURNING d.id)
    SELECT pg_catalog.array_agg(stale.id) INTO v_ids FROM stale;
    v_removed := coalesce(pg_catalog.cardinality(v_ids), 0);
    DELETE FROM metastore.dataset_activity AS a WHERE a.dataset_id = ANY (v_ids);
    UPDATE metastore.derive_state SET rebuild = 'none', rebuild_finished_at = pg_catalog.clock_timestamp();
    DELETE FROM metastore.rebuild_ranges;
    v_held_ms := pg_catalog.round(extract(epoch FROM pg_catalog.clock_timestamp() - v_locked)::numeric * 1000, 1);
    COMMIT;
    RAISE NOTICE 'backfill: generation % finished (% events derived by this session, % datasets no event '
                 'mentions removed, ingest held % ms)', v_gen, v_done, v_removed, v_held_ms;
END
$$;

COMMENT ON PROCEDURE metastore.backfill(IN p_batch_size integer) IS 'Rebuilds datasets, dataset_activity, event_datasets, dataset_symlinks, dataset_schema_versions, lineage_edges, column_lineage, jobs, runs and run_datasets from metastore.events with the rules live ingest uses (metastore.derive_datasets, derive_lineage, derive_job_run, derive_run_datasets), while ingest goes on. Run it with CALL outside a transaction block, in one session or in several at once (they share the work). A call starts a rebuild (a new generation, at a cut taken under a brief SHARE lock on metastore.events) or joins the one under way (or leaves, when one with the same rules ended since it began), derives the events up to the cut p_batch_size (at most 1000) per transaction, and the last session out removes what no event reached; a rebuild stopped at any point resumes at the next call, and one whose rules a deploy changed starts again. Ids of datasets, jobs and runs are kept. Error codes: 22023 p_batch_size not positive; 55P03 the cut''s lock not obtained within about 2 s (retry).';

CREATE FUNCTION metastore.check_event(p_payload jsonb) RETURNS metastore.checked_event
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_result metastore.checked_event;
    v_detail text;
BEGIN
    v_result.valid := metastore.validate_event(p_payload);
    RETURN v_result;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
    GET STACKED DIAGNOSTICS v_result.error_code = RETURNED_SQLSTATE, v_result.error_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL;
    IF v_detail <> '' THEN
        v_result.error_message := v_result.error_message || ': ' || v_detail;
    END IF;
    RETURN v_result;
END
$$;

COMMENT ON FUNCTION metastore.check_event(p_payload jsonb) IS 'metastore.validate_event, with a refusal returned as error_code (SQLSTATE) and error_message instead of raised; valid is null then.';

CREATE FUNCTION metastore.check_source(p_source_kind text, p_source_principal text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- No kind said: the sender is unknown.
    IF p_source_kind IS NULL THEN
        p_source_kind := 'unauthenticated';
    END IF;
    IF p_source_kind NOT IN ('unauthenticated', 'inferred', 'authenticated') THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('source kind must be unauthenticated, inferred or authenticated, not %s',
                                        pg_catalog.quote_literal(pg_catalog.left(p_source_kind, 64)));
    END IF;
    IF p_source_principal IS NOT NULL AND p_source_kind = 'unauthenticated' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = 'an unauthenticated source has no principal';
    END IF;
    RETURN p_source_kind;
END
$$;

COMMENT ON FUNCTION metastore.check_source(p_source_kind text, p_source_principal text) IS 'The source kind to record for what the service says of a sender: null means unauthenticated. Error codes: 22023 an unknown kind, or a principal with the unauthenticated kind.';

CREATE FUNCTION metastore.create_partitions(p_from date DEFAULT (CURRENT_DATE - 1), p_days_ahead integer DEFAULT 14) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET "DateStyle" TO 'ISO, YMD'
    SET lock_timeout TO '100ms'
    AS $_$
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
$_$;

COMMENT ON FUNCTION metastore.create_partitions(p_from date, p_days_ahead integer) IS 'Creates the missing daily partitions (UTC days, named events_pYYYYMMDD and event_datasets_pYYYYMMDD) of metastore.events and metastore.event_datasets from p_from through today + p_days_ahead, moving the rows of those days out of the default partitions; returns how many partitions it created (0 when none were missing: it is idempotent, and concurrent callers take turns). Holds ingest off for the milliseconds the partitions take to attach. Error codes: 22023 bad arguments; 55P03 the tables stayed locked by another transaction (e.g. a backfill), try again later. Owner only: the service calls metastore.ensure_partitions().';

CREATE FUNCTION metastore.dataset_aliases(p_ids bigint[], p_limit integer) RETURNS bigint[]
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    v_all bigint[] := ARRAY(SELECT DISTINCT x FROM unnest(p_ids) AS x WHERE x IS NOT NULL ORDER BY x);
    v_new bigint[] := v_all;
BEGIN
    -- Both ways (carrier -> identifier, identifier -> carriers), to a fixed point: two paths that
    -- carry one table identifier are aliases of each other. Bounded by p_limit ids.
    WHILE cardinality(v_new) > 0 AND cardinality(v_all) < p_limit LOOP
        v_new := ARRAY(
            SELECT DISTINCT n.id
              FROM (SELECT s.symlink_id AS id FROM metastore.dataset_symlinks AS s WHERE s.dataset_id = ANY (v_new)
                    UNION ALL
                    SELECT s.dataset_id FROM metastore.dataset_symlinks AS s WHERE s.symlink_id = ANY (v_new)) AS n
             WHERE n.id <> ALL (v_all)
             ORDER BY n.id
             LIMIT p_limit - cardinality(v_all));
        v_all := v_all || v_new;
    END LOOP;
    RETURN v_all;
END
$$;

COMMENT ON FUNCTION metastore.dataset_aliases(p_ids bigint[], p_limit integer) IS 'The datasets p_ids name, with every dataset linked to them by metastore.dataset_symlinks, either way and transitively, at most p_limit ids (the given ones first).';

CREATE FUNCTION metastore.dataset_key(p_namespace text, p_name text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    -- The text's bytes in the database encoding: decode of the text with its backslashes
    -- doubled, which is immutable (convert_to is only stable, so no index could use it). Text
    -- never holds a zero byte: the separator makes the key injective and keeps the order.
    SELECT pg_catalog.decode(pg_catalog.replace(p_namespace, '\'::pg_catalog.text, '\\'::pg_catalog.text),
                             'escape'::pg_catalog.text)
           OPERATOR(pg_catalog.||) '\x00'::pg_catalog.bytea
           OPERATOR(pg_catalog.||) pg_catalog.decode(pg_catalog.replace(p_name, '\'::pg_catalog.text,
                                                                        '\\'::pg_catalog.text),
                                                     'escape'::pg_catalog.text)
$$;

COMMENT ON FUNCTION metastore.dataset_key(p_namespace text, p_name text) IS 'The bytes of namespace, a zero byte, the bytes of name: one key per (namespace, name) whose byte order is theirs. metastore.datasets.name_key is its sha256; datasets_order_idx indexes its first 1024 bytes. Frozen (defined by change 5): indexes hold its results.';

CREATE FUNCTION metastore.dataset_layer(p_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    -- Bounds of the lists: a dataset page, not an export.
    c_versions constant integer := 20;
    c_hop      constant integer := 100;
    c_columns  constant integer := 1000;
    v_aliases  bigint[] := metastore.dataset_aliases(ARRAY[p_id], c_hop);
    v_hide     record := metastore.hidden_names();
BEGIN
    -- db/functions is applied whatever the deploy's target: before change 6 the page stays as it was.
    IF to_regclass('metastore.column_lineage') IS NULL THEN
        RETURN jsonb_build_object('fields', '[]'::jsonb, 'schema_versions', '[]'::jsonb,
                                  'column_lineage', '[]'::jsonb, 'upstream', '[]'::jsonb, 'downstream', '[]'::jsonb);
    END IF;
    RETURN jsonb_build_object(
        -- The newest version by eventTime is the current schema.
        'fields', coalesce((SELECT v.fields FROM metastore.dataset_schema_versions AS v
                             WHERE v.dataset_id = p_id
                             ORDER BY v.last_seen DESC, v.first_seen DESC, v.fields_sha256 LIMIT 1), '[]'),
        'schema_versions', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'fields_sha256', encode(v.fields_sha256, 'hex'), 'field_count', jsonb_array_length(v.fields),
                       'first_event_id', v.first_event_id, 'first_seen', v.first_seen, 'last_seen', v.last_seen,
                       'fields', v.fields)
                       ORDER BY v.last_seen DESC, v.first_seen DESC, v.fields_sha256), '[]')
              FROM (SELECT * FROM metastore.dataset_schema_versions AS v WHERE v.dataset_id = p_id
                     ORDER BY v.last_seen DESC, v.first_seen DESC, v.fields_sha256 LIMIT c_versions) AS v),
        'column_lineage', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'field', nullif(c.output_field, ''),
                       'input', jsonb_build_object('id', d.id, 'namespace', d.namespace, 'name', d.name),
                       'input_field', c.input_field, 'transformation_type', c.transformation_type,
                       'transformation_subtype', c.transformation_subtype,
                       'first_seen', c.first_seen, 'last_seen', c.last_seen)
                       ORDER BY c.output_field, d.namespace, d.name, c.input_field,
                                c.transformation_type, c.transformation_subtype), '[]')
              FROM (SELECT * FROM metastore.column_lineage AS c WHERE c.output_dataset_id = p_id
                       AND c.input_dataset_id <> ALL (v_hide.dataset_ids)
                     ORDER BY c.output_field, c.input_dataset_id, c.input_field,
                              c.transformation_type, c.transformation_subtype
                     LIMIT c_columns) AS c
              JOIN metastore.datasets_view AS d ON d.id = c.input_dataset_id
             WHERE d.namespace <> ALL (v_hide.namespaces)),
        -- One hop, from the dataset and its symlink aliases.
        'upstream', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind,
                       'jobs', n.jobs, 'last_seen', n.last_seen) ORDER BY d.namespace, d.name), '[]')
              FROM (SELECT e.upstream_id AS id, count(DISTINCT e.job_sha256) AS jobs, max(e.last_seen) AS last_seen
                      FROM metastore.lineage_edges AS e
                      JOIN metastore.datasets AS u ON u.id = e.upstream_id
                     WHERE e.downstream_id = ANY (v_aliases)
                       AND u.id <> ALL (v_hide.dataset_ids) AND u.namespace <> ALL (v_hide.namespaces)
                       AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                     GROUP BY e.upstream_id ORDER BY e.upstream_id LIMIT c_hop) AS n
              JOIN metastore.datasets_view AS d ON d.id = n.id),
        'downstream', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind,
                       'jobs', n.jobs, 'last_seen', n.last_seen) ORDER BY d.namespace, d.name), '[]')
              FROM (SELECT e.downstream_id AS id, count(DISTINCT e.job_sha256) AS jobs, max(e.last_seen) AS last_seen
                      FROM metastore.lineage_edges AS e
                      JOIN metastore.datasets AS w ON w.id = e.downstream_id
                     WHERE e.upstream_id = ANY (v_aliases)
                       AND w.id <> ALL (v_hide.dataset_ids) AND w.namespace <> ALL (v_hide.namespaces)
                       AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                     GROUP BY e.downstream_id ORDER BY e.downstream_id LIMIT c_hop) AS n
              JOIN metastore.datasets_view AS d ON d.id = n.id));
END
$$;

COMMENT ON FUNCTION metastore.dataset_layer(p_id bigint) IS 'For metastore.get_dataset: a dataset''s current fields (its newest schema version by eventTime), its schema_versions (newest 20), column_lineage (output field <- input dataset and field, at most 1000; field null: the dataset-level list), and one hop of upstream and downstream datasets (at most 100 each, with the number of jobs), crossing symlinks. Hidden datasets and jobs (metastore.hide) are left out.';

CREATE FUNCTION metastore.dataset_lineage(p_id bigint, p_direction text DEFAULT 'both'::text, p_depth integer DEFAULT 3, p_node_limit integer DEFAULT 200) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- The graph without job nodes: one implementation (metastore.lineage_graph), this signature kept
    -- for callers of the previous release.
    RETURN metastore.lineage_graph(p_id, p_direction, p_depth, p_node_limit, NULL);
END
$$;

COMMENT ON FUNCTION metastore.dataset_lineage(p_id bigint, p_direction text, p_depth integer, p_node_limit integer) IS 'The lineage graph around a dataset: {id, direction, depth, nodes, edges, truncated}. nodes: the dataset and its symlink aliases (side self, depth 0), then what p_depth hops upstream and/or downstream reach (each with its aliases), at most p_node_limit. edges: lineage (from upstream to downstream, with the number of jobs) and symlink (from the dataset carrying the identifier to it) between listed nodes, at most 4 x p_node_limit. truncated: a limit cut the graph. Hidden datasets and jobs (metastore.hide) are not there. metastore.lineage_graph with p_include null. Error codes: 22023 direction not upstream/downstream/both, depth outside 1..10, node limit outside 1..1000; P0002 no such dataset.';

CREATE FUNCTION metastore.dataset_runs(p_dataset_id bigint, p_limit integer DEFAULT 20) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    v_hide  record := metastore.hidden_names();
    v_ids   bigint[];
    v_times timestamptz[];
    v_ns    text[];
    v_jobs  text[];
    v_run   text[];
    v_dir   text[];
    v_at    timestamptz[];
    v_runs  jsonb;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 100, not %s', p_limit);
    END IF;
    IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                    WHERE d.id = p_dataset_id AND d.id <> ALL (v_hide.dataset_ids)
                      AND d.namespace <> ALL (v_hide.namespaces)) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_dataset_id);
    END IF;

    -- Its newest read and write links, a bounded number (a run reads or writes a dataset in one or
    -- two events): the (dataset_id, event_time, event_id) index of each partition, newest first.
    SELECT coalesce(array_agg(w.event_id), '{}'), coalesce(array_agg(w.event_time), '{}')
      INTO v_ids, v_times
      FROM (SELECT l.event_id, l.event_time
              FROM metastore.event_datasets AS l
             WHERE l.dataset_id = p_dataset_id AND l.direction IN ('input', 'output')
             ORDER BY l.event_time DESC, l.event_id DESC
             LIMIT 4 * p_limit) AS w;

    -- Their events' runs, from the partitions of those eventTimes only (EXECUTE: planned for them).
    -- The links' events, read apart from jobs and runs: a statement of its own that joins only the
    -- co-located raw tables, so that on Citus it runs on the workers, and the join below reads
    -- jobs and runs by key (beside a distributed table Citus would read both whole).
    SELECT coalesce(array_agg(e.job_namespace), '{}'), coalesce(array_agg(e.job_name), '{}'),
           coalesce(array_agg(e.run_id), '{}'), coalesce(array_agg(l.direction), '{}'),
           coalesce(array_agg(l.event_time), '{}')
      INTO v_ns, v_jobs, v_run, v_dir, v_at
      FROM metastore.event_datasets AS l
      JOIN metastore.events AS e ON e.id = l.event_id AND e.event_time = l.event_time
     WHERE l.dataset_id = p_dataset_id AND l.event_id = ANY (v_ids) AND l.event_time = ANY (v_times)
       AND e.event_time = ANY (v_times) AND l.direction IN ('input', 'output');

    EXECUTE
        'SELECT coalesce(jsonb_agg(x.run ORDER BY x.seen DESC, x.id DESC), ''[]'')
           FROM (SELECT r.id, max(l.event_time) AS seen,
                        jsonb_build_object(
                            ''id'', r.id, ''run_id'', r.run_id, ''state'', r.state,
                            ''started_at'', r.started_at, ''ended_at'', r.ended_at,
                            ''duration_s'', extract(epoch FROM r.duration),
                            ''error_message'', r.error_message,
                            ''trino_user'', r.trino_user, ''trino_source'', r.trino_source,
                            ''job'', jsonb_build_object(''id'', j.id, ''namespace'', j.namespace, ''name'', j.name),
                            ''sql'', j.latest_sql,
                            ''read'', bool_or(l.direction = ''input''),
                            ''wrote'', bool_or(l.direction = ''output'')) AS run
                   FROM unnest($1, $2, $3, $4, $5) AS l (job_namespace, job_name, run_id, direction, event_time)
                   JOIN metastore.jobs AS j
                     ON j.name_key = pg_catalog.sha256(metastore.dataset_key(l.job_namespace, l.job_name))
                   JOIN metastore.runs_view AS r ON r.job_id = j.id AND r.run_id = l.run_id
                  WHERE j.id <> ALL ($7) AND j.namespace <> ALL ($8)
                  GROUP BY r.id, r.run_id, r.state, r.started_at, r.ended_at, r.duration, r.error_message,
                           r.trino_user, r.trino_source, j.id, j.namespace, j.name, j.latest_sql
                  ORDER BY seen DESC, r.id DESC
                  LIMIT $6) AS x'
        INTO v_runs
        USING v_ns, v_jobs, v_run, v_dir, v_at, p_limit, v_hide.job_ids, v_hide.namespaces;
    RETURN jsonb_build_object('dataset_id', p_dataset_id, 'runs', v_runs);
END
$_$;

COMMENT ON FUNCTION metastore.dataset_runs(p_dataset_id bigint, p_limit integer) IS 'The latest runs (at most p_limit, newest first) that read or wrote a dataset, among its newest 4 * p_limit read and write links, each with its state, times, job and the job''s latest SQL: {"dataset_id", "runs": [...]}. A hidden dataset (metastore.hide) is not found, runs of hidden jobs are not listed. Error codes: P0002 no such dataset; 22023 limit outside 1..100.';

CREATE FUNCTION metastore.dataset_summary(p_namespaces_limit integer DEFAULT 500) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    -- What the view's filters offer: every scheme and the busiest namespaces, with counts; what the
    -- owner hid (metastore.hide) is not counted.
    WITH h AS (SELECT * FROM metastore.hidden_names()),
    v AS NOT MATERIALIZED (SELECT d.scheme, d.namespace FROM metastore.datasets AS d, h
           WHERE d.id <> ALL (h.dataset_ids) AND d.namespace <> ALL (h.namespaces))
    SELECT jsonb_build_object(
        'datasets', (SELECT count(*) FROM v),
        'schemes', (SELECT coalesce(jsonb_agg(jsonb_build_object('scheme', s.scheme, 'datasets', s.n)
                                              ORDER BY s.scheme NULLS LAST), '[]')
                      FROM (SELECT v.scheme, count(*) AS n FROM v GROUP BY v.scheme) AS s),
        'namespaces', (SELECT coalesce(jsonb_agg(jsonb_build_object('namespace', n.namespace, 'datasets', n.n)
                                                 ORDER BY n.namespace), '[]')
                         FROM (SELECT v.namespace, count(*) AS n FROM v
                                GROUP BY v.namespace ORDER BY count(*) DESC, v.namespace
                                LIMIT greatest(p_namespaces_limit, 0)) AS n))
$$;

COMMENT ON FUNCTION metastore.dataset_summary(p_namespaces_limit integer) IS 'Counts for the view''s filters: all datasets, per scheme (null: no scheme), and per namespace (the p_namespaces_limit namespaces with most datasets, ordered by name); hidden datasets and namespaces (metastore.hide) are not counted.';

CREATE FUNCTION metastore.datasets_with_field(p_field text, p_limit integer DEFAULT 100) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    -- A field few datasets have is found through the GIN index and its datasets sorted; one many
    -- have (an "id") is found by walking datasets in order until the page is full. Neither way
    -- alone is bounded: sorting every dataset with an "id" took 0.4 to 2 s at a million datasets,
    -- and a walk to the end for a rare field reads all of them. The planner cannot choose, as it
    -- has no estimate for a jsonb containment, so the count of datasets whose current version has
    -- the field decides (bench.lineage --field-search).
    c_few   constant integer := 5000;
    v_few   bigint[];
    v_rows  jsonb := '[]';
    v_chunk bigint[];
    v_after bytea;
    v_size  integer := p_limit * 4;
BEGIN
    IF p_field IS NULL OR p_field = '' OR octet_length(p_field) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'field must be a name of 1 to 1000 bytes';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    -- Current versions only: a field many datasets had and dropped would otherwise send a search
    -- that finds few on a walk through every dataset (2 s at 200 000 datasets).
    v_few := ARRAY(SELECT v.dataset_id FROM metastore.dataset_schema_versions AS v
                    WHERE jsonb_path_query_array(v.fields, '$[*].name') @> jsonb_build_array(p_field)
                      AND NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                       WHERE n.dataset_id = v.dataset_id
                                         AND (n.last_seen, n.first_seen, v.fields_sha256)
                                             > (v.last_seen, v.first_seen, n.fields_sha256))
                    LIMIT c_few + 1);
    IF cardinality(v_few) <= c_few THEN
        v_rows := metastore.datasets_with_field_among(v_few, p_field, p_limit);
    ELSE
        -- Chunks of datasets in (namespace, name) order, the order of datasets_order_idx (as
        -- metastore.list_datasets pages), each checked in one statement, until the page is full.
        LOOP
            v_chunk := ARRAY(SELECT d.id FROM metastore.datasets AS d
                              WHERE v_after IS NULL
                                 OR (substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= substr(v_after, 1, 1024)
                                     AND metastore.dataset_key(d.namespace, d.name) > v_after)
                              ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024),
                                       metastore.dataset_key(d.namespace, d.name)
                              LIMIT v_size);
            EXIT WHEN cardinality(v_chunk) = 0;
            v_rows := v_rows || metastore.datasets_with_field_among(v_chunk, p_field, p_limit - jsonb_array_length(v_rows));
            EXIT WHEN jsonb_array_length(v_rows) >= p_limit OR cardinality(v_chunk) < v_size;
            SELECT metastore.dataset_key(d.namespace, d.name) INTO v_after
              FROM metastore.datasets AS d WHERE d.id = v_chunk[cardinality(v_chunk)];
            v_size := least(v_size * 2, 20000);
        END LOOP;
    END IF;
    RETURN jsonb_build_object('field', p_field, 'datasets', v_rows);
END
$_$;

COMMENT ON FUNCTION metastore.datasets_with_field(p_field text, p_limit integer) IS 'Datasets whose current fields (metastore.get_dataset''s "fields") have a top-level field named exactly p_field: {field, datasets}, in (namespace, name) byte order as metastore.list_datasets, at most p_limit; hidden datasets (metastore.hide) are left out. Error codes: 22023 field empty or over 1000 bytes, limit outside 1..1000.';

CREATE FUNCTION metastore.datasets_with_field_among(p_ids bigint[], p_field text, p_limit integer) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    v_hide record := metastore.hidden_names();
BEGIN
    -- PL/pgSQL, not SQL: db/functions are applied at every version, also before change 6 made these tables.
    RETURN (SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.namespace COLLATE "C", d.name COLLATE "C"), '[]')
      FROM (SELECT d.*
              FROM metastore.datasets_view AS d
             WHERE d.id = ANY (p_ids)
               -- What the owner hid (metastore.hide) is not listed.
               AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
               AND EXISTS (SELECT FROM metastore.dataset_schema_versions AS v
                            WHERE v.dataset_id = d.id
                              AND jsonb_path_query_array(v.fields, '$[*].name') @> jsonb_build_array(p_field)
                              AND NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                               WHERE n.dataset_id = v.dataset_id
                                                 AND (n.last_seen, n.first_seen, v.fields_sha256)
                                                     > (v.last_seen, v.first_seen, n.fields_sha256)))
             ORDER BY d.namespace COLLATE "C", d.name COLLATE "C"
             LIMIT p_limit) AS d);
END
$_$;

COMMENT ON FUNCTION metastore.datasets_with_field_among(p_ids bigint[], p_field text, p_limit integer) IS 'metastore.datasets_with_field''s page among the datasets p_ids: those whose current fields have a top-level field named p_field, at most p_limit, in (namespace, name) byte order, without the hidden ones (metastore.hide). Owner only.';

CREATE FUNCTION metastore.derive_datasets(p_event_ids bigint[], p_events metastore.valid_event[], p_roll_up boolean) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_generation integer := metastore.derive_generation();
    v_id_of      jsonb;
    v_added      bigint[] := '{}';
    v_named      boolean;
    v_missing    boolean;
BEGIN
    -- p_events[i] is what metastore.validate_event read from the event stored as p_event_ids[i].
    -- Every dataset mentioned, looked up by its key (a probe each). The statements below find a
    -- mention's id in this jsonb object keyed by [namespace, name], not by a join to arrays: the
    -- generic plan, which guesses ten rows for each side, joined every mention to all of the set's
    -- datasets.
    SELECT coalesce(jsonb_object_agg(metastore.mention_key(m.namespace, m.name), d.id) FILTER (WHERE d.id IS NOT NULL),
                    '{}'),
           coalesce(bool_or(d.kind = 'symlink' AND m.direct), false), coalesce(bool_or(d.id IS NULL), false)
      INTO v_id_of, v_named, v_missing
      FROM (SELECT x.namespace, x.name, bool_or(x.symlink_of_namespace IS NULL) AS direct
              FROM unnest(p_events) AS u CROSS JOIN LATERAL unnest(u.mentions) AS x
             GROUP BY x.namespace, x.name) AS m
      LEFT JOIN metastore.datasets AS d ON d.name_key = sha256(metastore.dataset_key(m.namespace, m.name));

    IF v_missing THEN
        -- New datasets take what these events say, in (namespace, name) order. An existing dataset
        -- is not updated (that would lock its row until commit, and events sharing it would commit
        -- one at a time): the events' part goes to dataset_activity below.
        WITH added AS (
            INSERT INTO metastore.datasets AS d (namespace, name, kind, first_seen, last_seen, input_events,
                                                 output_events, generation)
            SELECT x.namespace, x.name,
                   CASE WHEN bool_or(x.symlink_of_namespace IS NULL) THEN 'dataset' ELSE 'symlink' END,
                   min(u.event_time), max(u.event_time),
                   count(DISTINCT u.id) FILTER (WHERE x.direction = 'input'),
                   count(DISTINCT u.id) FILTER (WHERE x.direction = 'output'),
                   v_generation
              FROM ROWS FROM (unnest(p_event_ids), unnest(p_events))
                   AS u (id)
             CROSS JOIN LATERAL unnest(u.mentions) AS x
             WHERE NOT v_id_of ? metastore.mention_key(x.namespace, x.name)
             GROUP BY x.namespace, x.name
             ORDER BY x.namespace, x.name
            ON CONFLICT (name_key) DO NOTHING
            RETURNING d.id, d.namespace, d.name)
        SELECT coalesce(array_agg(a.id), '{}'),
               v_id_of || coalesce(jsonb_object_agg(metastore.mention_key(a.namespace, a.name), a.id), '{}')
          INTO v_added, v_id_of
          FROM added AS a;
        -- Those another writer stored meanwhile (the insert waited for it to commit): a statement of
        -- its own sees them.
        SELECT v_id_of || coalesce(jsonb_object_agg(metastore.mention_key(m.namespace, m.name), d.id), '{}'),
               v_named OR coalesce(bool_or(d.kind = 'symlink' AND m.direct), false)
          INTO v_id_of, v_named
          FROM (SELECT x.namespace, x.name, bool_or(x.symlink_of_namespace IS NULL) AS direct
                  FROM unnest(p_events) AS u CROSS JOIN LATERAL unnest(u.mentions) AS x
                 WHERE NOT v_id_of ? metastore.mention_key(x.namespace, x.name)
                 GROUP BY x.namespace, x.name) AS m
          JOIN metastore.datasets AS d ON d.name_key = sha256(metastore.dataset_key(m.namespace, m.name));
    END IF;
    IF v_id_of = '{}' THEN
        RETURN v_id_of;
    END IF;

    -- What the events add to datasets stored before them. datasets_view adds it and
    -- metastore.roll_up_datasets folds it in (a rebuild, when it ends, for a dataset of an older
    -- generation).
    INSERT INTO metastore.dataset_activity (dataset_id, first_seen, last_seen, input_events, output_events,
                                            generation, direct)
    SELECT x.id, min(x.event_time), max(x.event_time),
           count(DISTINCT x.event_id) FILTER (WHERE x.direction = 'input'),
           count(DISTINCT x.event_id) FILTER (WHERE x.direction = 'output'),
           v_generation, bool_or(x.direct)
      FROM (SELECT u.id AS event_id, u.event_time, m.direction, m.symlink_of_namespace IS NULL AS direct,
                   (v_id_of ->> metastore.mention_key(m.namespace, m.name))::bigint AS id
              FROM ROWS FROM (unnest(p_event_ids), unnest(p_events))
                   AS u (id)
             CROSS JOIN LATERAL unnest(u.mentions) AS m) AS x
     WHERE x.id <> ALL (v_added)
     GROUP BY x.id;

    -- Known so far only as a symlink, now named directly: the one change that locks a row (in
    -- (namespace, name) order, as roll_up_datasets takes them).
    IF v_named THEN
        UPDATE metastore.datasets AS d SET kind = 'dataset'
          FROM (SELECT s.id FROM metastore.datasets AS s
                 WHERE s.kind = 'symlink' AND s.id <> ALL (v_added)
                   AND s.id IN (SELECT (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint
                                  FROM unnest(p_events) AS u CROSS JOIN LATERAL unnest(u.mentions) AS x
                                 WHERE x.symlink_of_namespace IS NULL)
                 ORDER BY s.namespace, s.name
                   FOR NO KEY UPDATE) AS l
         WHERE d.id = l.id;
    END IF;

    -- Folded in by about one event in 64: few rows wait in dataset_activity, and concurrent
    -- writers seldom meet on the rows' locks. Backfill's sets do not (two of its sessions would
    -- wait on each other's rows): a rebuild folds everything when it ends.
    IF p_roll_up AND random() < cardinality(p_event_ids) / 64.0 THEN
        PERFORM metastore.roll_up_datasets(ARRAY(SELECT k.value::bigint FROM jsonb_each_text(v_id_of) AS k));
    END IF;

    -- Links, with their event's event_time: the partition key, shared with metastore.events. A
    -- dataset repeated in an event (same direction) conflicts with itself and is linked once.
    INSERT INTO metastore.event_datasets (event_id, dataset_id, direction, event_time)
    SELECT u.id, (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint, x.direction, u.event_time
      FROM ROWS FROM (unnest(p_event_ids), unnest(p_events))
           AS u (id)
     CROSS JOIN LATERAL unnest(u.mentions) AS x
    ON CONFLICT DO NOTHING;

    INSERT INTO metastore.dataset_symlinks AS t (dataset_id, symlink_id, type, generation)
    SELECT DISTINCT (v_id_of ->> metastore.mention_key(x.symlink_of_namespace, x.symlink_of_name))::bigint,
           (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint, x.symlink_type, v_generation
      FROM unnest(p_events) AS u
     CROSS JOIN LATERAL unnest(u.mentions) AS x
     WHERE x.symlink_of_namespace IS NOT NULL
     ORDER BY 1, 2, 3
    ON CONFLICT (dataset_id, symlink_id, type) DO UPDATE SET generation = excluded.generation
     WHERE t.generation <> excluded.generation;
    RETURN v_id_of;
END
$$;

COMMENT ON FUNCTION metastore.derive_datasets(p_event_ids bigint[], p_events metastore.valid_event[], p_roll_up boolean) IS 'Applies a set of stored events (p_events[i] read by metastore.validate_event from the event stored as p_event_ids[i]) to metastore.datasets (new ones with the set''s kind, times and counts; existing ones through dataset_activity, folded in now and then when p_roll_up), event_datasets and dataset_symlinks, in the current generation (metastore.derive_generation). Returns the id of every dataset the set mentions, as a jsonb object keyed by the JSON text of [namespace, name] (what metastore.derive_lineage takes). Called by store_events and backfill; not for applications.';

CREATE FUNCTION metastore.derive_generation() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_generation integer;
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        SELECT s.generation INTO v_generation FROM metastore.derive_state AS s;
    ELSE
        -- A snapshot older than the transaction could miss a rebuild that started after it: the
        -- row lock makes such a transaction fail with 40001 (retry) instead of deriving with the
        -- generation the rebuild replaces.
        SELECT s.generation INTO v_generation FROM metastore.derive_state AS s FOR SHARE;
    END IF;
    IF v_generation IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000', MESSAGE = 'metastore.derive_state has no row: the deploy makes it, see V0005';
    END IF;
    RETURN v_generation;
END
$$;

COMMENT ON FUNCTION metastore.derive_generation() IS 'The generation that derived rows are written with now (metastore.derive_state.generation). Error codes: 55000 metastore.derive_state has no row; 40001 (outside READ COMMITTED) a rebuild started after the transaction''s snapshot.';

CREATE FUNCTION metastore.derive_job_run(p_payloads jsonb[], p_events metastore.valid_event[]) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    -- A row of an older generation is replaced, not merged into (metastore.backfill rebuilds).
    v_generation integer := metastore.derive_generation();
BEGIN
    -- Aligned by position: a payload without its header (or the other way round) is a caller's bug.
    IF coalesce(cardinality(p_payloads), 0) <> coalesce(cardinality(p_events), 0) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'p_payloads and p_events must be of equal length';
    END IF;
    -- Callers (store_events, backfill) call this only where change 7 is deployed.
    --
    -- One statement: the set is first reduced to one row per job and one per run by the rule the
    -- upserts apply to a stored row and a new one (an ON CONFLICT DO UPDATE may not reach a row
    -- twice in one statement). Jobs go in (namespace, name) order and runs in (job, run id) order,
    -- so that concurrent calls wait on each other's rows in one order.
    WITH ev AS (
        -- Per event. Facet values count only as non-empty JSON strings (metastore.facet_text: an
        -- empty one is as good as none, so that null and '' never tie in a comparison below). #>
        -- walks the payload without copying the objects on the way.
        SELECT u.job_namespace COLLATE "C" AS namespace, u.job_name COLLATE "C" AS name,
               u.run_id COLLATE "C" AS run_id, u.event_time AS t,
               f.sql,
               CASE WHEN f.sql IS NOT NULL THEN metastore.facet_text(u.payload #> '{job,facets,sql,dialect}') END AS sql_dialect,
               CASE WHEN f.sql IS NOT NULL THEN u.event_time END AS sql_time,
               metastore.facet_text(u.payload #> '{job,facets,jobType,processingType}') AS processing_type,
               metastore.facet_text(u.payload #> '{job,facets,jobType,integration}') AS integration,
               metastore.facet_text(u.payload #> '{job,facets,jobType,jobType}') AS job_type,
               CASE WHEN jsonb_typeof(u.payload #> '{job,facets,jobType}') = 'object' THEN u.event_time END AS type_time,
               -- The state's key: (class, eventTime, rank, error message). Class: terminal (COMPLETE,
               -- FAIL, ABORT) 2 over START and RUNNING 1 over OTHER or no eventType 0. Rank, at an
               -- equal time: FAIL > ABORT > COMPLETE, RUNNING > START.
               f.state,
               CASE WHEN f.state IN ('COMPLETE', 'FAIL', 'ABORT') THEN 2 WHEN f.state = 'OTHER' THEN 0 ELSE 1 END AS state_class,
               CASE f.state WHEN 'FAIL' THEN 3 WHEN 'ABORT' THEN 2 WHEN 'COMPLETE' THEN 1 WHEN 'RUNNING' THEN 1
                            ELSE 0 END AS state_rank,
               metastore.facet_text(u.payload #> '{run,facets,errorMessage,message}') AS error_message,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,user}') AS trino_user,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,source}') AS trino_source,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,catalog}') AS trino_catalog,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,schema}') AS trino_schema,
               CASE WHEN jsonb_typeof(u.payload #> '{run,facets,trino_query_context}') = 'object'
                    THEN u.event_time END AS context_time
          FROM unnest(p_payloads, p_events)
               AS u (payload)
         CROSS JOIN LATERAL (
                SELECT metastore.facet_text(u.payload #> '{job,facets,sql,query}'),
                       CASE WHEN u.event_type IN ('START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT') THEN u.event_type
                            ELSE 'OTHER' END) AS f (sql, state)
         WHERE u.job_name IS NOT NULL AND u.job_namespace IS NOT NULL  -- a DatasetEvent: no job
    ), job AS (
        INSERT INTO metastore.jobs AS j (
            namespace, name, first_seen, last_seen, latest_sql, sql_dialect, sql_time,
            processing_type, integration, job_type, type_time, generation)
        -- The sql facet of the latest eventTime; at an equal time the greater text, then dialect.
        -- The jobType facet the same way. Equal keys are equal values, so any of them may win; the
        -- values of a winner are picked as one array (one sort per group, not one per column).
        SELECT g.namespace, g.name, g.first_seen, g.last_seen, g.sql[1][1], g.sql[1][2], g.sql_time,
               g.type[1][1], g.type[1][2], g.type[1][3], g.type_time, v_generation
          FROM (SELECT ev.namespace, ev.name, min(ev.t) AS first_seen, max(ev.t) AS last_seen,
                       array_agg(ARRAY[ev.sql, ev.sql_dialect]
                                 ORDER BY ev.sql_time DESC, ev.sql COLLATE "C" DESC,
                                          coalesce(ev.sql_dialect, '') COLLATE "C" DESC)
                           FILTER (WHERE ev.sql IS NOT NULL) AS sql,
                       max(ev.sql_time) AS sql_time,
                       array_agg(ARRAY[ev.processing_type, ev.integration, ev.job_type]
                                 ORDER BY ev.type_time DESC, coalesce(ev.processing_type, '') COLLATE "C" DESC,
                                          coalesce(ev.integration, '') COLLATE "C" DESC,
                                          coalesce(ev.job_type, '') COLLATE "C" DESC)
                           FILTER (WHERE ev.type_time IS NOT NULL) AS type,
                       max(ev.type_time) AS type_time
                  FROM ev
                 GROUP BY ev.namespace, ev.name) AS g
         ORDER BY g.namespace, g.name
        ON CONFLICT (name_key) DO UPDATE
           -- A row of an older generation: the set's values replace it.
           SET first_seen = metastore.generation_least(j.generation, excluded.generation, j.first_seen, excluded.first_seen),
               last_seen = metastore.generation_greatest(j.generation, excluded.generation, j.last_seen, excluded.last_seen),
               -- A side without a facet has a null time: the comparison is null, the old values stay.
               (latest_sql, sql_dialect, sql_time) = ROW(
                   CASE WHEN j.generation <> excluded.generation THEN excluded.latest_sql
                        WHEN (excluded.sql_time, excluded.latest_sql COLLATE "C", coalesce(excluded.sql_dialect, '') COLLATE "C")
                             > (coalesce(j.sql_time, '-infinity'), coalesce(j.latest_sql, '') COLLATE "C",
                                coalesce(j.sql_dialect, '') COLLATE "C")
                        THEN excluded.latest_sql ELSE j.latest_sql END,
                   CASE WHEN j.generation <> excluded.generation THEN excluded.sql_dialect
                        WHEN (excluded.sql_time, excluded.latest_sql COLLATE "C", coalesce(excluded.sql_dialect, '') COLLATE "C")
                             > (coalesce(j.sql_time, '-infinity'), coalesce(j.latest_sql, '') COLLATE "C",
                                coalesce(j.sql_dialect, '') COLLATE "C")
                        THEN excluded.sql_dialect ELSE j.sql_dialect END,
                   metastore.generation_greatest(j.generation, excluded.generation, j.sql_time, excluded.sql_time)),
               (processing_type, integration, job_type, type_time) = ROW(
                   CASE WHEN j.generation <> excluded.generation THEN excluded.processing_type
                        WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                              coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                             > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                                coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                        THEN excluded.processing_type ELSE j.processing_type END,
                   CASE WHEN j.generation <> excluded.generation THEN excluded.integration
                        WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                              coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                             > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                                coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                        THEN excluded.integration ELSE j.integration END,
                   CASE WHEN j.generation <> excluded.generation THEN excluded.job_type
                        WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                              coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                             > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                                coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                        THEN excluded.job_type ELSE j.job_type END,
                   metastore.generation_greatest(j.generation, excluded.generation, j.type_time, excluded.type_time)),
               generation = excluded.generation
        -- Every job of the set comes back (an update without WHERE): its runs find their job_id here.
        RETURNING j.id, j.namespace, j.name)
    INSERT INTO metastore.runs AS r (
        job_id, run_id, state, state_class, state_rank, state_time, started_at, ended_at, error_message,
        trino_user, trino_source, trino_catalog, trino_schema, context_time,
        first_event_time, last_event_time, event_count, generation)
    -- The state and its error message from the event with the greatest state key (equal keys are
    -- equal values), ended_at with it; its time is the latest of the highest class there is.
    -- trino_query_context of the latest eventTime; at an equal time the greater values. A JobEvent
    -- (no run id) has no run.
    SELECT w.job_id, w.run_id, w.state[1][1],
           CASE WHEN w.state[1][1] IN ('COMPLETE', 'FAIL', 'ABORT') THEN 2 WHEN w.state[1][1] = 'OTHER' THEN 0 ELSE 1 END,
           CASE w.state[1][1] WHEN 'FAIL' THEN 3 WHEN 'ABORT' THEN 2 WHEN 'COMPLETE' THEN 1 WHEN 'RUNNING' THEN 1
                              ELSE 0 END,
           w.state_time, w.started_at,
           CASE WHEN w.state[1][1] IN ('COMPLETE', 'FAIL', 'ABORT') THEN w.state_time END,
           w.state[1][2], w.ctx[1][1], w.ctx[1][2], w.ctx[1][3], w.ctx[1][4], w.context_time,
           w.first_event_time, w.last_event_time, w.event_count, v_generation
      FROM (SELECT job.id AS job_id, ev.run_id,
                   array_agg(ARRAY[ev.state, ev.error_message]
                             ORDER BY ev.state_class DESC, ev.t DESC, ev.state_rank DESC,
                                      coalesce(ev.error_message, '') COLLATE "C" DESC) AS state,
                   coalesce(max(ev.t) FILTER (WHERE ev.state_class = 2), max(ev.t) FILTER (WHERE ev.state_class = 1),
                            max(ev.t)) AS state_time,
                   min(ev.t) FILTER (WHERE ev.state = 'START') AS started_at,
                   array_agg(ARRAY[ev.trino_user, ev.trino_source, ev.trino_catalog, ev.trino_schema]
                             ORDER BY coalesce(ev.context_time, '-infinity') DESC,
                                      coalesce(ev.trino_user, '') COLLATE "C" DESC,
                                      coalesce(ev.trino_source, '') COLLATE "C" DESC,
                                      coalesce(ev.trino_catalog, '') COLLATE "C" DESC,
                                      coalesce(ev.trino_schema, '') COLLATE "C" DESC) AS ctx,
                   max(ev.context_time) AS context_time,
                   min(ev.t) AS first_event_time, max(ev.t) AS last_event_time, count(*) AS event_count
              FROM ev
              JOIN job ON job.namespace = ev.namespace AND job.name = ev.name
             WHERE ev.run_id IS NOT NULL
             GROUP BY job.id, ev.run_id) AS w
     ORDER BY w.job_id, w.run_id
    ON CONFLICT (job_id, run_id) DO UPDATE
       SET -- Everything of the state from the side with the greater key; ended_at and the error
           -- message come with the event that decided it. A row of an older generation is no side:
           -- the set's values replace it.
           (state, state_class, state_rank, state_time, ended_at, error_message) = (
               SELECT w.state, w.state_class, w.state_rank, w.state_time, w.ended_at, w.error_message
                 FROM (VALUES (0, r.state, r.state_class, r.state_rank, r.state_time, r.ended_at, r.error_message),
                              (1, excluded.state, excluded.state_class, excluded.state_rank, excluded.state_time,
                               excluded.ended_at, excluded.error_message))
                      AS w (side, state, state_class, state_rank, state_time, ended_at, error_message)
                WHERE w.side = 1 OR r.generation = excluded.generation
                ORDER BY w.state_class DESC, w.state_time DESC, w.state_rank DESC,
                         coalesce(w.error_message, '') COLLATE "C" DESC, w.side  -- a tie keeps the stored side
                LIMIT 1),
           started_at = metastore.generation_least(r.generation, excluded.generation, r.started_at, excluded.started_at),
           (trino_user, trino_source, trino_catalog, trino_schema) = (
               SELECT w.trino_user, w.trino_source, w.trino_catalog, w.trino_schema
                 FROM (VALUES (0, r.context_time, r.trino_user, r.trino_source, r.trino_catalog, r.trino_schema),
                              (1, excluded.context_time, excluded.trino_user, excluded.trino_source,
                               excluded.trino_catalog, excluded.trino_schema))
                      AS w (side, context_time, trino_user, trino_source, trino_catalog, trino_schema)
                WHERE w.side = 1 OR r.generation = excluded.generation
                ORDER BY coalesce(w.context_time, '-infinity') DESC, coalesce(w.trino_user, '') COLLATE "C" DESC,
                         coalesce(w.trino_source, '') COLLATE "C" DESC, coalesce(w.trino_catalog, '') COLLATE "C" DESC,
                         coalesce(w.trino_schema, '') COLLATE "C" DESC, w.side
                LIMIT 1),
           context_time = metastore.generation_greatest(r.generation, excluded.generation, r.context_time, excluded.context_time),
           first_event_time = metastore.generation_least(r.generation, excluded.generation, r.first_event_time, excluded.first_event_time),
           last_event_time = metastore.generation_greatest(r.generation, excluded.generation, r.last_event_time, excluded.last_event_time),
           event_count = CASE WHEN r.generation <> excluded.generation THEN excluded.event_count
                              ELSE r.event_count + excluded.event_count END,
           generation = excluded.generation;
END
$$;

COMMENT ON FUNCTION metastore.derive_job_run(p_payloads jsonb[], p_events metastore.valid_event[]) IS 'Applies a set of stored events to metastore.jobs and metastore.runs: p_payloads[i] is event i''s payload (for the sql, jobType, errorMessage and trino_query_context facets), p_events[i] its header as stored in metastore.events (mentions unused). Order-independent: the rows depend on the set of events only (see the comment of runs.state), whatever order they come in and however they are split into calls; a run''s event_count grows by its events in the set. A row of an older generation than the current one (metastore.derive_generation) is replaced, not merged into. Empty or null arrays do nothing. Called by store_events for each newly stored event and by backfill in batches; not for applications. Error codes: 22023 arrays of different lengths.';

CREATE FUNCTION metastore.derive_lineage(p_event_ids bigint[], p_payloads jsonb[], p_events metastore.valid_event[], p_dataset_ids jsonb DEFAULT NULL::jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_hashagg TO 'off'
    SET enable_seqscan TO 'off'
    AS $_$
DECLARE
    v_id_of      jsonb;
    -- A row of an older generation is replaced, not merged into (metastore.backfill rebuilds).
    v_generation integer := metastore.derive_generation();
BEGIN
    -- Callers (store_events, backfill) call this only where change 6 is deployed.
    -- p_events[i] is what metastore.validate_event read from p_payloads[i], stored as p_event_ids[i].
    -- The datasets these events mention (their mentions), by id in a jsonb object keyed by
    -- [namespace, name]: the statements below look each one up there (a lookup each), never by a
    -- join to arrays (the planner, which guesses ten rows for each side, joined every event to all
    -- of the set's datasets: most of a backfill's time), nor in the table by name (metastore.dataset_key per row). Every dataset a
    -- statement below resolves is a mention of its own event (the input fields of columnLineage
    -- facets included, metastore.extract_datasets), so what an event derives never depends on which
    -- other events came first. metastore.derive_datasets returns them (store_events and backfill
    -- pass that on); without them they are looked up by name_key, a probe per distinct mention.
    v_id_of := p_dataset_ids;
    IF v_id_of IS NULL THEN
        SELECT jsonb_object_agg(metastore.mention_key(d.namespace, d.name), d.id) INTO v_id_of
          FROM (SELECT DISTINCT x.namespace, x.name
                  FROM unnest(p_events) AS e
                 CROSS JOIN LATERAL unnest(e.mentions) AS x) AS m
          JOIN metastore.datasets AS d ON d.name_key = sha256(metastore.dataset_key(m.namespace, m.name));
    END IF;
    IF v_id_of IS NULL OR v_id_of = '{}' THEN
        RETURN;
    END IF;

    -- Schema facets of inputs, outputs and a DatasetEvent's dataset. An empty list says nothing
    -- about the fields (some producers send it when they do not know them). The version's first
    -- event is the one of the earliest eventTime, at a tie the first stored (the smaller id, so
    -- that sets applied in any order agree).
    INSERT INTO metastore.dataset_schema_versions AS v
           (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen, generation)
    SELECT s.id, s.h, (array_agg(s.fields ORDER BY s.event_time, s.event_id))[1],
           (array_agg(s.event_id ORDER BY s.event_time, s.event_id))[1],
           min(s.event_time), max(s.event_time), v_generation
      FROM (SELECT s0.*, (v_id_of ->> metastore.mention_key(s0.namespace, s0.name))::bigint AS id
      FROM (SELECT DISTINCT u.event_id, u.event_time, ds ->> 'namespace' AS namespace, ds ->> 'name' AS name,
                   ds #> '{facets,schema,fields}' AS fields,
                   sha256(convert_to((ds #> '{facets,schema,fields}')::text, 'UTF8')) AS h
              FROM ROWS FROM (unnest(p_event_ids), unnest(p_payloads), unnest(p_events))
                   AS u (event_id, payload)
              -- A jsonpath test costs microseconds: events without a schema facet go no further.
             CROSS JOIN LATERAL (
                    SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'inputs') = 'array'
                                                     THEN u.payload -> 'inputs' ELSE '[]' END)
                    UNION ALL
                    SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'outputs') = 'array'
                                                     THEN u.payload -> 'outputs' ELSE '[]' END)
                    UNION ALL
                    SELECT u.payload -> 'dataset' WHERE u.event_kind = 'dataset') AS t (ds)
             WHERE (u.payload @? '$.inputs[*].facets.schema' OR u.payload @? '$.outputs[*].facets.schema'
                    OR u.payload @? '$.dataset.facets.schema')
               AND jsonb_typeof(ds) = 'object'
               AND jsonb_typeof(ds -> 'namespace') = 'string' AND jsonb_typeof(ds -> 'name') = 'string'
               -- CASE, not AND: AND does not stop a length of an object from being asked (an error).
               AND CASE WHEN jsonb_typeof(ds #> '{facets,schema,fields}') = 'array'
                        THEN jsonb_array_length(ds #> '{facets,schema,fields}') > 0 ELSE false END) AS s0) AS s
     WHERE s.id IS NOT NULL
     GROUP BY s.id, s.h
    HAVING NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS seen
                        WHERE seen.dataset_id = s.id AND seen.fields_sha256 = s.h AND seen.generation = v_generation
                          AND (seen.first_seen, seen.first_event_id)
                              <= (min(s.event_time), (array_agg(s.event_id ORDER BY s.event_time, s.event_id))[1])
                          AND seen.last_seen >= max(s.event_time))
     ORDER BY 1, 2
    ON CONFLICT (dataset_id, fields_sha256) DO UPDATE
       SET first_event_id = CASE WHEN v.generation <> excluded.generation
                                   OR (excluded.first_seen, excluded.first_event_id) < (v.first_seen, v.first_event_id)
                                 THEN excluded.first_event_id ELSE v.first_event_id END,
           first_seen = metastore.generation_least(v.generation, excluded.generation, v.first_seen, excluded.first_seen),
           last_seen = metastore.generation_greatest(v.generation, excluded.generation, v.last_seen, excluded.last_seen),
           generation = excluded.generation
     WHERE v.generation <> excluded.generation
        OR (excluded.first_seen, excluded.first_event_id) < (v.first_seen, v.first_event_id)
        OR excluded.last_seen > v.last_seen;

    -- Edges and column lineage keep first_seen and last_seen to the hour (UTC): an event that
    -- repeats them within the hour writes nothing (a query that runs every minute would otherwise
    -- rewrite each of its rows every minute). Schema versions keep exact times, so that the current
    -- fields are those of the newest event. Either way a function of the set of events, whatever
    -- their order: backfill gives what live ingest gave.
    -- Each input the event lists to each of its outputs, and each input dataset of a columnLineage
    -- facet to the output that carries it, through the event's job; symlinks do not make edges.
    INSERT INTO metastore.lineage_edges AS e
           (upstream_id, downstream_id, job_sha256, job_namespace, job_name, first_seen, last_seen, generation)
    -- Each event's input and output ids and the facets' (input, output) pairs are arrays made in one
    -- pass each (OFFSET 0 keeps the subquery whole: flattened, the outputs were looked up again for
    -- every input).
    SELECT p.up, p.down, j.h, min(j.job_namespace), min(j.job_name), min(j.hour), max(j.hour), v_generation
      FROM (SELECT coalesce(u.job_namespace, '') AS job_namespace, u.job_name,
                   date_trunc('hour', u.event_time, 'UTC') AS hour,
                   sha256(convert_to(metastore.mention_key(u.job_namespace, u.job_name), 'UTF8')) AS h,
                   CASE WHEN cl.ups IS NULL THEN io.inputs ELSE li.listed END AS inputs, io.outputs, cl.ups, cl.downs
              FROM ROWS FROM (unnest(p_payloads), unnest(p_events))
                   AS u (payload)
             CROSS JOIN LATERAL (
                    SELECT array_agg(DISTINCT m.id) FILTER (WHERE m.direction = 'input') AS inputs,
                           array_agg(DISTINCT m.id) FILTER (WHERE m.direction = 'output') AS outputs
                      FROM (SELECT x.direction,
                                   (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint AS id
                              FROM unnest(u.mentions) AS x
                             WHERE x.symlink_of_namespace IS NULL) AS m
                     WHERE m.id IS NOT NULL) AS io
             -- The input mentions hold the datasets the facets name, listed or not. An event with
             -- one it does not list (Spark's COMPLETE) has its facets read: such an input reaches
             -- only the output whose facet names it, and its listed inputs, read from the payload,
             -- reach every output. The others' pairs are among their inputs times outputs, and an
             -- event without the facet (a test of microseconds) reads neither.
             CROSS JOIN LATERAL (SELECT u.payload @? '$.outputs[*].facets.columnLineage') AS k (lineage)
             CROSS JOIN LATERAL (
                    SELECT array_agg(DISTINCT (v_id_of ->> metastore.mention_key(i ->> 'namespace', i ->> 'name'))::bigint)
                      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'inputs') = 'array'
                                                     THEN u.payload -> 'inputs' ELSE '[]' END) AS i
                     WHERE k.lineage) AS li (listed)
             CROSS JOIN LATERAL (
                    SELECT array_agg(c.up), array_agg(c.down)
                      FROM (SELECT DISTINCT
                                   (v_id_of ->> metastore.mention_key(inf ->> 'namespace', inf ->> 'name'))::bigint AS up,
                                   (v_id_of ->> metastore.mention_key(od ->> 'namespace', od ->> 'name'))::bigint AS down
                              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'outputs') = 'array'
                                                             THEN u.payload -> 'outputs' ELSE '[]' END) AS od
                             CROSS JOIN LATERAL (
                                    SELECT fe.value -> 'inputFields'
                                      FROM jsonb_each(CASE WHEN jsonb_typeof(od #> '{facets,columnLineage,fields}') = 'object'
                                                           THEN od #> '{facets,columnLineage,fields}' ELSE '{}' END) AS fe
                                    UNION ALL
                                    SELECT od #> '{facets,columnLineage,dataset}') AS f (inputs)
                             CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                                          THEN f.inputs ELSE '[]' END) AS inf
                             WHERE k.lineage
                               AND EXISTS (SELECT FROM unnest(io.inputs) AS n (id) WHERE n.id <> ALL (coalesce(li.listed, '{}')))
                               AND jsonb_typeof(inf -> 'namespace') = 'string' AND jsonb_typeof(inf -> 'name') = 'string'
                               AND jsonb_typeof(inf -> 'field') = 'string') AS c
                     WHERE c.up IS NOT NULL AND c.down IS NOT NULL) AS cl (ups, downs)
             WHERE u.job_name IS NOT NULL
            OFFSET 0) AS j
     CROSS JOIN LATERAL (
            SELECT im.id, om.id FROM unnest(j.inputs) AS im (id) CROSS JOIN unnest(j.outputs) AS om (id)
            UNION ALL
            SELECT c.up, c.down FROM unnest(j.ups, j.downs) AS c (up, down)) AS p (up, down)
     WHERE p.up IS NOT NULL AND p.down IS NOT NULL
     GROUP BY p.up, p.down, j.h
    HAVING NOT EXISTS (SELECT FROM metastore.lineage_edges AS seen
                        WHERE seen.upstream_id = p.up AND seen.downstream_id = p.down AND seen.job_sha256 = j.h
                          AND seen.generation = v_generation
                          AND seen.first_seen <= min(j.hour) AND seen.last_seen >= max(j.hour))
     ORDER BY 1, 2, 3
    ON CONFLICT (upstream_id, downstream_id, job_sha256) DO UPDATE
       SET first_seen = metastore.generation_least(e.generation, excluded.generation, e.first_seen, excluded.first_seen),
           last_seen = metastore.generation_greatest(e.generation, excluded.generation, e.last_seen, excluded.last_seen),
           generation = excluded.generation
     WHERE e.generation <> excluded.generation OR excluded.first_seen < e.first_seen OR excluded.last_seen > e.last_seen;

    INSERT INTO metastore.column_lineage AS c
           (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
            transformation_subtype, first_seen, last_seen, edge_sha256, generation)
    SELECT x.output_id, min(x.output_field), x.input_id, min(x.input_field), min(x.transformation_type),
           min(x.transformation_subtype), min(x.hour), max(x.hour), x.h, v_generation
      -- columnLineage facets of outputs: per field, and the dataset-level "dataset" list (inputs that
      -- affect the whole output: filters, joins, grouping) with output_field empty. An input field
      -- without transformations is one edge of unknown type ('', '').
      -- Fields and transformations are of any length: the key is the hash of all four (edge_sha256).
      FROM (SELECT x0.*, sha256(convert_to(jsonb_build_array(x0.output_field, x0.input_field, x0.transformation_type,
                                                             x0.transformation_subtype)::text, 'UTF8')) AS h,
                   (v_id_of ->> metastore.mention_key(x0.namespace, x0.name))::bigint AS output_id,
                   (v_id_of ->> metastore.mention_key(x0.input_namespace, x0.input_name))::bigint AS input_id
      FROM (SELECT DISTINCT date_trunc('hour', u.event_time, 'UTC') AS hour,
                   od ->> 'namespace' AS namespace, od ->> 'name' AS name, f.field AS output_field,
                   inf ->> 'namespace' AS input_namespace, inf ->> 'name' AS input_name,
                   inf ->> 'field' AS input_field,
                   coalesce(metastore.facet_text(tr -> 'type'), '')
                       AS transformation_type,
                   coalesce(metastore.facet_text(tr -> 'subtype'), '')
                       AS transformation_subtype
              FROM ROWS FROM (unnest(p_payloads), unnest(p_events))
                   AS u (payload)
             CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'outputs') = 'array'
                                                          THEN u.payload -> 'outputs' ELSE '[]' END) AS od
             CROSS JOIN LATERAL (
                    SELECT fe.key, fe.value -> 'inputFields'
                      FROM jsonb_each(CASE WHEN jsonb_typeof(od #> '{facets,columnLineage,fields}') = 'object'
                                           THEN od #> '{facets,columnLineage,fields}' ELSE '{}' END) AS fe
                    UNION ALL
                    SELECT '', od #> '{facets,columnLineage,dataset}') AS f (field, inputs)
             CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                          THEN f.inputs ELSE '[]' END) AS inf
             CROSS JOIN LATERAL jsonb_array_elements(
                    CASE WHEN jsonb_typeof(inf -> 'transformations') IS DISTINCT FROM 'array' THEN '[{}]'
                         WHEN jsonb_array_length(inf -> 'transformations') > 0 THEN inf -> 'transformations'
                         ELSE '[{}]' END) AS tr
             WHERE u.payload @? '$.outputs[*].facets.columnLineage'
               AND jsonb_typeof(od) = 'object'
               AND jsonb_typeof(od -> 'namespace') = 'string' AND jsonb_typeof(od -> 'name') = 'string'
               AND jsonb_typeof(inf) = 'object'
               AND jsonb_typeof(inf -> 'namespace') = 'string' AND jsonb_typeof(inf -> 'name') = 'string'
               AND jsonb_typeof(inf -> 'field') = 'string') AS x0) AS x
     WHERE x.output_id IS NOT NULL AND x.input_id IS NOT NULL
     GROUP BY x.output_id, x.input_id, x.h
    HAVING NOT EXISTS (SELECT FROM metastore.column_lineage AS seen
                        WHERE seen.output_dataset_id = x.output_id AND seen.input_dataset_id = x.input_id
                          AND seen.edge_sha256 = x.h AND seen.generation = v_generation
                          AND seen.first_seen <= min(x.hour) AND seen.last_seen >= max(x.hour))
     ORDER BY 1, 3, 9
    ON CONFLICT (output_dataset_id, input_dataset_id, edge_sha256) DO UPDATE
       SET first_seen = metastore.generation_least(c.generation, excluded.generation, c.first_seen, excluded.first_seen),
           last_seen = metastore.generation_greatest(c.generation, excluded.generation, c.last_seen, excluded.last_seen),
           generation = excluded.generation
     WHERE c.generation <> excluded.generation OR excluded.first_seen < c.first_seen OR excluded.last_seen > c.last_seen;
END
$_$;

COMMENT ON FUNCTION metastore.derive_lineage(p_event_ids bigint[], p_payloads jsonb[], p_events metastore.valid_event[], p_dataset_ids jsonb) IS 'Derives stored events'' schema versions (the non-empty "fields" of schema facets of inputs, outputs and a DatasetEvent''s dataset), dataset lineage edges (each input the event lists to each of its outputs, and each input dataset of an output''s columnLineage facet to that output, through the job) and column lineage (columnLineage facets of outputs: one row per distinct output field, empty for the dataset-level list, input dataset and field, transformation type and subtype, both empty when not given; keyed by the sha256 of the four, so of any length) into dataset_schema_versions, lineage_edges and column_lineage. Arrays aligned by position: p_events[i] is what metastore.validate_event read from p_payloads[i] (its mentions: metastore.extract_datasets), stored as p_event_ids[i]; only the datasets of those mentions are resolved (or given, already resolved: p_dataset_ids, as metastore.derive_datasets returns them). Any split of the events into calls, applied in any order, gives the same rows; a row of an older generation than the current one (metastore.derive_generation) is replaced, not merged into. The rules live here only: live ingest (store_events) and backfill both call it.';

CREATE FUNCTION metastore.derive_run_datasets(p_events metastore.valid_event[], p_dataset_ids jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    AS $$
DECLARE
    v_moved jsonb;
BEGIN
    -- One statement (a call per set; its fixed cost is most of what a set of one event costs):
    -- the set's runs, a probe of jobs and one of runs per distinct run (callers call this only
    -- where change 9 is deployed, after change 7); each event's inputs and outputs (a symlink
    -- identifier is the same data under another name: readers cross metastore.dataset_symlinks),
    -- inserted in key order as every writer takes them, a row of an older generation taken over
    -- (metastore.backfill rebuilds); and the runs whose first eventTime is one of the set's while
    -- they had events before: it moved, and their other rows follow below. The generation is the
    -- runs' own: derive_job_run has just written them with the current one.
    WITH k AS (
        SELECT u.job_namespace, u.job_name, u.run_id, min(u.event_time) AS first_time, count(*) AS events
          FROM unnest(p_events) AS u
         WHERE u.run_id IS NOT NULL AND u.job_name IS NOT NULL AND u.job_namespace IS NOT NULL
         GROUP BY u.job_namespace, u.job_name, u.run_id
    ), r AS (
        SELECT k.job_namespace, k.job_name, k.run_id, x.id, x.first_event_time, x.generation,
               x.first_event_time = k.first_time AND x.event_count > k.events AS moved
          FROM k
          JOIN metastore.jobs AS j ON j.name_key = sha256(metastore.dataset_key(k.job_namespace, k.job_name))
          JOIN metastore.runs AS x ON x.job_id = j.id AND x.run_id = k.run_id
    ), ins AS (
        INSERT INTO metastore.run_datasets AS t (run_id, dataset_id, direction, run_time, generation)
        SELECT DISTINCT r.id, (p_dataset_ids ->> metastore.mention_key(m.namespace, m.name))::bigint, m.direction,
               r.first_event_time, r.generation
          FROM unnest(p_events) AS u
         CROSS JOIN LATERAL unnest(u.mentions) AS m
          JOIN r ON r.job_namespace = u.job_namespace AND r.job_name = u.job_name AND r.run_id = u.run_id
         WHERE m.symlink_of_namespace IS NULL AND m.direction IN ('input', 'output')
           AND p_dataset_ids ? metastore.mention_key(m.namespace, m.name)
         ORDER BY 1, 2, 3
        ON CONFLICT (run_id, dataset_id, direction) DO UPDATE
           SET run_time = excluded.run_time, generation = excluded.generation
         WHERE t.generation <> excluded.generation OR t.run_time <> excluded.run_time
        RETURNING 1
    )
    SELECT jsonb_object_agg(r.id::text, r.first_event_time) FILTER (WHERE r.moved)
      INTO v_moved
      FROM r;

    -- An event earlier than a run's first (a START after its COMPLETE) moved its first_event_time:
    -- its rows follow, so that the timeline of a dataset keeps the order of the runs timeline.
    IF v_moved IS NOT NULL THEN
        UPDATE metastore.run_datasets AS t
           SET run_time = (m.value #>> '{}')::timestamptz
          FROM jsonb_each(v_moved) AS m
         WHERE t.run_id = m.key::bigint AND t.run_time <> (m.value #>> '{}')::timestamptz;
    END IF;
END
$$;

COMMENT ON FUNCTION metastore.derive_run_datasets(p_events metastore.valid_event[], p_dataset_ids jsonb) IS 'Applies a set of stored events (p_events as metastore.validate_event read them) to metastore.run_datasets: each run''s inputs and outputs (not symlink identifiers), with p_dataset_ids the ids of the datasets they mention (as metastore.derive_datasets returns them), and each run''s first_event_time as run_time. Runs must exist (metastore.derive_job_run first, in the same transaction). A row of an older generation is replaced. Called by store_events and backfill; not for applications.';

CREATE FUNCTION metastore.ensure_partitions() RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
    SELECT metastore.create_partitions(CURRENT_DATE - 1, 14)
$$;

COMMENT ON FUNCTION metastore.ensure_partitions() IS 'Creates the missing daily partitions from yesterday through 14 days ahead (UTC), nothing else; returns how many it created (0 when none were missing). For the service, at start and every hour. Error codes: 55P03 the tables stayed locked by another transaction for about 4 s, try again later.';

CREATE FUNCTION metastore.event_kind(p_payload jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- A member set to JSON null counts as absent.
    SELECT CASE
        WHEN pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'run'::text) OPERATOR(pg_catalog.=) 'object'::text
         AND pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'job'::text) OPERATOR(pg_catalog.=) 'object'::text
            THEN 'run'::text
        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'run'::text), 'null'::text)
                 OPERATOR(pg_catalog.=) 'null'::text
         AND pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'job'::text) OPERATOR(pg_catalog.=) 'object'::text
            THEN 'job'::text
        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'run'::text), 'null'::text)
                 OPERATOR(pg_catalog.=) 'null'::text
         AND coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'job'::text), 'null'::text)
                 OPERATOR(pg_catalog.=) 'null'::text
         AND pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'dataset'::text) OPERATOR(pg_catalog.=) 'object'::text
            THEN 'dataset'::text
    END
$$;

COMMENT ON FUNCTION metastore.event_kind(p_payload jsonb) IS 'OpenLineage event kind, told apart by shape as the spec does: run (run and job objects), job (job without run), dataset (dataset without run or job); null when it is none of them. A member set to JSON null counts as absent.';

CREATE FUNCTION metastore.expiring_days(p_keep interval) RETURNS TABLE(day date, time_from timestamp with time zone, time_to timestamp with time zone)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET "DateStyle" TO 'ISO, YMD'
    SET lock_timeout TO '100ms'
    AS $_$
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
$_$;

COMMENT ON FUNCTION metastore.expiring_days(p_keep interval) IS 'The UTC days whose events metastore.apply_retention(p_keep) would remove if called later in the same transaction: one row per day, with the range [time_from, time_to) of eventTime removed (the cutoff''s own day ends at the cutoff). Locks the expiring partitions of metastore.events against writes (not on Citus, where that would hold off all ingest), and partition changes, until the transaction ends, so that an archive of these days written before apply_retention holds every event it removes. Error codes: 22023 p_keep under 1 day; 55P03 the expiring partitions stayed locked by another transaction. Owner only.';

CREATE FUNCTION metastore.extract_datasets(p_payload jsonb) RETURNS SETOF metastore.dataset_mention
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $_$
    SELECT x.namespace, x.name, l.direction, x.symlink_of_namespace, x.symlink_of_name, x.symlink_type
      -- inputs, outputs, and the dataset of a DatasetEvent (a "dataset" key elsewhere is ignored);
      -- a member absent or JSON null is no list.
      FROM (SELECT 1, 'input'::pg_catalog.text,
                   CASE WHEN pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                        THEN p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text
                        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text),
                                      'null'::pg_catalog.text) OPERATOR(pg_catalog.=) 'null'::pg_catalog.text
                        THEN '[]'::pg_catalog.jsonb
                        ELSE '[null]'::pg_catalog.jsonb END
            UNION ALL
            SELECT 2, 'output'::pg_catalog.text,
                   CASE WHEN pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'outputs'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                        THEN p_payload OPERATOR(pg_catalog.->) 'outputs'::pg_catalog.text
                        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'outputs'::pg_catalog.text),
                                      'null'::pg_catalog.text) OPERATOR(pg_catalog.=) 'null'::pg_catalog.text
                        THEN '[]'::pg_catalog.jsonb
                        ELSE '[null]'::pg_catalog.jsonb END
            UNION ALL
            -- event_kind 'dataset' means "dataset" is an object.
            SELECT 3, 'none'::pg_catalog.text,
                   pg_catalog.jsonb_build_array(p_payload OPERATOR(pg_catalog.->) 'dataset'::pg_catalog.text)
             WHERE metastore.event_kind(p_payload) OPERATOR(pg_catalog.=) 'dataset'::pg_catalog.text
            UNION ALL
            -- Every dataset an input field of a columnLineage facet of an output names (per output
            -- field, and the dataset-level "dataset" list), as an input, once, unless the event lists
            -- it among its inputs; made of namespace and name only, so that the items below find no
            -- facets in them. An entry without string namespace, name and field, or with an empty
            -- namespace or name, is skipped as a malformed symlink identifier is, and so is a member
            -- on the way that is absent or not an object (fields, inputFields and dataset: not an
            -- array): in strict paths, an error in a filter skips its item; silent (true), an event
            -- without outputs gives none. Nothing here raises: a malformed output is told by the
            -- items of list 2. Two path queries under an aggregate: the executor sets up every node
            -- and expression of this plan for each event, facet or not, and the same rule walked with
            -- jsonb operators, hashed and sorted, cost an event without the facet a quarter more
            -- (ingest calls this once per event).
            SELECT 4, 'input'::pg_catalog.text,
                   (SELECT pg_catalog.jsonb_agg(DISTINCT f.dataset)
                      FROM (SELECT e FROM pg_catalog.jsonb_path_query(p_payload,
                                'strict $.outputs[*] ? (@.facets.columnLineage.fields.type() == "object")
                                   .facets.columnLineage.fields.* ? (@.inputFields.type() == "array").inputFields[*]
                                   ? (@.namespace.type() == "string" && @.name.type() == "string"
                                      && @.field.type() == "string" && @.namespace != "" && @.name != "")'::pg_catalog.jsonpath,
                                '{}'::pg_catalog.jsonb, true) AS e
                            UNION ALL
                            SELECT e FROM pg_catalog.jsonb_path_query(p_payload,
                                'strict $.outputs[*] ? (@.facets.columnLineage.dataset.type() == "array")
                                   .facets.columnLineage.dataset[*]
                                   ? (@.namespace.type() == "string" && @.name.type() == "string"
                                      && @.field.type() == "string" && @.namespace != "" && @.name != "")'::pg_catalog.jsonpath,
                                '{}'::pg_catalog.jsonb, true) AS e) AS x (entry)
                     CROSS JOIN LATERAL (
                            SELECT pg_catalog.jsonb_build_object(
                                       'namespace'::pg_catalog.text, x.entry OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text,
                                       'name'::pg_catalog.text, x.entry OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text)
                           ) AS f (dataset)
                     -- Listed: an item of inputs has this namespace and name.
                     WHERE NOT coalesce((p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text)
                                            OPERATOR(pg_catalog.@>) pg_catalog.jsonb_build_array(f.dataset),
                                        false))
             -- Most events have no such facet: a test of microseconds spares them the rest.
             WHERE p_payload OPERATOR(pg_catalog.@?) '$.outputs[*].facets.columnLineage'::pg_catalog.jsonpath
            ) AS l (o, direction, list)
     CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(l.list) WITH ORDINALITY AS i (item, io)
     -- Each item's namespace and name: non-empty strings of any length (change 5, dataset_key).
     CROSS JOIN LATERAL (
            SELECT CASE WHEN pg_catalog.jsonb_typeof(i.item OPERATOR(pg_catalog.->) 'namespace'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                         AND (i.item OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
                        THEN i.item OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text
                        ELSE metastore.malformed_datasets(p_payload, i.item) OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text END,
                   CASE WHEN pg_catalog.jsonb_typeof(i.item OPERATOR(pg_catalog.->) 'name'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                         AND (i.item OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
                        THEN i.item OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text
                        ELSE metastore.malformed_datasets(p_payload, i.item) OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text END
            ) AS d (namespace, name)
     -- The item itself, then every identifier of its symlinks facet. Facets are free-form: a
     -- malformed identifier is skipped rather than costing the whole event (the raw event keeps it
     -- for a later backfill), and so is one that names the item itself.
     CROSS JOIN LATERAL (
            SELECT 0::pg_catalog.int8, d.namespace, d.name, NULL::pg_catalog.text, NULL::pg_catalog.text,
                   NULL::pg_catalog.text
            UNION ALL
            SELECT s.so, s.ident OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text,
                   s.ident OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text, d.namespace, d.name,
                   CASE WHEN pg_catalog.jsonb_typeof(s.ident OPERATOR(pg_catalog.->) 'type'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                        THEN pg_catalog.left(s.ident OPERATOR(pg_catalog.->>) 'type'::pg_catalog.text, 200)
                        ELSE ''::pg_catalog.text END
              FROM pg_catalog.jsonb_array_elements(
                       CASE WHEN pg_catalog.jsonb_typeof(i.item OPERATOR(pg_catalog.#>) '{facets,symlinks,identifiers}'::pg_catalog.text[])
                                 OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                            THEN i.item OPERATOR(pg_catalog.#>) '{facets,symlinks,identifiers}'::pg_catalog.text[]
                            ELSE '[]'::pg_catalog.jsonb END) WITH ORDINALITY AS s (ident, so)
             WHERE pg_catalog.jsonb_typeof(s.ident OPERATOR(pg_catalog.->) 'namespace'::pg_catalog.text)
                       OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
               AND pg_catalog.jsonb_typeof(s.ident OPERATOR(pg_catalog.->) 'name'::pg_catalog.text)
                       OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
               AND (s.ident OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
               AND (s.ident OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
               AND NOT ((s.ident OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text) OPERATOR(pg_catalog.=) d.namespace
                        AND (s.ident OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text) OPERATOR(pg_catalog.=) d.name)
            ) AS x (so, namespace, name, symlink_of_namespace, symlink_of_name, symlink_type)
     ORDER BY l.o, i.io, x.so
$_$;

COMMENT ON FUNCTION metastore.extract_datasets(p_payload jsonb) IS 'The datasets an OpenLineage event mentions, one row per mention, in the event''s order: its inputs (direction input), its outputs (output), a DatasetEvent''s dataset (none), each followed by every symlinks-facet identifier of it (same direction, with symlink_of_* naming the dataset that carries it), then each dataset that an input field of an output''s columnLineage facet names and the inputs do not list (input, once each, in no particular order). Nothing else. Namespaces and names may be of any length. A SQL function that PostgreSQL inlines. Error codes: 22023 malformed inputs/outputs/dataset (raised by metastore.malformed_datasets).';

CREATE FUNCTION metastore.facet_text(p_value jsonb) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    -- An empty string is as good as none, so that null and '' never tie where values are compared.
    SELECT CASE WHEN pg_catalog.jsonb_typeof(p_value) OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                 AND p_value OPERATOR(pg_catalog.<>) '""'::pg_catalog.jsonb
                THEN p_value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[] END
$$;

COMMENT ON FUNCTION metastore.facet_text(p_value jsonb) IS 'The text of a facet value that is a non-empty JSON string; null for anything else (absent, JSON null, another type, ""). The lenient read of the derivations: a facet they cannot use is ignored, never an error.';

CREATE FUNCTION metastore.feed_seq(p_cursor text) RETURNS bigint
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_seq text[];
BEGIN
    IF p_cursor IS NULL THEN
        RETURN 0;
    END IF;
    BEGIN
        v_seq := regexp_match(convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8'),
                              '^s:([0-9]{1,19})$');
        IF v_seq IS NOT NULL THEN
            RETURN v_seq[1]::bigint;
        END IF;
    EXCEPTION WHEN data_exception THEN
        v_seq := NULL;
    END;
    RAISE EXCEPTION USING
        ERRCODE = '22023',
        MESSAGE = 'cursor is not valid: pass the cursor of an event or the next_cursor of a page unchanged';
END
$_$;

COMMENT ON FUNCTION metastore.feed_seq(p_cursor text) IS 'The seq of metastore.feed_order a feed cursor names on Citus; 0 for a null cursor. Error code: 22023 a cursor the feed did not return there (a cursor of the feed on one server included).';

CREATE FUNCTION metastore.feed_sequenced() RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
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
$$;

COMMENT ON FUNCTION metastore.feed_sequenced() IS 'Whether the event feed reads metastore.feed_order (Citus) rather than one server''s order. Error code: 0A000 on Citus without that order.';

CREATE FUNCTION metastore.field_lineage(p_id bigint, p_field text, p_direction text DEFAULT 'both'::text, p_depth integer DEFAULT 3, p_node_limit integer DEFAULT 200) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    v_hide      record;
    -- Nodes, numbered from 1 in the order found (1: the field asked for): the JSON text of
    -- [dataset id, field] as key, then dataset, field, depth, side.
    v_keys      text[];
    v_nd        bigint[];
    v_nf        text[];
    v_ndepth    integer[];
    v_nside     text[];
    -- Edges: from and to (node numbers), kind, transformation type and subtype, first and last seen.
    v_efrom     integer[] := '{}';
    v_eto       integer[] := '{}';
    v_ekind     text[] := '{}';
    v_ett       text[] := '{}';
    v_ets       text[] := '{}';
    v_efirst    timestamptz[] := '{}';
    v_elast     timestamptz[] := '{}';
    -- One hop's column lineage rows: the frontier node it starts from (origin), the field it starts
    -- from (the origin's, or the same field of a symlink alias), the field it reaches, and the row.
    v_origin    bigint[];
    v_sds       bigint[];
    v_sf        text[];
    v_dds       bigint[];
    v_df        text[];
    v_tt        text[];
    v_ts        text[];
    v_first     timestamptz[];
    v_last      timestamptz[];
    v_seen      text[];
    v_fr_ds     bigint[];
    v_fr_f      text[];
    v_dir       text;
    v_room      integer;
    v_truncated boolean := false;
    v_max_edges integer := 4 * p_node_limit;
    v_edges     jsonb;
    v_cut       boolean;
BEGIN
    IF p_field IS NULL OR p_field = '' OR octet_length(p_field) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'field must be a name of 1 to 1000 bytes';
    END IF;
    IF p_direction IS NULL OR p_direction NOT IN ('upstream', 'downstream', 'both') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('direction must be upstream, downstream or both, not %s', coalesce(p_direction, 'null'));
    END IF;
    IF p_depth IS NULL OR p_depth < 1 OR p_depth > 10 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('depth must be from 1 to 10, not %s', p_depth);
    END IF;
    IF p_node_limit IS NULL OR p_node_limit < 1 OR p_node_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('node limit must be from 1 to 1000, not %s', p_node_limit);
    END IF;
    v_hide := metastore.hidden_names();
    IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                    WHERE d.id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    v_keys := ARRAY[jsonb_build_array(p_id, p_field)::text];
    v_nd := ARRAY[p_id];
    v_nf := ARRAY[p_field];
    v_ndepth := ARRAY[0];
    v_nside := ARRAY['self'];

    -- Each direction on its own from the field, as the dataset graph; a field seen once in a
    -- direction is not walked from again (cycles end there). Each hop is a few statements over sets.
    FOREACH v_dir IN ARRAY CASE WHEN p_direction = 'both' THEN ARRAY['upstream', 'downstream']
                                ELSE ARRAY[p_direction] END LOOP
        v_seen := v_keys[1:1];
        v_fr_ds := ARRAY[p_id];
        v_fr_f := ARRAY[p_field];
        FOR v_depth IN 1..p_depth LOOP
            EXIT WHEN cardinality(v_fr_ds) = 0 OR v_truncated;
            -- The frontier's fields and the same fields of their datasets' symlink aliases (the same
            -- data under another name), then the column lineage rows of each, in a stable order.
            WITH fr AS (
                SELECT f.ds, f.field FROM unnest(v_fr_ds, v_fr_f) AS f (ds, field)
            ), ex AS (
                SELECT fr.ds AS origin, fr.ds, fr.field FROM fr
                UNION
                SELECT fr.ds, a.x, fr.field
                  FROM fr
                 CROSS JOIN LATERAL unnest(
                        CASE WHEN EXISTS (SELECT FROM metastore.dataset_symlinks AS s
                                           WHERE s.dataset_id = fr.ds OR s.symlink_id = fr.ds)
                             THEN metastore.dataset_aliases(ARRAY[fr.ds], 20) ELSE '{}' END) AS a (x)
                  JOIN metastore.datasets AS d ON d.id = a.x
                 WHERE a.x <> fr.ds AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
            ), hop AS (
                SELECT ex.origin, ex.ds AS src_ds, ex.field AS src_f,
                       c.output_dataset_id AS dst_ds, c.output_field AS dst_f,
                       c.transformation_type, c.transformation_subtype, c.first_seen, c.last_seen
                  FROM ex
                  JOIN metastore.column_lineage AS c
                    ON c.input_dataset_id = ex.ds AND left(c.input_field, 200) = left(ex.field, 200)
                   AND c.input_field = ex.field
                 WHERE v_dir = 'downstream' AND c.output_field <> ''
                UNION ALL
                SELECT ex.origin, ex.ds, ex.field, c.input_dataset_id, c.input_field,
                       c.transformation_type, c.transformation_subtype, c.first_seen, c.last_seen
                  FROM ex
                  JOIN metastore.column_lineage AS c ON c.output_dataset_id = ex.ds AND c.output_field = ex.field
                 WHERE v_dir = 'upstream'
            )
            SELECT array_agg(h.origin ORDER BY h.o), array_agg(h.src_ds ORDER BY h.o), array_agg(h.src_f ORDER BY h.o),
                   array_agg(h.dst_ds ORDER BY h.o), array_agg(h.dst_f ORDER BY h.o),
                   array_agg(h.transformation_type ORDER BY h.o), array_agg(h.transformation_subtype ORDER BY h.o),
                   array_agg(h.first_seen ORDER BY h.o), array_agg(h.last_seen ORDER BY h.o)
              INTO v_origin, v_sds, v_sf, v_dds, v_df, v_tt, v_ts, v_first, v_last
              FROM (SELECT hop.*, row_number() OVER (ORDER BY hop.origin, hop.src_ds, hop.src_f COLLATE "C",
                                                              hop.dst_ds, hop.dst_f COLLATE "C",
                                                              hop.transformation_type COLLATE "C",
                                                              hop.transformation_subtype COLLATE "C") AS o
                      FROM hop
                      JOIN metastore.datasets AS d ON d.id = hop.dst_ds
                     WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) AS h
             WHERE h.o <= v_max_edges + 1;
            EXIT WHEN v_origin IS NULL;
            IF cardinality(v_origin) > v_max_edges THEN
                v_truncated := true;
            END IF;

            -- New nodes: the aliases' fields the rows start from (beside their frontier node, at its
            -- depth), then the fields reached, in the rows' order, as many as there is room for.
            v_room := p_node_limit - cardinality(v_keys);
            WITH r AS (
                SELECT * FROM unnest(v_origin, v_sds, v_sf, v_dds, v_df) WITH ORDINALITY AS r (origin, sds, sf, dds, df, o)
            ), k AS (
                SELECT k.key FROM unnest(v_keys) AS k (key)
            ), cand AS (
                SELECT jsonb_build_array(r.sds, r.sf)::text AS key, r.sds AS ds, r.sf AS field,
                       jsonb_build_array(r.origin, r.sf)::text AS origin_key, NULL::integer AS depth, 2 * r.o AS o
                  FROM r WHERE r.sds <> r.origin
                UNION ALL
                SELECT jsonb_build_array(r.dds, r.df)::text, r.dds, r.df, NULL, v_depth, 2 * r.o + 1 FROM r
            ), fresh AS (
                SELECT DISTINCT ON (c.key) c.* FROM cand AS c
                 WHERE NOT EXISTS (SELECT FROM k WHERE k.key = c.key)
                 ORDER BY c.key, c.o
            ), kept AS (
                SELECT f.*, row_number() OVER (ORDER BY f.o) AS n FROM fresh AS f
            )
            SELECT v_keys || coalesce(array_agg(kp.key ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_nd || coalesce(array_agg(kp.ds ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_nf || coalesce(array_agg(kp.field ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_ndepth || coalesce(array_agg(coalesce(kp.depth, v_ndepth[array_position(v_keys, kp.origin_key)])
                                                  ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_nside || coalesce(array_agg(CASE WHEN kp.depth IS NULL
                                                           AND v_nside[array_position(v_keys, kp.origin_key)] = 'self'
                                                      THEN 'self' ELSE v_dir END ORDER BY kp.n)
                                           FILTER (WHERE kp.n <= v_room), '{}'),
                   v_truncated OR coalesce(max(kp.n) > v_room, false)
              INTO v_keys, v_nd, v_nf, v_ndepth, v_nside, v_truncated
              FROM kept AS kp;

            -- Edges between listed nodes: lineage from input to output field, and a symlink from the
            -- field of the dataset carrying the identifier to the same field of the identifier.
            WITH r AS (
                SELECT * FROM unnest(v_origin, v_sds, v_sf, v_dds, v_df, v_tt, v_ts, v_first, v_last)
                       AS r (origin, sds, sf, dds, df, tt, ts, first_seen, last_seen)
            ), k AS (
                SELECT k.key, k.n FROM unnest(v_keys) WITH ORDINALITY AS k (key, n)
            ), e AS (
                SELECT DISTINCT CASE WHEN v_dir = 'downstream' THEN s.n ELSE d.n END::integer AS f,
                       CASE WHEN v_dir = 'downstream' THEN d.n ELSE s.n END::integer AS t,
                       'lineage' AS kind, r.tt, r.ts, r.first_seen, r.last_seen
                  FROM r
                  JOIN k AS s ON s.key = jsonb_build_array(r.sds, r.sf)::text
                  JOIN k AS d ON d.key = jsonb_build_array(r.dds, r.df)::text
                UNION
                SELECT CASE WHEN y.carried THEN s.n ELSE o.n END::integer,
                       CASE WHEN y.carried THEN o.n ELSE s.n END::integer,
                       'symlink', NULL, NULL, NULL::timestamptz, NULL::timestamptz
                  FROM (SELECT DISTINCT r.origin, r.sds, r.sf FROM r WHERE r.sds <> r.origin) AS a
                  JOIN k AS s ON s.key = jsonb_build_array(a.sds, a.sf)::text
                  JOIN k AS o ON o.key = jsonb_build_array(a.origin, a.sf)::text
                 CROSS JOIN LATERAL (SELECT EXISTS (SELECT FROM metastore.dataset_symlinks AS l
                                                     WHERE l.dataset_id = a.sds AND l.symlink_id = a.origin)) AS y (carried)
            )
            SELECT v_efrom || coalesce(array_agg(e.f ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_eto || coalesce(array_agg(e.t ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_ekind || coalesce(array_agg(e.kind ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_ett || coalesce(array_agg(e.tt ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_ets || coalesce(array_agg(e.ts ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_efirst || coalesce(array_agg(e.first_seen ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_elast || coalesce(array_agg(e.last_seen ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}')
              INTO v_efrom, v_eto, v_ekind, v_ett, v_ets, v_efirst, v_elast
              FROM e;

            -- The next frontier: the fields reached that this direction has not walked from.
            SELECT coalesce(array_agg(x.dds ORDER BY x.o), '{}'), coalesce(array_agg(x.df ORDER BY x.o), '{}'),
                   v_seen || coalesce(array_agg(x.key ORDER BY x.o), '{}')
              INTO v_fr_ds, v_fr_f, v_seen
              FROM (SELECT DISTINCT ON (k.key) k.key, r.dds, r.df, r.o
                      FROM unnest(v_dds, v_df) WITH ORDINALITY AS r (dds, df, o)
                     CROSS JOIN LATERAL (SELECT jsonb_build_array(r.dds, r.df)::text AS key) AS k
                     -- Set operations by hash, not = ANY (a comparison with each element).
                     WHERE EXISTS (SELECT FROM unnest(v_keys) AS n (key) WHERE n.key = k.key)
                       AND NOT EXISTS (SELECT FROM unnest(v_seen) AS n (key) WHERE n.key = k.key)
                     ORDER BY k.key, r.o) AS x;
        END LOOP;
    END LOOP;

    -- Each edge once (both directions may find one in a cycle), at most 4 x p_node_limit.
    SELECT coalesce(jsonb_agg(x.edge ORDER BY x.f, x.t, x.kind, x.tt, x.ts), '[]'), count(*) > v_max_edges
      INTO v_edges, v_cut
      FROM (SELECT DISTINCT ON (e.f, e.t, e.kind, e.tt, e.ts) e.f, e.t, e.kind, e.tt, e.ts,
                   CASE WHEN e.kind = 'symlink' THEN jsonb_build_object('kind', 'symlink', 'from', e.f, 'to', e.t)
                        ELSE jsonb_build_object(
                                 'kind', 'lineage', 'from', e.f, 'to', e.t,
                                 'transformation', CASE WHEN e.tt = '' AND e.ts = '' THEN NULL
                                                        ELSE jsonb_build_object('type', nullif(e.tt, ''),
                                                                                'subtype', nullif(e.ts, '')) END,
                                 'first_seen', e.fs, 'last_seen', e.ls) END AS edge
              FROM unnest(v_efrom, v_eto, v_ekind, v_ett, v_ets, v_efirst, v_elast) AS e (f, t, kind, tt, ts, fs, ls)
             ORDER BY e.f, e.t, e.kind, e.tt, e.ts
             LIMIT v_max_edges + 1) AS x;
    IF v_cut THEN
        v_edges := v_edges - v_max_edges;
        v_truncated := true;
    END IF;

    RETURN jsonb_build_object(
        'id', p_id,
        'field', p_field,
        'direction', p_direction,
        'depth', p_depth,
        'nodes', (SELECT jsonb_agg(jsonb_build_object('id', n.o, 'dataset_id', d.id, 'namespace', d.namespace,
                                                      'name', d.name, 'field', n.field, 'depth', n.depth,
                                                      'side', n.side) ORDER BY n.o)
                    FROM unnest(v_nd, v_nf, v_ndepth, v_nside) WITH ORDINALITY AS n (ds, field, depth, side, o)
                    JOIN metastore.datasets AS d ON d.id = n.ds),
        'edges', v_edges,
        'truncated', v_truncated);
END
$$;

COMMENT ON FUNCTION metastore.field_lineage(p_id bigint, p_field text, p_direction text, p_depth integer, p_node_limit integer) IS 'The lineage of field p_field of dataset p_id across hops, from the columnLineage facets (metastore.column_lineage): {id, field, direction, depth, nodes, edges, truncated}. nodes: {id (1, 2, ... in the order found; 1 is the field asked for), dataset_id, namespace, name, field, depth, side}. edges: lineage from an input field to an output field derived from it, with its transformation ({type, subtype}, null when the facet gave none), first_seen and last_seen to the hour; symlink from a field of the dataset that carries a symlink identifier to the same field of the identifier (the walk crosses symlinks both ways, as the dataset graph). At most p_node_limit nodes and 4 x p_node_limit edges (truncated: a limit cut the graph). The facet''s dataset-level list (fields that affect the whole dataset) is not followed. Hidden datasets (metastore.hide) are not there. Error codes: 22023 field empty or over 1000 bytes, direction not upstream/downstream/both, depth outside 1..10, node limit outside 1..1000; P0002 no such dataset.';

CREATE FUNCTION metastore.fold_rebuilt_datasets(p_ids bigint[], p_generation integer) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_folded bigint;
BEGIN
    WITH locked AS (
        SELECT d.id FROM metastore.datasets AS d
         WHERE d.id = ANY (p_ids) AND d.generation <= p_generation
           -- One of an older generation only once the new one has named it: until then it shows
           -- its old values, activity included.
           AND EXISTS (SELECT FROM metastore.dataset_activity AS a
                        WHERE a.dataset_id = d.id AND (a.generation = p_generation OR d.generation = p_generation))
         ORDER BY d.namespace, d.name
           FOR NO KEY UPDATE SKIP LOCKED
    ), moved AS (
        -- Activity of a newer generation (a rebuild started since p_generation was read) stays.
        DELETE FROM metastore.dataset_activity AS a USING locked AS l
         WHERE a.dataset_id = l.id AND a.generation <= p_generation
        RETURNING a.*
    ), sums AS (
        SELECT m.dataset_id, min(m.first_seen) AS first_seen, max(m.last_seen) AS last_seen,
               sum(m.input_events) AS input_events, sum(m.output_events) AS output_events,
               bool_or(m.direct) AS direct
          FROM moved AS m
         WHERE m.generation = p_generation
         GROUP BY m.dataset_id
    ), folded AS (
        UPDATE metastore.datasets AS d
           SET kind = CASE WHEN (d.generation = p_generation AND d.kind = 'dataset') OR s.direct THEN 'dataset'
                           ELSE 'symlink' END,
               first_seen = CASE WHEN d.generation = p_generation THEN least(d.first_seen, s.first_seen)
                                 ELSE s.first_seen END,
               last_seen = CASE WHEN d.generation = p_generation THEN greatest(d.last_seen, s.last_seen)
                                ELSE s.last_seen END,
               input_events = CASE WHEN d.generation = p_generation THEN d.input_events + s.input_events
                                   ELSE s.input_events END,
               output_events = CASE WHEN d.generation = p_generation THEN d.output_events + s.output_events
                                    ELSE s.output_events END,
               generation = p_generation
          FROM sums AS s
         WHERE d.id = s.dataset_id
        RETURNING d.id
    )
    SELECT count(*) INTO v_folded FROM folded;
    RETURN v_folded;
END
$$;

COMMENT ON FUNCTION metastore.fold_rebuilt_datasets(p_ids bigint[], p_generation integer) IS 'For metastore.backfill when a rebuild ends: folds the dataset_activity of generation p_generation into the datasets p_ids (replacing the values of a dataset of an older generation, which then is of p_generation), drops their activity of older generations, and returns how many datasets it changed. A dataset of an older generation without such activity stays as it was, activity included: no event of the new generation has named it (yet). Rows another transaction holds are skipped.';

CREATE FUNCTION metastore.forbid_change() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '55000',
        MESSAGE = pg_catalog.format('%s.%s is append-only', TG_TABLE_SCHEMA, TG_TABLE_NAME),
        HINT = 'Raw events are history: they are never updated or deleted row by row.';
END
$$;

COMMENT ON FUNCTION metastore.forbid_change() IS 'Trigger: keeps a table append-only (SQLSTATE 55000).';

CREATE FUNCTION metastore.forward_ack(p_target text, p_owner text, p_cursor text, p_sent integer, p_refused integer DEFAULT 0, p_error text DEFAULT NULL::text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    IF p_sent IS NULL OR p_sent < 0 OR p_refused IS NULL OR p_refused < 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('sent and refused must be 0 or more, not %s and %s', p_sent, p_refused);
    END IF;
    UPDATE metastore.forward_targets AS t
       SET cursor = coalesce(p_cursor, t.cursor),
           sent = t.sent + p_sent,
           refused = t.refused + p_refused,
           last_error = coalesce(left(p_error, 2000), t.last_error),
           last_error_at = CASE WHEN p_error IS NOT NULL THEN clock_timestamp() ELSE t.last_error_at END,
           failures = CASE WHEN p_error IS NOT NULL THEN t.failures + 1 ELSE 0 END,
           failing_since = CASE WHEN p_error IS NOT NULL THEN coalesce(t.failing_since, clock_timestamp()) END,
           updated_at = clock_timestamp()
     WHERE t.name = metastore.forward_key(p_target) AND t.lease_owner = p_owner AND t.lease_until >= clock_timestamp();
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION metastore.forward_ack(p_target text, p_owner text, p_cursor text, p_sent integer, p_refused integer, p_error text) IS 'Records that target p_target answered the events up to feed cursor p_cursor (p_sent accepted, p_refused judged and refused with 400 or 422), and p_error (at most 2000 characters kept) when an attempt ended without such an answer: failures counts those in a row, 0 again after an attempt without error. Returns false when p_owner does not hold an unexpired lease (nothing is recorded). Error code: 22023 negative counts.';

CREATE FUNCTION metastore.forward_claim(p_target text, p_owner text, p_lease_seconds integer DEFAULT 30) RETURNS TABLE(claimed boolean, cursor text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_key    text;
    v_cursor text;
BEGIN
    IF p_target IS NULL OR p_target = '' OR p_owner IS NULL OR p_owner = ''
       OR p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 3600 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('target and owner must be named and the lease from 1 to 3600 s, not %s, %s, %s',
                             metastore.forward_key(p_target), p_owner, p_lease_seconds);
    END IF;
    v_key := metastore.forward_key(p_target);
    INSERT INTO metastore.forward_targets AS t (name) VALUES (v_key) ON CONFLICT (name) DO NOTHING;
    UPDATE metastore.forward_targets AS t
       SET lease_owner = p_owner,
           lease_until = clock_timestamp() + make_interval(secs => p_lease_seconds)
     WHERE t.name = v_key
       AND (t.lease_owner IS NULL OR t.lease_owner = p_owner OR t.lease_until < clock_timestamp())
    RETURNING t.cursor INTO v_cursor;
    claimed := FOUND;
    cursor := CASE WHEN claimed THEN v_cursor END;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION metastore.forward_claim(p_target text, p_owner text, p_lease_seconds integer) IS 'Takes or renews the lease of p_owner on forwarding target p_target (named by metastore.forward_key, made on first use) for p_lease_seconds; returns claimed (false while another owner holds an unexpired lease) and the feed cursor to send after. Error code: 22023 bad arguments.';

CREATE FUNCTION metastore.forward_key(p_url text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_base  text := split_part(p_url, '#', 1);
    v_query text;
    v_part  text;
    v_cut   text;
    v_shown text[] := '{}';
BEGIN
    IF strpos(v_base, '?') > 0 THEN
        v_query := substr(v_base, strpos(v_base, '?') + 1);
        v_base := substr(v_base, 1, strpos(v_base, '?') - 1);
    END IF;
    -- User info: everything of the authority up to its last @.
    v_base := regexp_replace(v_base, '^([A-Za-z][A-Za-z0-9+.-]*://)[^/]*@', '\1');
    -- The ingest path and trailing slashes, until none is left (so that the key of a key is itself):
    -- the base URL and the ingest URL are one target.
    LOOP
        v_cut := regexp_replace(v_base, '(/api/v1/lineage)?/*$', '');
        EXIT WHEN v_cut = v_base;
        v_base := v_cut;
    END LOOP;
    -- Any query value may be a token: only the names stay (a part without = is all value).
    FOREACH v_part IN ARRAY coalesce(string_to_array(v_query, '&'), '{}') LOOP
        CONTINUE WHEN v_part = '';
        v_shown := v_shown || CASE WHEN strpos(v_part, '=') > 0 THEN split_part(v_part, '=', 1) || '=***'
                                   ELSE '***' END;
    END LOOP;
    RETURN v_base || CASE WHEN cardinality(v_shown) > 0 THEN '?' || array_to_string(v_shown, '&') ELSE '' END;
END
$_$;

COMMENT ON FUNCTION metastore.forward_key(p_url text) IS 'The name of a forwarding target: its URL without user info, fragment, ingest path (/api/v1/lineage) and trailing slashes, each query value replaced by ***. Idempotent; service/metastore/outbound.py computes the same (target_key).';

CREATE FUNCTION metastore.forward_page(p_cursor text, p_limit integer DEFAULT 100, p_max_bytes integer DEFAULT 4194304) RETURNS TABLE(cursor text, event_id bigint, payload text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_pos   record;
    v_row   record;
    v_bytes bigint := 0;
    c_fetch constant integer := 10;
    v_after bigint;
    v_seqs  bigint[];
    v_ids   bigint[];
    v_at    timestamptz[];
    v_from  integer;
    v_count integer := 0;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 OR p_max_bytes IS NULL OR p_max_bytes < 1 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('limit must be from 1 to 1000 and max_bytes 1 or more, not %s and %s',
                             p_limit, p_max_bytes);
    END IF;
    -- On Citus: the order of metastore.feed_order, as metastore.read_events reads it there (the
    -- proof is in docs/events.md, "On Citus"); refused where that order is not deployed.
    IF metastore.feed_sequenced() THEN
        v_after := metastore.feed_seq(p_cursor);
        <<walk>>
        LOOP
            SELECT array_agg(o.seq ORDER BY o.seq), array_agg(o.event_id ORDER BY o.seq),
                   array_agg(o.event_time ORDER BY o.seq)
              INTO v_seqs, v_ids, v_at
              FROM (SELECT q.seq, q.event_id, q.event_time FROM metastore.feed_order AS q
                     WHERE q.seq > v_after ORDER BY q.seq LIMIT p_limit) AS o;
            EXIT walk WHEN v_seqs IS NULL;
            v_from := 1;
            -- c_fetch events at a time, each step one statement over the workers.
            WHILE v_from <= cardinality(v_ids) LOOP
                FOR v_row IN
                    SELECT e.id, e.payload, array_position(v_ids, e.id) AS i
                      FROM metastore.events AS e
                     WHERE e.id = ANY (v_ids[v_from:v_from + c_fetch - 1])
                       AND e.event_time = ANY (v_at[v_from:v_from + c_fetch - 1])
                     ORDER BY 3
                LOOP
                    cursor := translate(encode(convert_to('s:' || v_seqs[v_row.i]::text, 'UTF8'), 'base64'),
                                        E'+/\n', '-_');
                    event_id := v_row.id;
                    payload := v_row.payload::text;
                    RETURN NEXT;
                    v_count := v_count + 1;
                    v_bytes := v_bytes + octet_length(payload);
                    EXIT walk WHEN v_bytes >= p_max_bytes OR v_count >= p_limit;
                END LOOP;
                v_from := v_from + c_fetch;
            END LOOP;
            -- Every seq of the batch had its event removed by retention: the next ones.
            EXIT walk WHEN v_count > 0 OR cardinality(v_seqs) < p_limit;
            v_after := v_seqs[cardinality(v_seqs)];
        END LOOP;
        RETURN;
    END IF;
    SELECT * INTO v_pos FROM metastore.forward_position(p_cursor);
    FOR v_row IN
        SELECT e.xact_id, e.id, e.payload
          FROM metastore.events AS e
         WHERE (e.xact_id, e.id) > (v_pos.xact_id, v_pos.event_id)
           AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY e.xact_id, e.id
         LIMIT p_limit
    LOOP
        cursor := translate(encode(convert_to(v_row.xact_id::text || ':' || v_row.id::text, 'UTF8'), 'base64'),
                            E'+/\n', '-_');
        event_id := v_row.id;
        payload := v_row.payload::text;
        RETURN NEXT;
        v_bytes := v_bytes + octet_length(payload);
        EXIT WHEN v_bytes >= p_max_bytes;
    END LOOP;
END
$$;

COMMENT ON FUNCTION metastore.forward_page(p_cursor text, p_limit integer, p_max_bytes integer) IS 'The next stored events after feed cursor p_cursor, in the order of metastore.read_events: each its cursor, id and payload as stored (JSON text); at most p_limit (1..1000), and no more once they add up to p_max_bytes of text (the first is returned whatever its size). Error codes: 22023 bad limits or a cursor not returned by the feed. On Citus the order is that of metastore.feed_order (seq), which metastore.sequence_feed assigns (0A000 where it is not deployed).';

CREATE FUNCTION metastore.forward_position(p_cursor text, OUT xact_id xid8, OUT event_id bigint) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_after text[];
BEGIN
    xact_id := '0';
    event_id := 0;
    IF p_cursor IS NULL THEN
        RETURN;
    END IF;
    BEGIN
        v_after := regexp_match(convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8'),
                                '^([0-9]{1,20}):([0-9]{1,19})$');
        -- PostgreSQL 15 reads a transaction id past 2^64 - 1 without an error: refuse it here.
        IF v_after[1]::numeric > 18446744073709551615 THEN
            v_after := NULL;
        END IF;
        xact_id := v_after[1]::xid8;
        event_id := v_after[2]::bigint;
    EXCEPTION WHEN data_exception THEN
        v_after := NULL;
    END;
    IF v_after IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = 'cursor is not valid: pass the cursor of an event or the next_cursor of a page unchanged';
    END IF;
END
$_$;

COMMENT ON FUNCTION metastore.forward_position(p_cursor text, OUT xact_id xid8, OUT event_id bigint) IS 'The (transaction id, event id) a feed cursor names; (0, 0) for a null cursor. Error code: 22023 a cursor metastore.read_events did not return.';

CREATE FUNCTION metastore.forward_refused(p_target text, p_owner text, p_event_id bigint, p_cursor text, p_status integer, p_body text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    c_keep constant integer := 1000;
    v_key  text := metastore.forward_key(p_target);
    v_last record;
BEGIN
    IF p_status IS NULL OR p_status NOT IN (400, 422) OR p_event_id IS NULL OR p_cursor IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('only a 400 or 422 judges an event, with its id and cursor: not %s for event %s',
                             p_status, p_event_id);
    END IF;
    PERFORM FROM metastore.forward_targets AS t
      WHERE t.name = v_key AND t.lease_owner = p_owner AND t.lease_until >= clock_timestamp()
        FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO metastore.forward_refusals AS r (target, event_id, cursor, status, body)
    VALUES (v_key, p_event_id, p_cursor, p_status, left(coalesce(p_body, ''), 2000))
    ON CONFLICT (target, event_id) DO UPDATE
       SET cursor = excluded.cursor, status = excluded.status, body = excluded.body, refused_at = excluded.refused_at;
    SELECT r.refused_at, r.event_id INTO v_last
      FROM metastore.forward_refusals AS r
     WHERE r.target = v_key
     ORDER BY r.refused_at DESC, r.event_id DESC
    OFFSET c_keep - 1 LIMIT 1;
    IF FOUND THEN
        DELETE FROM metastore.forward_refusals AS r
         WHERE r.target = v_key AND (r.refused_at, r.event_id) < (v_last.refused_at, v_last.event_id);
    END IF;
    RETURN true;
END
$$;

COMMENT ON FUNCTION metastore.forward_refused(p_target text, p_owner text, p_event_id bigint, p_cursor text, p_status integer, p_body text) IS 'Records that target p_target refused event p_event_id (feed cursor p_cursor) with p_status 400 or 422 and p_body (its first 2000 characters), keeping the newest 1000 refusals per target. Returns false when p_owner does not hold an unexpired lease (nothing is recorded). Error code: 22023 any other status.';

CREATE FUNCTION metastore.forward_remove(p_target text) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_key   text := metastore.forward_key(p_target);
    v_until timestamptz;
BEGIN
    SELECT t.lease_until INTO v_until FROM metastore.forward_targets AS t WHERE t.name = v_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_until >= clock_timestamp() THEN
        RAISE EXCEPTION USING
            ERRCODE = '55006',
            MESSAGE = format('forwarding target %s is in use (a replica holds its lease until %s)', v_key, v_until),
            HINT = 'Remove it from METASTORE_FORWARD_URL on every replica first, then wait for the lease to end.';
    END IF;
    DELETE FROM metastore.forward_targets AS t WHERE t.name = v_key;
    RETURN true;
END
$$;

COMMENT ON FUNCTION metastore.forward_remove(p_target text) IS 'Removes forwarding target p_target (any URL naming it: metastore.forward_key) with its cursor and refusals; returns false when there is no such target. For the owner only. Error code: 55006 the target is in use (a replica holds an unexpired lease).';

CREATE FUNCTION metastore.forward_status() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    v_out     jsonb := '[]';
    v_t       record;
    v_pos     record;
    v_next    timestamptz;
    v_oid     bigint;
    v_oat     timestamptz;
    v_refusal jsonb;
BEGIN
    FOR v_t IN SELECT * FROM metastore.forward_targets ORDER BY name LOOP
        -- The oldest event not yet acknowledged, in the feed's order: the lag is how long it has waited.
        IF pg_catalog.to_regclass('metastore.feed_order') IS NOT NULL THEN
            -- Citus: the order of metastore.feed_order (docs/events.md, "On Citus").
            SELECT o.event_id, o.event_time INTO v_oid, v_oat
              FROM metastore.feed_order AS o
             WHERE o.seq > metastore.feed_seq(v_t.cursor)
             ORDER BY o.seq
             LIMIT 1;
            SELECT e.received_at INTO v_next
              FROM metastore.events AS e
             WHERE e.id = v_oid AND e.event_time = v_oat;
        ELSE
            SELECT * INTO v_pos FROM metastore.forward_position(v_t.cursor);
            SELECT e.received_at INTO v_next
              FROM metastore.events AS e
             WHERE (e.xact_id, e.id) > (v_pos.xact_id, v_pos.event_id)
               AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
             ORDER BY e.xact_id, e.id
             LIMIT 1;
        END IF;
        SELECT jsonb_build_object('event_id', r.event_id, 'status', r.status, 'body', r.body, 'at', r.refused_at)
          INTO v_refusal
          FROM metastore.forward_refusals AS r
         WHERE r.target = v_t.name
         ORDER BY r.refused_at DESC, r.event_id DESC
         LIMIT 1;
        v_out := v_out || jsonb_build_object(
            'target', v_t.name,
            'sent', v_t.sent,
            'refused', v_t.refused,
            'last_refusal', v_refusal,
            'cursor', v_t.cursor,
            'updated_at', v_t.updated_at,
            'lease_until', v_t.lease_until,
            'failures', v_t.failures,
            'failing_since', v_t.failing_since,
            'last_error', v_t.last_error,
            'last_error_at', v_t.last_error_at,
            'oldest_pending_received_at', v_next,
            'lag_seconds', CASE WHEN v_next IS NULL THEN 0
                                ELSE round(extract(epoch FROM clock_timestamp() - v_next)::numeric, 3) END);
    END LOOP;
    RETURN jsonb_build_object('targets', v_out);
END
$$;

COMMENT ON FUNCTION metastore.forward_status() IS 'Live forwarding, per target (named by metastore.forward_key: no credentials): events sent and refused, the last refusal (event, status, start of the body), cursor, failures in a row and since when, the last error, and lag_seconds: how long the oldest event not yet acknowledged has waited since it was received (0 when the target is up to date).';

CREATE FUNCTION metastore.generation_greatest(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN p_stored_generation OPERATOR(pg_catalog.<>) p_generation THEN p_new
                ELSE GREATEST(p_stored, p_new) END
$$;

COMMENT ON FUNCTION metastore.generation_greatest(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) IS 'p_new when p_stored_generation differs from p_generation (a row of an older generation is replaced), else the latest of p_stored and p_new (nulls ignored). The merge of a last_seen in the derivations'' upserts.';

CREATE FUNCTION metastore.generation_least(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE WHEN p_stored_generation OPERATOR(pg_catalog.<>) p_generation THEN p_new
                ELSE LEAST(p_stored, p_new) END
$$;

COMMENT ON FUNCTION metastore.generation_least(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) IS 'p_new when p_stored_generation differs from p_generation (a row of an older generation is replaced), else the earliest of p_stored and p_new (nulls ignored). The merge of a first_seen in the derivations'' upserts.';

CREATE FUNCTION metastore.get_dataset(p_id bigint, p_events_limit integer DEFAULT 50) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    v_hide    record := metastore.hidden_names();
    v_dataset jsonb;
    v_first   timestamptz;
    v_before  timestamptz;
    v_lo      timestamptz;
    v_span    interval := interval '1 day';
    v_ids     bigint[] := '{}';
    v_times   timestamptz[] := '{}';
    v_dirs    text[] := '{}';
    v_events  jsonb;
BEGIN
    IF p_events_limit IS NULL OR p_events_limit < 0 OR p_events_limit > 1000 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('events_limit must be from 0 to 1000, not %s', p_events_limit);
    END IF;

    SELECT to_jsonb(v), v.first_seen, v.last_seen + interval '1 microsecond'
      INTO v_dataset, v_first, v_before
      FROM metastore.datasets_view AS v
     WHERE v.id = p_id AND v.id <> ALL (v_hide.dataset_ids) AND v.namespace <> ALL (v_hide.namespaces);
    IF v_dataset IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    -- Its most recent links, newest eventTime first. Links are partitioned by day of eventTime and
    -- all of a dataset's lie between its first_seen and last_seen. When its counts say they fit in
    -- one page, one look over that lifetime; otherwise look back from last_seen over windows of 1,
    -- 8, 64 and 512 days, then the rest, until the page is full: a busy dataset reads a day or two
    -- of partitions, never all of them. EXECUTE plans each query for its actual window, so pruned
    -- to that window's partitions (a cached generic plan would open and lock every partition).
    IF (v_dataset ->> 'input_events')::bigint + (v_dataset ->> 'output_events')::bigint <= p_events_limit THEN
        v_span := NULL;
    END IF;
    WHILE cardinality(v_ids) < p_events_limit LOOP
        v_lo := CASE WHEN v_span IS NULL OR v_span > interval '512 days' THEN v_first
                     ELSE greatest(v_before - v_span, v_first) END;
        EXECUTE
            'SELECT $1 || coalesce(array_agg(w.event_id ORDER BY w.event_time DESC, w.event_id DESC, w.direction), ''{}''),
                    $2 || coalesce(array_agg(w.event_time ORDER BY w.event_time DESC, w.event_id DESC, w.direction), ''{}''),
                    $3 || coalesce(array_agg(w.direction ORDER BY w.event_time DESC, w.event_id DESC, w.direction), ''{}'')
               FROM (SELECT l.event_id, l.event_time, l.direction
                       FROM metastore.event_datasets AS l
                      WHERE l.dataset_id = $4 AND l.event_time >= $5 AND l.event_time < $6
                      ORDER BY l.event_time DESC, l.event_id DESC, l.direction
                      LIMIT $7) AS w'
            INTO v_ids, v_times, v_dirs
            USING v_ids, v_times, v_dirs, p_id, v_lo, v_before, p_events_limit - cardinality(v_ids);
        EXIT WHEN v_lo <= v_first;
        v_before := v_lo;
        v_span := v_span * 8;
    END LOOP;

    -- Their events' headers, from the partitions of those eventTimes only; not those of a hidden
    -- job (the feed still serves them).
    v_events := '[]';
    IF cardinality(v_ids) > 0 THEN
        EXECUTE
            'SELECT coalesce(jsonb_agg(to_jsonb(r) - ''position'' ORDER BY r.position), ''[]'')
               FROM (SELECT l.event_id, l.direction, e.event_kind, e.event_type, e.event_time, e.run_id,
                            e.job_namespace, e.job_name, e.received_at, l.position
                       FROM unnest($1, $2, $3) WITH ORDINALITY AS l (event_id, event_time, direction, position)
                       JOIN metastore.events AS e ON e.id = l.event_id AND e.event_time = l.event_time
                      WHERE e.event_time = ANY ($2)
                        AND (e.job_namespace IS NULL OR e.job_namespace <> ALL ($5))
                        AND (cardinality($4) = 0 OR e.job_name IS NULL
                             OR sha256(metastore.dataset_key(e.job_namespace, e.job_name)) <> ALL (
                                    SELECT j.name_key FROM metastore.jobs AS j WHERE j.id = ANY ($4)))) AS r'
            INTO v_events
            USING v_ids, v_times, v_dirs, v_hide.job_ids, v_hide.namespaces;
    END IF;

    RETURN v_dataset || jsonb_build_object(
        'symlinks', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind, 'type', s.type)
                       ORDER BY d.namespace, d.name, s.type), '[]')
              FROM metastore.dataset_symlinks_view AS s
              JOIN metastore.datasets_view AS d ON d.id = s.symlink_id
             WHERE s.dataset_id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)),
        'symlink_of', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind, 'type', s.type)
                       ORDER BY d.namespace, d.name, s.type), '[]')
              FROM metastore.dataset_symlinks_view AS s
              JOIN metastore.datasets_view AS d ON d.id = s.dataset_id
             WHERE s.symlink_id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)),
        'events', v_events)
        -- Fields, schema versions, column lineage and one hop of lineage.
        || metastore.dataset_layer(p_id);
END
$_$;

COMMENT ON FUNCTION metastore.get_dataset(p_id bigint, p_events_limit integer) IS 'One dataset with its symlinks (identifiers it carries), symlink_of (datasets that name it as a symlink) and its most recent events, newest eventTime first (job, run, event type, direction, time), and (metastore.dataset_layer) its fields, schema_versions, column_lineage, upstream and downstream. What the owner hid (metastore.hide) is not there: a hidden dataset is not found, hidden datasets are not listed, events of hidden jobs not shown. Error codes: P0002 no such dataset; 22023 events_limit outside 0..1000.';

CREATE FUNCTION metastore.get_job(p_id bigint, p_runs_limit integer DEFAULT 50) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    -- A job's datasets are those of its latest runs, this many: a query run every minute for a
    -- year has half a million.
    c_runs  constant integer := 1000;
    c_side  constant integer := 100;
    v_hide  record := metastore.hidden_names();
    v_job   jsonb;
    v_io    jsonb;
BEGIN
    IF p_runs_limit IS NULL OR p_runs_limit < 0 OR p_runs_limit > 1000 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('runs_limit must be from 0 to 1000, not %s', p_runs_limit);
    END IF;
    SELECT to_jsonb(j) INTO v_job FROM metastore.jobs_view AS j
     WHERE j.id = p_id AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces);
    IF v_job IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no job has id %s', p_id);
    END IF;
    -- What its latest runs read and wrote (metastore.run_datasets, from change 9 on), each dataset with
    -- its symlinks both ways; at most c_side of each side, in (namespace, name) order.
    v_io := jsonb_build_object('inputs', '[]'::jsonb, 'outputs', '[]'::jsonb, 'datasets_truncated', false);
    IF to_regclass('metastore.run_datasets') IS NOT NULL THEN
        SELECT jsonb_build_object(
                   'inputs', coalesce(jsonb_agg(x.dataset ORDER BY x.namespace COLLATE "C", x.name COLLATE "C", x.id)
                                          FILTER (WHERE x.direction = 'input' AND x.n <= c_side), '[]'),
                   'outputs', coalesce(jsonb_agg(x.dataset ORDER BY x.namespace COLLATE "C", x.name COLLATE "C", x.id)
                                           FILTER (WHERE x.direction = 'output' AND x.n <= c_side), '[]'),
                   'datasets_truncated', coalesce(bool_or(x.n > c_side), false))
          INTO v_io
          FROM (SELECT y.direction, y.id, y.namespace, y.name, y.n,
                       jsonb_build_object(
                           'id', y.id, 'namespace', y.namespace, 'name', y.name, 'kind', y.kind,
                           'symlinks', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                                  'id', t.id, 'namespace', t.namespace, 'name', t.name, 'type', s.type)
                                                  ORDER BY t.namespace COLLATE "C", t.name COLLATE "C", s.type), '[]')
                                          FROM metastore.dataset_symlinks AS s
                                          JOIN metastore.datasets AS t ON t.id = s.symlink_id
                                         WHERE s.dataset_id = y.id
                                           AND t.id <> ALL (v_hide.dataset_ids) AND t.namespace <> ALL (v_hide.namespaces)),
                           'symlink_of', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                                    'id', t.id, 'namespace', t.namespace, 'name', t.name, 'type', s.type)
                                                    ORDER BY t.namespace COLLATE "C", t.name COLLATE "C", s.type), '[]')
                                            FROM metastore.dataset_symlinks AS s
                                            JOIN metastore.datasets AS t ON t.id = s.dataset_id
                                           WHERE s.symlink_id = y.id
                                             AND t.id <> ALL (v_hide.dataset_ids)
                                             AND t.namespace <> ALL (v_hide.namespaces))) AS dataset
                  FROM (SELECT io.direction, d.id, d.namespace, d.name, d.kind,
                               row_number() OVER (PARTITION BY io.direction
                                                  ORDER BY d.namespace COLLATE "C", d.name COLLATE "C", d.id) AS n
                          FROM (SELECT DISTINCT rd.direction, rd.dataset_id
                                  FROM (SELECT r.id FROM metastore.runs AS r WHERE r.job_id = p_id
                                         ORDER BY r.first_event_time DESC, r.id DESC LIMIT c_runs) AS r
                                  JOIN metastore.run_datasets AS rd ON rd.run_id = r.id) AS io
                          JOIN metastore.datasets AS d ON d.id = io.dataset_id
                         WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) AS y
                 WHERE y.n <= c_side + 1) AS x;
    END IF;

    -- Its latest runs, newest first, through the (job_id, first_event_time, id) index.
    RETURN v_job || v_io || jsonb_build_object(
        'runs', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', r.id, 'run_id', r.run_id, 'state', r.state, 'started_at', r.started_at,
                       'ended_at', r.ended_at, 'duration_s', extract(epoch FROM r.duration),
                       'error_message', r.error_message, 'trino_user', r.trino_user,
                       'trino_source', r.trino_source, 'first_event_time', r.first_event_time,
                       'last_event_time', r.last_event_time, 'event_count', r.event_count)
                       ORDER BY r.first_event_time DESC, r.id DESC), '[]')
              FROM (SELECT * FROM metastore.runs_view AS v
                     WHERE v.job_id = p_id
                     ORDER BY v.first_event_time DESC, v.id DESC
                     LIMIT p_runs_limit) AS r));
END
$$;

COMMENT ON FUNCTION metastore.get_job(p_id bigint, p_runs_limit integer) IS 'One job with its latest SQL (sql job facet), job type, the datasets its latest 1000 runs read (inputs) and wrote (outputs), at most 100 each (datasets_truncated: more), each with its symlinks both ways, and its latest p_runs_limit runs, newest first. A hidden job (metastore.hide) is not found, hidden datasets are not listed. Error codes: P0002 no such job; 22023 runs_limit outside 0..1000.';

CREATE FUNCTION metastore.get_run(p_id bigint) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    -- Run facets shown as sent, each from the latest event of the run that carries it.
    c_facets constant text[] := ARRAY['errorMessage', 'nominalTime', 'processing_engine', 'parent',
                                      'trino_query_context'];
    v_hide   record := metastore.hidden_names();
    v_run    jsonb;
    v_result jsonb;
BEGIN
    SELECT to_jsonb(r) - 'duration' || jsonb_build_object(
               'duration_s', extract(epoch FROM r.duration),
               'job', jsonb_build_object('id', j.id, 'namespace', j.namespace, 'name', j.name))
      INTO v_run
      FROM metastore.runs_view AS r
      JOIN metastore.jobs_view AS j ON j.id = r.job_id
     WHERE r.id = p_id AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces);
    IF v_run IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no run has id %s', p_id);
    END IF;

    -- The run's events lie between its first and last eventTime: EXECUTE plans for that window,
    -- so only those days' partitions are read (a generic plan would lock every partition).
    EXECUTE
        'WITH ev AS (
             SELECT e.id, e.event_time, e.event_type, e.payload
               FROM metastore.events AS e
              WHERE e.run_id = $1 AND e.job_namespace = $2 AND e.job_name = $3
                AND e.event_time >= $4 AND e.event_time <= $5
              ORDER BY e.event_time DESC, e.id DESC
              LIMIT 1000),
         io AS (
             SELECT DISTINCT l.direction, d.id, d.namespace, d.name
               FROM ev
               JOIN metastore.event_datasets AS l ON l.event_id = ev.id AND l.event_time = ev.event_time
               JOIN metastore.datasets_view AS d ON d.id = l.dataset_id
              WHERE l.event_time >= $4 AND l.event_time <= $5 AND d.id <> ALL ($7) AND d.namespace <> ALL ($8))
         SELECT jsonb_build_object(
                    ''events'', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                     ''id'', ev.id, ''event_type'', ev.event_type, ''event_time'', ev.event_time)
                                     ORDER BY ev.event_time DESC, ev.id DESC), ''[]'') FROM ev),
                    ''inputs'', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                     ''id'', io.id, ''namespace'', io.namespace, ''name'', io.name)
                                     ORDER BY io.namespace, io.name), ''[]'') FROM io WHERE io.direction = ''input''),
                    ''outputs'', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                      ''id'', io.id, ''namespace'', io.namespace, ''name'', io.name)
                                      ORDER BY io.namespace, io.name), ''[]'') FROM io WHERE io.direction = ''output''),
                    ''sql'', (SELECT ev.payload -> ''job'' -> ''facets'' -> ''sql'' ->> ''query'' FROM ev
                             WHERE jsonb_typeof(ev.payload -> ''job'' -> ''facets'' -> ''sql'' -> ''query'') = ''string''
                             ORDER BY ev.event_time DESC, ev.id DESC LIMIT 1),
                    ''facets'', (SELECT coalesce(jsonb_object_agg(f.key, f.value), ''{}'')
                                  FROM (SELECT DISTINCT ON (k.key) k.key, k.value
                                          FROM ev CROSS JOIN LATERAL jsonb_each(
                                                   CASE WHEN jsonb_typeof(ev.payload -> ''run'' -> ''facets'') = ''object''
                                                        THEN ev.payload -> ''run'' -> ''facets'' ELSE ''{}'' END) AS k
                                         WHERE k.key = ANY ($6)
                                         ORDER BY k.key, ev.event_time DESC, ev.id DESC) AS f))'
        INTO v_result
        USING v_run ->> 'run_id', v_run -> 'job' ->> 'namespace', v_run -> 'job' ->> 'name',
              (v_run ->> 'first_event_time')::timestamptz, (v_run ->> 'last_event_time')::timestamptz, c_facets,
              v_hide.dataset_ids, v_hide.namespaces;
    RETURN v_run || v_result;
END
$_$;

COMMENT ON FUNCTION metastore.get_run(p_id bigint) IS 'One run: its state, times, error, Trino user and source, its job, its events (newest first, at most 1000), the datasets they read (inputs) and wrote (outputs), the SQL of its latest event with an sql facet, and the run facets errorMessage, nominalTime, processing_engine, parent and trino_query_context as sent (each from the latest event that carries it). The run of a hidden job (metastore.hide) is not found, hidden datasets are not listed. Error codes: P0002 no such run.';

CREATE FUNCTION metastore.group_role(p_kind text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_role text;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('app', 'reader') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('kind must be app or reader, not %s', p_kind);
    END IF;
    -- Before change 3 (deploy --to 1 or 2) the roles were the cluster-wide ones change 1 made.
    IF to_regclass('metastore.group_roles') IS NULL THEN
        RETURN 'metastore_' || p_kind;
    END IF;
    SELECT CASE p_kind WHEN 'app' THEN r.app_role ELSE r.reader_role END INTO STRICT v_role
      FROM metastore.group_roles AS r;
    RETURN v_role;
END
$$;

COMMENT ON FUNCTION metastore.group_role(p_kind text) IS 'The name of this installation''s group role of the given kind (app or reader), as recorded in metastore.group_roles. Error codes: 22023 unknown kind.';

CREATE FUNCTION metastore.hidden_list(p_all boolean DEFAULT false) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
BEGIN
    RETURN jsonb_build_object('hidden', (
        SELECT coalesce(jsonb_agg(to_jsonb(h) - 'name_key' ORDER BY h.id), '[]')
          FROM metastore.hidden AS h
         WHERE coalesce(p_all, false) OR h.unhidden_at IS NULL));
END
$$;

COMMENT ON FUNCTION metastore.hidden_list(p_all boolean) IS 'The entries of metastore.hidden in the order they were made: those hidden now, or with p_all every one, shown again or not (who and when for both). Owner only.';

CREATE FUNCTION metastore.hidden_names(OUT dataset_ids bigint[], OUT job_ids bigint[], OUT job_edge_keys bytea[], OUT namespaces text[]) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    dataset_ids := '{}';
    job_ids := '{}';
    job_edge_keys := '{}';
    namespaces := '{}';
    -- db/functions is applied at every version: before the change that made the list, none is hidden.
    IF to_regclass('metastore.hidden') IS NULL THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(h.namespace) FILTER (WHERE h.kind = 'namespace'), '{}'),
           -- A job's key in metastore.lineage_edges (job_sha256).
           coalesce(array_agg(sha256(convert_to(jsonb_build_array(h.namespace, h.name)::text, 'UTF8')))
                        FILTER (WHERE h.kind = 'job'), '{}')
      INTO namespaces, job_edge_keys
      FROM metastore.hidden AS h
     WHERE h.unhidden_at IS NULL;
    -- By name: the rows that hold those names now (a dataset seen again after a rebuild removed it
    -- has a new id and the same name).
    dataset_ids := ARRAY(SELECT d.id FROM metastore.hidden AS h
                           JOIN metastore.datasets AS d ON d.name_key = h.name_key
                          WHERE h.kind = 'dataset' AND h.unhidden_at IS NULL);
    job_ids := ARRAY(SELECT j.id FROM metastore.hidden AS h
                       JOIN metastore.jobs AS j ON j.name_key = h.name_key
                      WHERE h.kind = 'job' AND h.unhidden_at IS NULL);
END
$$;

COMMENT ON FUNCTION metastore.hidden_names(OUT dataset_ids bigint[], OUT job_ids bigint[], OUT job_edge_keys bytea[], OUT namespaces text[]) IS 'What metastore.hidden hides now: the ids of the hidden datasets and jobs, the hidden jobs'' keys in metastore.lineage_edges (job_sha256), and the hidden namespaces (every dataset and job of one). Empty arrays when nothing is hidden. For the read functions; not for applications.';

CREATE FUNCTION metastore.hide(p_kind text, p_namespace text, p_name text DEFAULT NULL::text, p_reason text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    -- A record, not metastore.hidden: db/functions is applied before change 9 too.
    v_entry   record;
    v_already boolean := false;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('dataset', 'job', 'namespace') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('kind must be dataset, job or namespace, not %s', coalesce(p_kind, 'null'));
    END IF;
    IF p_namespace IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a namespace is required';
    END IF;
    IF (p_kind = 'namespace') <> (p_name IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = CASE WHEN p_kind = 'namespace' THEN 'a namespace is hidden by its name alone: no name'
                           ELSE format('a %s is hidden by its namespace and name', p_kind) END;
    END IF;
    IF octet_length(p_reason) > 2000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'the reason must be at most 2000 bytes';
    END IF;
    INSERT INTO metastore.hidden AS h (kind, namespace, name, reason, hidden_by, hidden_at)
    VALUES (p_kind, p_namespace, p_name, p_reason, session_user, clock_timestamp())
    ON CONFLICT (kind, name_key) WHERE unhidden_at IS NULL DO NOTHING
    RETURNING h.* INTO v_entry;
    IF NOT FOUND THEN
        -- Hidden already: said so, the entry as it was recorded.
        v_already := true;
        SELECT h.* INTO STRICT v_entry FROM metastore.hidden AS h
         WHERE h.kind = p_kind AND h.name_key = sha256(metastore.dataset_key(p_namespace, coalesce(p_name, '')))
           AND h.unhidden_at IS NULL;
    END IF;
    RETURN jsonb_build_object(
        'hidden', to_jsonb(v_entry) - 'name_key',
        'already_hidden', v_already,
        -- What it hides now; a name nothing has yet is hidden from when something has it.
        'datasets', CASE p_kind
                        WHEN 'dataset' THEN (SELECT count(*) FROM metastore.datasets AS d
                                              WHERE d.name_key = v_entry.name_key)
                        WHEN 'namespace' THEN (SELECT count(*) FROM metastore.datasets AS d
                                                WHERE d.namespace = p_namespace)
                        ELSE 0 END,
        'jobs', CASE p_kind
                    WHEN 'job' THEN (SELECT count(*) FROM metastore.jobs AS j WHERE j.name_key = v_entry.name_key)
                    WHEN 'namespace' THEN (SELECT count(*) FROM metastore.jobs AS j WHERE j.namespace = p_namespace)
                    ELSE 0 END);
END
$$;

COMMENT ON FUNCTION metastore.hide(p_kind text, p_namespace text, p_name text, p_reason text) IS 'Hides a dataset (p_kind dataset, namespace and name), a job (job, namespace and name) or every dataset and job of a namespace (namespace, no name) from every read function: lists, details (404), search, lineage, runs'' inputs and outputs, counts, namespaces. By name, so that it stays hidden when a rebuild or a new event makes its row again, until metastore.unhide. Records who (session_user), when and why (p_reason). The events stay, and the event feed serves them. Returns {"hidden": the entry, "already_hidden", "datasets", "jobs": how many it hides now}. Owner only. Error codes: 22023 an unknown kind, no namespace, a name missing (dataset, job) or given (namespace), a reason over 2000 bytes.';

CREATE FUNCTION metastore.ingest_batch(p_body bytea, p_source_kind text DEFAULT 'unauthenticated'::text, p_source_principal text DEFAULT NULL::text, OUT status text, OUT result jsonb) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_kind      text := metastore.check_source(p_source_kind, p_source_principal);
    v_batch     jsonb;
    v_received  integer;
    v_max       integer;
    v_events    jsonb[];
    v_checked   metastore.checked_event[];
    v_stored    integer := 0;
    v_dups      integer := 0;
    v_failed    jsonb;
    v_text      text;
BEGIN
    -- Whole-body errors (not UTF-8, not JSON, a duplicate key) propagate with their SQLSTATE.
    v_text := pg_catalog.convert_from(p_body, 'UTF8');
    v_batch := v_text::jsonb;
    IF pg_catalog.jsonb_typeof(v_batch) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a batch must be a JSON array of OpenLineage events, not a JSON %s',
                                        pg_catalog.jsonb_typeof(v_batch));
    END IF;
    v_received := pg_catalog.jsonb_array_length(v_batch);
    SELECT s.max_batch_events INTO v_max FROM metastore.settings AS s;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000', MESSAGE = 'metastore.settings has no row: the deploy makes it, see V0002';
    END IF;
    IF v_received > v_max THEN
        RAISE EXCEPTION USING
            ERRCODE = '54000',
            MESSAGE = pg_catalog.format('a batch holds at most %s events (metastore.settings.max_batch_events), '
                                        'not %s: send it in smaller batches', v_max, v_received);
    END IF;

    -- Linear in the size of the batch: the checks are collected once and walked once (unnest),
    -- never indexed (an element of an array of composite values is found by walking the array
    -- from its start).

    -- 1. Check every event, writing nothing. In the batch's order: the function scan keeps it. The
    -- batch is walked once, for its events and their checks.
    SELECT coalesce(array_agg(a.e), '{}'), coalesce(array_agg(metastore.check_event(a.e)), '{}')
      INTO v_events, v_checked
      FROM jsonb_array_elements(v_batch) AS a (e);
    -- jsonb would keep the last of duplicate keys: not the events sent (033_json_unique_keys.sql).
    -- After the checks: on PostgreSQL 15 this check prints the jsonb, which the checks must have
    -- ruled safe to print first (22003, 54M01; 54M02 is refused before it is measured); a batch
    -- holding such an event is not checked there.
    IF (pg_catalog.current_setting('server_version_num')::integer >= 160000
        OR NOT EXISTS (SELECT FROM pg_catalog.unnest(v_checked) AS c
                        WHERE c.error_code IN ('22003', '54M01', '54M02')))
       AND NOT metastore.json_has_unique_keys(v_text, v_batch) THEN
        RAISE EXCEPTION USING ERRCODE = '22030', MESSAGE = 'an object of the batch has the same key twice';
    END IF;

    -- 2. Record the refused, store the rest, as every ingest function does.
    SELECT count(*) FILTER (WHERE i.status = 'stored'), count(*) FILTER (WHERE i.status = 'duplicate'),
           coalesce(jsonb_agg(jsonb_build_object('index', i.o - 1, 'code', i.error_code, 'reason', i.error_message,
                                                 'retriable', false) ORDER BY i.o)
                        FILTER (WHERE i.error_code IS NOT NULL), '[]')
      INTO v_stored, v_dups, v_failed
      FROM metastore.ingest_checked(NULL, v_events, v_checked, v_kind, p_source_principal)
           WITH ORDINALITY AS i (status, event_id, error_code, error_message, event_type, o);

    status := CASE
        WHEN v_stored + v_dups = v_received THEN 'success'
        WHEN v_stored + v_dups = 0 THEN 'failure'
        ELSE 'partial_success'
    END;
    result := pg_catalog.jsonb_build_object(
        'status', status,
        'summary', pg_catalog.jsonb_build_object(
            'received', v_received,
            'successful', v_stored + v_dups,
            'stored', v_stored,
            'duplicates', v_dups,
            'failed', v_received - v_stored - v_dups,
            'retriable', 0,
            'non_retriable', v_received - v_stored - v_dups),
        'failed_events', v_failed);
END
$$;

COMMENT ON FUNCTION metastore.ingest_batch(p_body bytea, p_source_kind text, p_source_principal text, OUT status text, OUT result jsonb) IS 'Ingests a JSON array of OpenLineage events (the OpenLineage batch API). Each event is stored or rejected on its own; result follows the spec''s batch response (status, summary, failed_events). status: success, partial_success, or failure (no event accepted). Error codes for the whole body: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 22023 not an array; 22030 an object of the array with the same key twice; 54000 more events than metastore.settings.max_batch_events; 22023 an unknown source kind, or a principal with the unauthenticated kind (p_source_kind null means unauthenticated); 55000 metastore.settings has no row.';

CREATE FUNCTION metastore.ingest_checked(p_bodies bytea[], p_payloads jsonb[], p_checked metastore.checked_event[], p_source_kind text, p_source_principal text) RETURNS TABLE(status text, event_id bigint, error_code text, error_message text, event_type text)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_payloads jsonb[];
    v_events   metastore.valid_event[];
    v_ids      bigint[];
    v_dups     boolean[];
    v_refused  boolean;
BEGIN
    -- Arrays aligned by position; p_bodies may be null (a batch's events have no bytes of their
    -- own: a refused one is recorded as its JSON text). Walked once (unnest), never indexed.

    SELECT array_agg(u.payload ORDER BY u.o) FILTER (WHERE u.error_code IS NULL),
           array_agg(u.valid ORDER BY u.o) FILTER (WHERE u.error_code IS NULL),
           coalesce(bool_or(u.error_code IS NOT NULL AND u.payload IS NOT NULL), false)
      INTO v_payloads, v_events, v_refused
      FROM ROWS FROM (unnest(p_payloads), unnest(p_checked)) WITH ORDINALITY
           AS u (payload, valid, error_code, error_message, o);

    -- The client's mistakes: nothing of the event is stored, only a record of why (of well-formed
    -- JSON: a body that is not JSON is refused without a record). Not as text when printing it is
    -- what was refused or was not measured: numbers outside the double range (22003), text that
    -- prints too large (54M01), nesting too deep (54M02, refused before its size was measured).
    IF v_refused THEN
        PERFORM metastore.record_rejection(
                    coalesce(u.body, CASE WHEN u.error_code NOT IN ('22003', '54M01', '54M02')
                                          THEN convert_to(u.payload::text, 'UTF8') END),
                    u.error_code, u.error_message, p_source_kind, p_source_principal)
           FROM ROWS FROM (unnest(p_bodies), unnest(p_payloads), unnest(p_checked)) WITH ORDINALITY
                AS u (body, payload, valid, error_code, error_message, o)
          WHERE u.error_code IS NOT NULL AND u.payload IS NOT NULL
          ORDER BY u.o;
    END IF;

    IF v_payloads IS NOT NULL THEN
        SELECT array_agg(s.event_id ORDER BY s.k), array_agg(s.duplicate ORDER BY s.k)
          INTO v_ids, v_dups
          FROM metastore.store_events(v_payloads, v_events, p_source_kind, p_source_principal)
               WITH ORDINALITY AS s (event_id, duplicate, k);
    END IF;

    -- The k-th accepted event is the k-th stored.
    RETURN QUERY
    SELECT CASE WHEN c.error_code IS NOT NULL THEN 'rejected' WHEN s.dup THEN 'duplicate' ELSE 'stored' END,
           s.id, c.error_code, c.error_message,
           CASE WHEN c.error_code IS NULL THEN (c.valid).event_type
                WHEN jsonb_typeof(c.payload -> 'eventType') = 'string' THEN left(c.payload ->> 'eventType', 64) END
      FROM (SELECT u.payload, u.valid, u.error_code, u.error_message, u.o,
                   count(*) FILTER (WHERE u.error_code IS NULL) OVER (ORDER BY u.o) AS k
              FROM ROWS FROM (unnest(p_payloads), unnest(p_checked)) WITH ORDINALITY
                   AS u (payload, valid, error_code, error_message, o)) AS c
      LEFT JOIN unnest(v_ids, v_dups) WITH ORDINALITY AS s (id, dup, k)
        ON c.error_code IS NULL AND s.k = c.k
     ORDER BY c.o;
END
$$;

COMMENT ON FUNCTION metastore.ingest_checked(p_bodies bytea[], p_payloads jsonb[], p_checked metastore.checked_event[], p_source_kind text, p_source_principal text) IS 'The shared second half of metastore.ingest_event, ingest_events and ingest_batch: given the bodies (or null), their payloads and metastore.check_event''s answers, aligned by position, records the refused ones (metastore.record_rejection), stores the others as one set (metastore.store_events) and returns one row per event, in order, as metastore.ingest_event describes. Not for applications.';

CREATE FUNCTION metastore.ingest_event(p_body bytea, p_source_kind text DEFAULT 'unauthenticated'::text, p_source_principal text DEFAULT NULL::text, OUT status text, OUT event_id bigint, OUT error_code text, OUT error_message text, OUT event_type text) RETURNS record
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_kind text := metastore.check_source(p_source_kind, p_source_principal);
BEGIN
    SELECT i.status, i.event_id, i.error_code, i.error_message, i.event_type
      INTO status, event_id, error_code, error_message, event_type
      FROM metastore.read_event(p_body) AS r
     CROSS JOIN LATERAL metastore.ingest_checked(ARRAY[p_body], ARRAY[r.payload], ARRAY[r.checked], v_kind,
                                                p_source_principal) AS i;
END
$$;

COMMENT ON FUNCTION metastore.ingest_event(p_body bytea, p_source_kind text, p_source_principal text, OUT status text, OUT event_id bigint, OUT error_code text, OUT error_message text, OUT event_type text) IS 'Ingests one OpenLineage event given as UTF-8 JSON bytes. status: stored, duplicate (an equal event was stored before; event_id is that one) or rejected (error_code is the SQLSTATE, error_message says why; well-formed JSON is recorded in metastore.rejected_events); event_type is the eventType sent, if any. Rejection codes: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 22030 an object with the same key twice; 54001 nested too deep; and those of metastore.validate_event. p_source_kind null means unauthenticated; raises 22023 for an unknown kind or a principal with the unauthenticated kind.';

CREATE FUNCTION metastore.ingest_events(p_bodies bytea[], p_source_kind text DEFAULT 'unauthenticated'::text, p_source_principal text DEFAULT NULL::text) RETURNS TABLE(status text, event_id bigint, error_code text, error_message text, event_type text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_kind     text := metastore.check_source(p_source_kind, p_source_principal);
    v_payloads jsonb[];
    v_checked  metastore.checked_event[];
BEGIN
    -- Read and check every body, in the order of p_bodies: the lateral call makes unnest the outer
    -- side of a nested loop, which keeps its order (an ORDER BY would copy every payload into a sort).
    SELECT array_agg(r.payload), array_agg(r.checked)
      INTO v_payloads, v_checked
      FROM unnest(p_bodies) AS b (body)
     CROSS JOIN LATERAL metastore.read_event(b.body) AS r;
    RETURN QUERY SELECT * FROM metastore.ingest_checked(p_bodies, v_payloads, v_checked, v_kind, p_source_principal);
END
$$;

COMMENT ON FUNCTION metastore.ingest_events(p_bodies bytea[], p_source_kind text, p_source_principal text) IS 'Ingests several separately received events (each UTF-8 JSON bytes) in one transaction: one result row per body, in order, as metastore.ingest_event gives it. Used by the service''s asynchronous writer. p_source_kind null means unauthenticated; raises 22023 for an unknown kind or a principal with the unauthenticated kind.';

CREATE FUNCTION metastore.json_has_unique_keys(p_json text, p_parsed jsonb) RETURNS boolean
    LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_unique boolean;
    v_json   text;
    v_jsonb  text;
BEGIN
    IF pg_catalog.strpos(p_json, '{') = 0 THEN
        RETURN true;  -- no object at all
    END IF;
    IF pg_catalog.current_setting('server_version_num')::integer >= 160000 THEN
        EXECUTE 'SELECT $1 IS JSON WITH UNIQUE KEYS' INTO v_unique USING p_json;
        RETURN v_unique;
    END IF;
    -- Both sides re-emit the text with the same escaping (so a \u003a escape is a colon on both);
    -- every member adds one colon outside strings, and the members jsonb dropped are missing from
    -- its side. json_strip_nulls is the one function of 15 that re-emits json keeping duplicates;
    -- it drops null members, so both sides drop them.
    v_json := pg_catalog.json_strip_nulls(p_json::json)::text;
    v_jsonb := pg_catalog.jsonb_strip_nulls(p_parsed)::text;
    RETURN pg_catalog.octet_length(v_json) - pg_catalog.octet_length(pg_catalog.replace(v_json, ':', ''))
         = pg_catalog.octet_length(v_jsonb) - pg_catalog.octet_length(pg_catalog.replace(v_jsonb, ':', ''));
END
$_$;

COMMENT ON FUNCTION metastore.json_has_unique_keys(p_json text, p_parsed jsonb) IS 'True when the JSON text p_json has no object with a duplicate key at any depth (jsonb keeps the last one silently); p_parsed is p_json::jsonb, which the caller has already made. Used by the ingest functions, which refuse a duplicate with SQLSTATE 22030 (duplicate_json_object_key_value).';

CREATE FUNCTION metastore.json_text(p_value jsonb, p_path text, p_max_bytes integer, p_required boolean DEFAULT true) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_text text;
BEGIN
    IF p_value IS NULL OR pg_catalog.jsonb_typeof(p_value) = 'null' THEN
        IF p_required THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = pg_catalog.format('"%s" is required and must be a non-empty string', p_path);
        END IF;
        RETURN NULL;
    END IF;
    -- The message names the JSON type, never the value: the text of a value is unbounded (a
    -- number such as 1e131071 prints as 131,072 digits).
    IF pg_catalog.jsonb_typeof(p_value) <> 'string' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('"%s" must be a non-empty string, not a JSON %s',
                                        p_path, pg_catalog.jsonb_typeof(p_value));
    END IF;
    v_text := p_value #>> '{}';
    IF v_text = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = pg_catalog.format('"%s" must be a non-empty string, not ""', p_path);
    END IF;
    IF pg_catalog.octet_length(v_text) > p_max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = '22001',
            MESSAGE = pg_catalog.format('"%s" is %s bytes long; at most %s are accepted',
                                        p_path, pg_catalog.octet_length(v_text), p_max_bytes);
    END IF;
    RETURN v_text;
END
$$;

COMMENT ON FUNCTION metastore.json_text(p_value jsonb, p_path text, p_max_bytes integer, p_required boolean) IS 'The string at p_value, or null when absent and not required. Error codes: 22023 missing or not a non-empty string; 22001 longer than p_max_bytes (null: no limit).';

CREATE FUNCTION metastore.lineage_graph(p_id bigint, p_direction text, p_depth integer, p_node_limit integer, p_include text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    v_hide      record;
    v_hiding    boolean;
    v_jobs_mode boolean;
    v_start     bigint[];
    v_nodes     bigint[];
    v_depths    integer[];
    v_sides     text[];
    -- Job nodes (jobs mode): lineage_edges' job keys, the jobs' ids, their hop and side.
    v_jobs      bytea[] := '{}';
    v_job_ids   bigint[] := '{}';
    v_jdepths   integer[] := '{}';
    v_jsides    text[] := '{}';
    v_hop_jobs  bytea[];
    v_hop_ids   bigint[];
    v_seen      bigint[];
    v_jseen     bytea[];
    v_frontier  bigint[];
    v_next      bigint[];
    v_new       bigint[];
    v_cap       integer;
    v_dir       text;
    v_truncated boolean := false;
    v_room      integer;
    v_edges     jsonb;
    v_cut       boolean;
    v_max_edges integer := 4 * p_node_limit;
BEGIN
    IF p_direction IS NULL OR p_direction NOT IN ('upstream', 'downstream', 'both') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('direction must be upstream, downstream or both, not %s', coalesce(p_direction, 'null'));
    END IF;
    IF p_depth IS NULL OR p_depth < 1 OR p_depth > 10 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('depth must be from 1 to 10, not %s', p_depth);
    END IF;
    IF p_node_limit IS NULL OR p_node_limit < 1 OR p_node_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('node limit must be from 1 to 1000, not %s', p_node_limit);
    END IF;
    IF p_include IS NOT NULL AND p_include <> 'jobs' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('include must be jobs, not %s', p_include);
    END IF;
    v_jobs_mode := p_include IS NOT NULL;
    v_hide := metastore.hidden_names();
    v_hiding := cardinality(v_hide.dataset_ids) > 0 OR cardinality(v_hide.namespaces) > 0;
    IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                    WHERE d.id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    -- The dataset and its aliases are depth 0; each hop then adds the aliases of what it reached.
    -- What is hidden is not there: not listed, not walked through.
    v_start := metastore.dataset_aliases(ARRAY[p_id], p_node_limit);
    IF v_hiding THEN
        v_start := ARRAY(SELECT a.x FROM unnest(v_start) WITH ORDINALITY AS a (x, o)
                           JOIN metastore.datasets AS d ON d.id = a.x
                          WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                          ORDER BY a.o);
    END IF;
    v_nodes := v_start;
    v_depths := array_fill(0, ARRAY[cardinality(v_start)]);
    v_sides := array_fill('self'::text, ARRAY[cardinality(v_start)]);

    -- Each direction on its own from the start (up then down would reach siblings). A node seen
    -- once is never expanded again in that direction: cycles end there. A node the other direction
    -- listed already (A -> B -> A) is expanded all the same, but listed once.
    FOREACH v_dir IN ARRAY CASE WHEN p_direction = 'both' THEN ARRAY['upstream', 'downstream']
                                ELSE ARRAY[p_direction] END LOOP
        v_seen := v_start;
        v_jseen := '{}';
        v_frontier := v_start;
        FOR v_depth IN 1..p_depth LOOP
            EXIT WHEN cardinality(v_frontier) = 0 OR v_truncated;
            v_room := p_node_limit - cardinality(v_nodes) - cardinality(v_jobs);
            v_hop_jobs := NULL;
            IF v_jobs_mode THEN
                -- The jobs of this hop first (the most recently seen first), then only the datasets
                -- they reach: every dataset listed hangs on a job listed.
                -- A job not seen yet in this direction, with its id (jobs.name_key is the key of its
                -- namespace and name; lineage_edges keys it by their JSON text).
                SELECT coalesce(array_agg(h.job_sha256 ORDER BY h.o), '{}'), coalesce(array_agg(j.id ORDER BY h.o), '{}')
                  INTO v_hop_jobs, v_hop_ids
                  FROM (SELECT e.job_sha256, min(e.job_namespace) AS job_namespace, min(e.job_name) AS job_name,
                               row_number() OVER (ORDER BY max(e.last_seen) DESC, e.job_sha256) AS o
                          FROM metastore.lineage_edges AS e
                         WHERE CASE WHEN v_dir = 'upstream' THEN e.downstream_id ELSE e.upstream_id END = ANY (v_frontier)
                           AND e.job_sha256 <> ALL (v_jseen)
                           AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                         GROUP BY e.job_sha256
                         ORDER BY max(e.last_seen) DESC, e.job_sha256
                         LIMIT v_room + 1) AS h
                  JOIN metastore.jobs AS j ON j.name_key = sha256(metastore.dataset_key(h.job_namespace, h.job_name));
                v_jseen := v_jseen || v_hop_jobs;
                IF cardinality(v_hop_jobs) > v_room THEN
                    v_hop_jobs := v_hop_jobs[1:v_room];
                    v_hop_ids := v_hop_ids[1:v_room];
                    v_truncated := true;
                END IF;
                -- Listed once (the other direction may have listed one: A -> J -> B -> J' -> A).
                SELECT v_jobs || coalesce(array_agg(h.key ORDER BY h.o), '{}'),
                       v_job_ids || coalesce(array_agg(h.id ORDER BY h.o), '{}'),
                       v_jdepths || coalesce(array_agg(v_depth ORDER BY h.o), '{}'),
                       v_jsides || coalesce(array_agg(v_dir ORDER BY h.o), '{}')
                  INTO v_jobs, v_job_ids, v_jdepths, v_jsides
                  FROM unnest(v_hop_jobs, v_hop_ids) WITH ORDINALITY AS h (key, id, o)
                 WHERE h.key <> ALL (v_jobs);
                EXIT WHEN v_truncated;
                v_room := p_node_limit - cardinality(v_nodes) - cardinality(v_jobs);
            END IF;
            -- Room for every node listed already and one more than fits: past that, the graph is cut.
            v_cap := v_room + 1 + cardinality(v_nodes);
            IF v_dir = 'upstream' THEN
                v_next := ARRAY(SELECT DISTINCT e.upstream_id FROM metastore.lineage_edges AS e
                                 WHERE e.downstream_id = ANY (v_frontier) AND e.upstream_id <> ALL (v_seen)
                                   AND (v_hop_jobs IS NULL OR e.job_sha256 = ANY (v_hop_jobs))
                                   AND e.job_sha256 <> ALL (v_hide.job_edge_keys)
                                   AND e.job_namespace <> ALL (v_hide.namespaces)
                                 ORDER BY 1 LIMIT v_cap);
            ELSE
                v_next := ARRAY(SELECT DISTINCT e.downstream_id FROM metastore.lineage_edges AS e
                                 WHERE e.upstream_id = ANY (v_frontier) AND e.downstream_id <> ALL (v_seen)
                                   AND (v_hop_jobs IS NULL OR e.job_sha256 = ANY (v_hop_jobs))
                                   AND e.job_sha256 <> ALL (v_hide.job_edge_keys)
                                   AND e.job_namespace <> ALL (v_hide.namespaces)
                                 ORDER BY 1 LIMIT v_cap);
            END IF;
            -- A hidden dataset leads nowhere, not even to its symlinks' names.
            IF v_hiding THEN
                v_next := ARRAY(SELECT a.x FROM unnest(v_next) WITH ORDINALITY AS a (x, o)
                                  JOIN metastore.datasets AS d ON d.id = a.x
                                 WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                                 ORDER BY a.o);
            END IF;
            EXIT WHEN cardinality(v_next) = 0;
            v_next := ARRAY(SELECT x FROM unnest(metastore.dataset_aliases(v_next, v_cap)) WITH ORDINALITY AS a (x, o)
                             WHERE x <> ALL (v_seen) ORDER BY o);
            IF v_hiding THEN
                v_next := ARRAY(SELECT a.x FROM unnest(v_next) WITH ORDINALITY AS a (x, o)
                                  JOIN metastore.datasets AS d ON d.id = a.x
                                 WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                                 ORDER BY a.o);
            END IF;
            v_seen := v_seen || v_next;
            v_frontier := v_next;
            v_new := ARRAY(SELECT x FROM unnest(v_next) WITH ORDINALITY AS a (x, o)
                            WHERE x <> ALL (v_nodes) ORDER BY o);
            IF cardinality(v_new) > v_room THEN
                v_new := v_new[1:v_room];
                v_truncated := true;
            END IF;
            v_nodes := v_nodes || v_new;
            v_depths := v_depths || array_fill(v_depth, ARRAY[cardinality(v_new)]);
            v_sides := v_sides || array_fill(v_dir, ARRAY[cardinality(v_new)]);
        END LOOP;
    END LOOP;

    -- Edges between the nodes found, at most 4 x p_node_limit: dataset to dataset (with the number
    -- of jobs), or in jobs mode dataset to job (input) and job to dataset (output); and the
    -- symlinks crossed.
    SELECT coalesce(jsonb_agg(g.edge ORDER BY g.k1, g.k2, g.k3, g.k4), '[]'), count(*) > v_max_edges
      INTO v_edges, v_cut
      FROM (SELECT * FROM (
                SELECT jsonb_build_object('kind', 'lineage', 'from', e.upstream_id, 'to', e.downstream_id,
                                          'jobs', count(*), 'first_seen', min(e.first_seen),
                                          'last_seen', max(e.last_seen)) AS edge,
                       0 AS k1, e.upstream_id AS k2, e.downstream_id AS k3, NULL::bigint AS k4
                  FROM metastore.lineage_edges AS e
                 WHERE NOT v_jobs_mode AND e.upstream_id = ANY (v_nodes) AND e.downstream_id = ANY (v_nodes)
                   AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                 GROUP BY e.upstream_id, e.downstream_id
                UNION ALL
                SELECT jsonb_build_object('kind', 'input', 'from', e.upstream_id, 'to', j.id,
                                          'first_seen', min(e.first_seen), 'last_seen', max(e.last_seen)),
                       1, e.upstream_id, j.id, NULL
                  FROM metastore.lineage_edges AS e
                  JOIN unnest(v_jobs, v_job_ids) AS j (key, id) ON j.key = e.job_sha256
                 WHERE v_jobs_mode AND e.upstream_id = ANY (v_nodes)
                 GROUP BY e.upstream_id, j.id
                UNION ALL
                SELECT jsonb_build_object('kind', 'output', 'from', j.id, 'to', e.downstream_id,
                                          'first_seen', min(e.first_seen), 'last_seen', max(e.last_seen)),
                       2, j.id, e.downstream_id, NULL
                  FROM metastore.lineage_edges AS e
                  JOIN unnest(v_jobs, v_job_ids) AS j (key, id) ON j.key = e.job_sha256
                 WHERE v_jobs_mode AND e.downstream_id = ANY (v_nodes)
                 GROUP BY j.id, e.downstream_id
                UNION ALL
                SELECT jsonb_build_object('kind', 'symlink', 'from', s.dataset_id, 'to', s.symlink_id, 'type', s.type),
                       3, s.dataset_id, s.symlink_id, NULL
                  FROM metastore.dataset_symlinks AS s
                 WHERE s.dataset_id = ANY (v_nodes) AND s.symlink_id = ANY (v_nodes)) AS u
             ORDER BY u.k1, u.k2, u.k3
             LIMIT v_max_edges + 1) AS g;
    IF v_cut THEN
        v_edges := v_edges - v_max_edges;
    END IF;

    RETURN jsonb_build_object(
        'id', p_id,
        'direction', p_direction,
        'depth', p_depth,
        'nodes', (SELECT coalesce(jsonb_agg(x.node ORDER BY x.o), '[]') FROM (
                    SELECT n.o, CASE WHEN v_jobs_mode THEN jsonb_build_object('type', 'dataset') ELSE '{}' END
                                || jsonb_build_object('id', d.id, 'namespace', d.namespace, 'name', d.name,
                                                      'kind', d.kind, 'depth', n.depth, 'side', n.side) AS node
                      FROM unnest(v_nodes, v_depths, v_sides) WITH ORDINALITY AS n (id, depth, side, o)
                      JOIN metastore.datasets_view AS d ON d.id = n.id
                    UNION ALL
                    -- Jobs after the datasets, in the order they were reached.
                    SELECT cardinality(v_nodes) + n.o,
                           jsonb_build_object(
                               'type', 'job', 'id', j.id, 'namespace', j.namespace, 'name', j.name,
                               'depth', n.depth, 'side', n.side,
                               'latest_run', (SELECT jsonb_build_object('id', r.id, 'state', r.state,
                                                                        'started_at', r.started_at,
                                                                        'ended_at', r.ended_at)
                                                FROM metastore.runs AS r WHERE r.job_id = j.id
                                               ORDER BY r.first_event_time DESC, r.id DESC LIMIT 1))
                      FROM unnest(v_job_ids, v_jdepths, v_jsides) WITH ORDINALITY AS n (id, depth, side, o)
                      JOIN metastore.jobs AS j ON j.id = n.id
                  ) AS x),
        'edges', v_edges,
        'truncated', v_truncated OR v_cut);
END
$$;

COMMENT ON FUNCTION metastore.lineage_graph(p_id bigint, p_direction text, p_depth integer, p_node_limit integer, p_include text) IS 'The lineage graph around a dataset: {id, direction, depth, nodes, edges, truncated}. nodes: the dataset and its symlink aliases (side self, depth 0), then what p_depth hops upstream and/or downstream reach (each with its aliases), at most p_node_limit. edges: lineage (from upstream to downstream, with the number of jobs) and symlink (from the dataset carrying the identifier to it) between listed nodes, at most 4 x p_node_limit. With p_include ''jobs'' the jobs of each hop are nodes too (type job, listed after the datasets; the node limit counts both; datasets carry type dataset), and the edges are input (dataset to job), output (job to dataset) and symlink. truncated: a limit cut the graph. Hidden datasets and jobs (metastore.hide) are not there. Error codes: 22023 direction not upstream/downstream/both, depth outside 1..10, node limit outside 1..1000, include not jobs; P0002 no such dataset.';

CREATE FUNCTION metastore.list_datasets(p_limit integer DEFAULT 100, p_cursor text DEFAULT NULL::text, p_namespace text DEFAULT NULL::text, p_scheme text DEFAULT NULL::text, p_kind text DEFAULT NULL::text, p_q text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    -- One page, keyset-paginated in (namespace, name) order, which is the byte order of
    -- metastore.dataset_key: datasets_order_idx holds its first 1024 bytes (change 5; no index can
    -- hold names of any length whole), walked in order from the cursor; only keys that tie on
    -- all 1024 bytes are sorted (Incremental Sort), so a deep page costs what the first does.
    -- $1 after this key (null: from the start; a bound here would make the planner probe
    -- datasets_order_idx for its first key even when the trigram index serves q), $2 up to this prefix (the end of a namespace), $3 namespace,
    -- $4 scheme, $5 kind, $6 limit, $7 the LIKE pattern of q, $8 and $9 the hidden datasets and namespaces.
    c_page constant text := $q$
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(p) - 'sort_key' ORDER BY p.sort_key), '[]')
          FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                       v.input_events, v.output_events,
                       -- Per row of the page only: both directions of the symlinks facet.
                       (SELECT pg_catalog.count(*) FROM metastore.dataset_symlinks_view AS s
                         WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations,
                       metastore.dataset_key(v.namespace, v.name) AS sort_key
                  FROM metastore.datasets_view AS v
                 WHERE ($1::bytea IS NULL
                        OR (pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024)
                            >= pg_catalog.substr($1, 1, 1024)
                            AND metastore.dataset_key(v.namespace, v.name) > $1))
                   AND ($2::bytea IS NULL
                        OR pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024) <= $2)
                   AND ($3::text IS NULL OR v.namespace = $3)
                   AND ($4::text IS NULL OR (pg_catalog.left(v.scheme, 200) = pg_catalog.left($4, 200)
                                             AND v.scheme = $4))
                   AND ($5::text IS NULL OR v.kind = $5)
                   AND ($7::text IS NULL OR pg_catalog.lower(v.name) LIKE $7)
                   AND v.id <> ALL ($8) AND v.namespace <> ALL ($9)
                 ORDER BY pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024),
                          metastore.dataset_key(v.namespace, v.name)
                 LIMIT $6) AS p
    $q$;
    v_hide   record;
    v_skip_lo bytea;
    v_skip_hi bytea;
    v_after  jsonb;
    v_from   bytea;
    v_to     bytea;
    v_like   text;
    v_rows   jsonb;
    v_last   jsonb;
    v_next   text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF p_kind IS NOT NULL AND p_kind NOT IN ('dataset', 'symlink') THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = pg_catalog.format('kind must be dataset or symlink, not "%s"', p_kind);
    END IF;
    IF p_cursor IS NOT NULL THEN
        BEGIN
            v_after := pg_catalog.convert_from(
                pg_catalog.decode(pg_catalog.translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF pg_catalog.jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR pg_catalog.jsonb_array_length(v_after) <> 2
           OR pg_catalog.jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR pg_catalog.jsonb_typeof(v_after -> 1) IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged';
        END IF;
        v_from := metastore.dataset_key(v_after ->> 0, v_after ->> 1);
    END IF;
    IF p_namespace IS NOT NULL THEN
        -- The namespace's keys lie between its bytes followed by 0 and by 1: start at the first,
        -- stop at the last instead of walking the rest of the index.
        v_to := metastore.dataset_key(p_namespace, '');
        v_from := greatest(v_from, v_to);  -- greatest ignores a null
        v_to := pg_catalog.substr(pg_catalog.substr(v_to, 1, pg_catalog.length(v_to) - 1) || '\x01'::bytea, 1, 1024);
    END IF;

    -- What the owner hid (metastore.hide) is not listed.
    v_hide := metastore.hidden_names();

    IF p_q IS NULL THEN
        -- Without q, one plan fits every call: datasets_order_idx, walked in order. A hidden
        -- namespace is a range of that index (its bytes followed by 0, up to them followed by 1): the
        -- walk stops before it and goes on past it, instead of reading its rows one by one (a hidden
        -- namespace of a million datasets would hold up a page for seconds). One of more than 1022
        -- bytes shares the index's 1024-byte prefix with others: left to the row filter.
        v_rows := '[]';
        LOOP
            SELECT k.lo, k.hi INTO v_skip_lo, v_skip_hi
              FROM (SELECT metastore.dataset_key(n.ns, '') AS lo,
                           substr(metastore.dataset_key(n.ns, ''), 1, octet_length(metastore.dataset_key(n.ns, '')) - 1)
                           || '\x01'::bytea AS hi
                      FROM unnest(v_hide.namespaces) AS n (ns)
                     WHERE octet_length(n.ns) <= 1022) AS k
             WHERE k.hi > coalesce(v_from, '\x'::bytea)
             ORDER BY k.lo
             LIMIT 1;
            SELECT v_rows || coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(p) - 'sort_key' ORDER BY p.sort_key), '[]')
              INTO v_rows
              FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                           v.input_events, v.output_events,
                           (SELECT pg_catalog.count(*) FROM metastore.dataset_symlinks_view AS s
                             WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations,
                           metastore.dataset_key(v.namespace, v.name) AS sort_key
                      FROM metastore.datasets_view AS v
                     WHERE pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024)
                           >= pg_catalog.substr(coalesce(v_from, '\x'), 1, 1024)
                       AND metastore.dataset_key(v.namespace, v.name) > coalesce(v_from, '\x')
                       AND (v_to IS NULL OR pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024) <= v_to)
                       AND (v_skip_lo IS NULL
                            OR pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024) < v_skip_lo)
                       AND (p_namespace IS NULL OR v.namespace = p_namespace)
                       AND (p_scheme IS NULL OR (pg_catalog.left(v.scheme, 200) = pg_catalog.left(pg_catalog.lower(p_scheme), 200)
                                                 AND v.scheme = pg_catalog.lower(p_scheme)))
                       AND (p_kind IS NULL OR v.kind = p_kind)
                       AND v.id <> ALL (v_hide.dataset_ids) AND v.namespace <> ALL (v_hide.namespaces)
                     ORDER BY pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024),
                              metastore.dataset_key(v.namespace, v.name)
                     LIMIT p_limit + 1 - pg_catalog.jsonb_array_length(v_rows)) AS p;
            EXIT WHEN pg_catalog.jsonb_array_length(v_rows) > p_limit OR v_skip_lo IS NULL
                      OR (v_to IS NOT NULL AND pg_catalog.substr(v_skip_lo, 1, 1024) > v_to);
            v_from := v_skip_hi;
        END LOOP;
    ELSE
        -- q is a case-insensitive substring of the name, as a LIKE pattern (\, % and _ taken
        -- literally) on lower(name), which the trigram index (V0002, where pg_trgm exists) serves.
        -- Planned for the values at hand (EXECUTE ... USING): a rare q goes through the trigram
        -- index, a common one walks datasets_order_idx and stops at the page's end.
        v_like := '%' || pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                      pg_catalog.lower(p_q), E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%';
        EXECUTE c_page INTO v_rows
          USING v_from, v_to, p_namespace, pg_catalog.lower(p_scheme), p_kind, p_limit + 1, v_like,
                v_hide.dataset_ids, v_hide.namespaces;
    END IF;

    IF pg_catalog.jsonb_array_length(v_rows) > p_limit THEN
        v_rows := v_rows - p_limit;
        v_last := v_rows -> (p_limit - 1);
        v_next := pg_catalog.translate(pg_catalog.encode(pg_catalog.convert_to(
                      pg_catalog.jsonb_build_array(v_last -> 'namespace', v_last -> 'name')::text, 'UTF8'), 'base64'),
                      E'+/\n', '-_');
    END IF;
    RETURN pg_catalog.jsonb_build_object('datasets', v_rows, 'next_cursor', v_next);
END
$_$;

COMMENT ON FUNCTION metastore.list_datasets(p_limit integer, p_cursor text, p_namespace text, p_scheme text, p_kind text, p_q text) IS 'One page of datasets ordered by (namespace, name), in code point order (metastore.dataset_key): {"datasets": [...], "next_cursor": text or null}. Filters: exact namespace, scheme (case-insensitive), kind, q (case-insensitive substring of the name). Hidden datasets and namespaces (metastore.hide) are not listed. Error codes: 22023 limit outside 1..1000, unknown kind, or a cursor not returned by this function.';

CREATE FUNCTION metastore.list_jobs(p_limit integer DEFAULT 100, p_cursor text DEFAULT NULL::text, p_namespace text DEFAULT NULL::text, p_q text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    -- The previous release's signature: jobs by name, through the one implementation.
    RETURN metastore.list_jobs(p_limit, p_cursor, p_namespace, p_q, 'name', NULL, NULL);
END
$$;

COMMENT ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text) IS 'One page of jobs ordered by (namespace, name), each with its latest run (by first eventTime): {"jobs": [...], "next_cursor": text or null}. Filters: exact namespace, q (case-insensitive substring of the name); hidden jobs and namespaces (metastore.hide) are not listed. The seven-argument list_jobs with sort name. Error codes: 22023 limit outside 1..1000 or a cursor not returned by this function.';

CREATE FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text, p_sort text, p_state text, p_user text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    -- Jobs (sort=name) or runs (sort=latest_run) looked at per page, at most: a rare state or user
    -- gives a page with fewer jobs, or none, and a cursor to go on from.
    c_scan   constant integer := 10000;
    c_states constant text[] := ARRAY['START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER'];
    v_hide   record;
    v_sort   text := coalesce(p_sort, 'name');
    v_states text[];
    v_after  jsonb;
    v_second text;
    -- sort=name: bounds in metastore.dataset_key order (jobs_order_idx), as the four-argument one.
    v_from   bytea := '\x'::bytea;
    v_to     bytea := '\xff'::bytea;
    -- sort=latest_run: the latest run's (first_event_time, id) to go on after.
    v_t      timestamptz := 'infinity';
    v_i      bigint := 9223372036854775807;
    v_like   text;
    v_chunk  integer;
    v_seen   integer := 0;
    v_ids    bigint[];
    v_keys   bytea[];
    v_times  timestamptz[];
    v_runs   bigint[];
    v_complete boolean;
    v_page   jsonb := '[]';
    v_more   jsonb;
    v_last   jsonb;
    v_next   text;
    v_few    bigint[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF v_sort NOT IN ('name', 'latest_run') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('sort must be name or latest_run, not %s', p_sort);
    END IF;
    IF p_state IS NOT NULL THEN
        v_states := ARRAY(SELECT DISTINCT upper(btrim(s)) FROM unnest(string_to_array(p_state, ',')) AS s);
        IF cardinality(v_states) = 0 OR NOT v_states <@ c_states THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('state must be one or more of %s, separated by commas, not %s',
                                 array_to_string(c_states, ', '), p_state);
        END IF;
    END IF;
    IF p_cursor IS NOT NULL THEN
        -- By name: [namespace, name]; by latest run: [its first eventTime, its id].
        v_second := CASE v_sort WHEN 'name' THEN 'string' ELSE 'number' END;
        BEGIN
            v_after := convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
            IF v_sort = 'latest_run' THEN
                v_t := (v_after ->> 0)::timestamptz;
                v_i := (v_after ->> 1)::bigint;
            END IF;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR jsonb_array_length(v_after) <> 2
           OR jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR jsonb_typeof(v_after -> 1) IS DISTINCT FROM v_second
           OR v_t IS NULL OR v_i IS NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged, with the same sort';
        END IF;
        IF v_sort = 'name' THEN
            v_from := metastore.dataset_key(v_after ->> 0, v_after ->> 1);
        END IF;
    END IF;
    IF p_namespace IS NOT NULL THEN
        -- The namespace's keys lie between its bytes followed by 0 and by 1.
        v_to := metastore.dataset_key(p_namespace, '');
        v_from := greatest(v_from, v_to);
        v_to := substr(substr(v_to, 1, length(v_to) - 1) || '\x01'::bytea, 1, 1024);
    END IF;
    -- q: a case-insensitive substring of the name (\, % and _ taken literally).
    IF p_q IS NOT NULL THEN
        v_like := '%' || replace(replace(replace(lower(p_q), E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%';
    END IF;
    v_hide := metastore.hidden_names();
    -- runs_state_idx holds the runs that did not complete: with COMPLETE, walk all runs.
    v_complete := coalesce('COMPLETE' = ANY (v_states), false);

    IF v_sort = 'latest_run' THEN
        -- Few jobs (in the namespace): each one's latest run, sorted. Many: walk the runs newest
        -- first (the index of the state or user filter if there is one) and take each run that is
        -- its job's latest; with Trino's job per query every run is.
        v_few := ARRAY(SELECT j.id FROM metastore.jobs AS j
                        WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                              >= substr(CASE WHEN p_namespace IS NULL THEN '\x'::bytea ELSE v_from END, 1, 1024)
                          AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_to
                          AND (p_namespace IS NULL OR j.namespace = p_namespace)
                        -- In order, so that the scan stops at c_scan + 1 (a bitmap reads the range whole).
                        ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                        LIMIT c_scan + 1);
        IF cardinality(v_few) > c_scan THEN
            v_few := NULL;
        END IF;
    END IF;

    -- Few jobs: every candidate at once. Otherwise chunks, growing, until the page is full.
    v_chunk := CASE WHEN v_few IS NOT NULL THEN c_scan + 1 ELSE p_limit + 1 END;
    LOOP
        IF v_sort = 'name' THEN
            SELECT coalesce(array_agg(c.id ORDER BY c.o), '{}'), coalesce(array_agg(c.k ORDER BY c.o), '{}')
              INTO v_ids, v_keys
              FROM (SELECT j.id, metastore.dataset_key(j.namespace, j.name) AS k,
                           row_number() OVER (ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                                                       metastore.dataset_key(j.namespace, j.name)) AS o
                      FROM (SELECT * FROM metastore.jobs AS j
                             WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= substr(v_from, 1, 1024)
                               AND metastore.dataset_key(j.namespace, j.name) > v_from
                               AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_to
                             ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                                      metastore.dataset_key(j.namespace, j.name)
                             LIMIT v_chunk) AS j) AS c;
            EXIT WHEN cardinality(v_ids) = 0;
            v_from := v_keys[cardinality(v_keys)];
            v_runs := NULL;
        ELSE
            SELECT coalesce(array_agg(c.job_id ORDER BY c.t DESC, c.run_id DESC), '{}'),
                   coalesce(array_agg(c.t ORDER BY c.t DESC, c.run_id DESC), '{}'),
                   coalesce(array_agg(c.run_id ORDER BY c.t DESC, c.run_id DESC), '{}')
              INTO v_ids, v_times, v_runs
              FROM (
                    -- Each of the few jobs' latest run.
                    SELECT l.job_id, l.first_event_time AS t, l.id AS run_id
                      FROM unnest(v_few) AS f (id)
                     CROSS JOIN LATERAL (SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                                          WHERE r.job_id = f.id
                                          ORDER BY r.first_event_time DESC, r.id DESC LIMIT 1) AS l
                     WHERE (l.first_event_time, l.id) < (v_t, v_i)
                    UNION ALL
                    -- Or the runs newest first (those that are their job's latest are kept below):
                    -- of the user, of the states, or all.
                    SELECT w.job_id, w.first_event_time, w.id
                      FROM (SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                             WHERE v_few IS NULL AND p_user IS NOT NULL
                               AND left(r.trino_user, 200) = left(p_user, 200) AND r.trino_user IS NOT NULL
                               AND (r.first_event_time, r.id) < (v_t, v_i)
                             ORDER BY left(r.trino_user, 200), r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS w
                    UNION ALL
                    SELECT s.job_id, s.first_event_time, s.id
                      FROM unnest(CASE WHEN v_few IS NULL AND p_user IS NULL AND NOT v_complete THEN v_states END)
                           AS k (state)
                     CROSS JOIN LATERAL (
                            SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                             WHERE r.state = k.state AND r.state <> 'COMPLETE' AND (r.first_event_time, r.id) < (v_t, v_i)
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS s
                    UNION ALL
                    SELECT w.job_id, w.first_event_time, w.id
                      FROM (SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                             WHERE v_few IS NULL AND p_user IS NULL AND (v_states IS NULL OR v_complete)
                               AND (r.first_event_time, r.id) < (v_t, v_i)
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS w
                     ORDER BY 2 DESC, 3 DESC
                     LIMIT v_chunk) AS c;
            EXIT WHEN cardinality(v_ids) = 0;
            v_t := v_times[cardinality(v_times)];
            v_i := v_runs[cardinality(v_runs)];
        END IF;
        v_seen := v_seen + cardinality(v_ids);

        -- Every filter on each candidate, in order: its latest run's state and user, the name, what
        -- is hidden; sort=latest_run keeps a run only if it is its job's latest.
        SELECT coalesce(jsonb_agg(x.job ORDER BY x.o), '[]')
          INTO v_more
          FROM (SELECT c.o, jsonb_build_object(
                           'id', j.id, 'namespace', j.namespace, 'name', j.name,
                           'first_seen', j.first_seen, 'last_seen', j.last_seen,
                           'processing_type', j.processing_type, 'integration', j.integration, 'job_type', j.job_type,
                           'latest_run', CASE WHEN r.id IS NOT NULL THEN jsonb_build_object(
                                              'id', r.id, 'run_id', r.run_id, 'state', r.state,
                                              'started_at', r.started_at, 'ended_at', r.ended_at,
                                              'duration_s', extract(epoch FROM r.duration),
                                              'trino_user', r.trino_user, 'trino_source', r.trino_source,
                                              'first_event_time', r.first_event_time) END) AS job
                  FROM unnest(v_ids, v_runs) WITH ORDINALITY AS c (id, run, o)
                  JOIN metastore.jobs AS j ON j.id = c.id
                  LEFT JOIN LATERAL (SELECT v.* FROM metastore.runs_view AS v WHERE v.job_id = j.id
                                      ORDER BY v.first_event_time DESC, v.id DESC LIMIT 1) AS r ON true
                 WHERE (c.run IS NULL OR r.id = c.run)
                   AND (p_namespace IS NULL OR j.namespace = p_namespace)
                   AND (v_like IS NULL OR lower(j.name) LIKE v_like)
                   AND (v_states IS NULL OR r.state = ANY (v_states))
                   AND (p_user IS NULL OR r.trino_user = p_user)
                   AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)) AS x;
        v_page := v_page || v_more;
        EXIT WHEN jsonb_array_length(v_page) > p_limit OR cardinality(v_ids) < v_chunk OR v_seen >= c_scan;
        v_chunk := least(v_chunk * 4, c_scan - v_seen);
    END LOOP;

    IF jsonb_array_length(v_page) > p_limit THEN
        v_page := (SELECT jsonb_agg(e.value ORDER BY e.o) FROM jsonb_array_elements(v_page) WITH ORDINALITY AS e (value, o)
                    WHERE e.o <= p_limit);
        v_last := v_page -> (p_limit - 1);
        v_next := CASE v_sort
                      WHEN 'name' THEN jsonb_build_array(v_last -> 'namespace', v_last -> 'name')::text
                      ELSE jsonb_build_array((v_last #>> '{latest_run,first_event_time}')::timestamptz::text,
                                             (v_last #>> '{latest_run,id}')::bigint)::text END;
    ELSIF v_seen >= c_scan AND cardinality(v_ids) > 0 THEN
        -- Not at the end: the page looked at as many as one page may. Go on from the last.
        v_next := CASE v_sort
                      WHEN 'name' THEN (SELECT jsonb_build_array(j.namespace, j.name)::text FROM metastore.jobs AS j
                                         WHERE j.id = v_ids[cardinality(v_ids)])
                      ELSE jsonb_build_array(v_t::text, v_i)::text END;
    END IF;
    IF v_next IS NOT NULL THEN
        v_next := translate(encode(convert_to(v_next, 'UTF8'), 'base64'), E'+/\n', '-_');
    END IF;
    RETURN jsonb_build_object('jobs', v_page, 'next_cursor', v_next);
END
$$;

COMMENT ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text, p_sort text, p_state text, p_user text) IS 'One page of jobs, each with its latest run (by first eventTime): {"jobs": [...], "next_cursor": text or null}. p_sort name (default; by namespace and name, as the four-argument metastore.list_jobs) or latest_run (newest latest run first; jobs without a run are not listed). Filters: exact namespace, q (case-insensitive substring of the name), state (one or several, comma-separated) and Trino user of the latest run. A page looks at most 10000 jobs (sort=name) or runs (sort=latest_run): a rare filter may give fewer than p_limit jobs, or none, with a next_cursor (null only at the end). Hidden jobs and namespaces (metastore.hide) are not listed. Error codes: 22023 limit outside 1..1000, an unknown sort or state, or a cursor not returned by this function for this sort.';

CREATE FUNCTION metastore.list_namespaces(p_limit integer DEFAULT 1000) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    v_hide  record;
    v_names text[] := '{}';
    v_after bytea;
    v_next  text;
    v_kind  text;
    v_seen  integer;
    v_rows  jsonb;
    -- Counted up to this many of each kind (more_datasets, more_jobs: there are more): the count of
    -- a namespace of a million datasets would read a million rows (the order index holds the key, not
    -- the columns: each entry is checked on its row).
    c_count constant integer := 1000;
    v_ns       text;
    v_lo       bytea;
    v_hi       bytea;
    v_datasets bigint;
    v_jobs     bigint;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    v_hide := metastore.hidden_names();
    -- The distinct namespaces of each table, one index probe each: datasets_order_idx and
    -- jobs_order_idx are in metastore.dataset_key order, where a namespace's keys lie between its
    -- bytes followed by 0 and by 1; the next namespace is the first key past the 1.
    FOREACH v_kind IN ARRAY ARRAY['dataset', 'job'] LOOP
        v_after := '\x'::bytea;
        v_seen := 0;
        LOOP
            IF v_kind = 'dataset' THEN
                SELECT d.namespace INTO v_next FROM metastore.datasets AS d
                 WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= substr(v_after, 1, 1024)
                   AND metastore.dataset_key(d.namespace, d.name) > v_after
                 ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024),
                          metastore.dataset_key(d.namespace, d.name)
                 LIMIT 1;
            ELSE
                SELECT j.namespace INTO v_next FROM metastore.jobs AS j
                 WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= substr(v_after, 1, 1024)
                   AND metastore.dataset_key(j.namespace, j.name) > v_after
                 ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                          metastore.dataset_key(j.namespace, j.name)
                 LIMIT 1;
            END IF;
            EXIT WHEN NOT FOUND;
            IF v_next <> ALL (v_hide.namespaces) THEN
                v_seen := v_seen + 1;
                IF v_next <> ALL (v_names) THEN
                    v_names := v_names || v_next;
                END IF;
            END IF;
            v_after := substr(metastore.dataset_key(v_next, ''), 1, length(metastore.dataset_key(v_next, '')) - 1)
                       || '\x01'::bytea;
            -- Enough of this kind: the answer holds the first p_limit of both, in order.
            EXIT WHEN v_seen > p_limit;
        END LOOP;
    END LOOP;

    -- The first p_limit in code point order, each counted along the order index up to c_count + 1
    -- entries (ordered, so that the scan stops there: a bitmap would read the whole range): a
    -- namespace's keys lie between its bytes followed by 0 and by 1; one of more than 1022 bytes shares
    -- the index's 1024-byte prefix with others: checked on the row.
    v_rows := '[]';
    FOR v_ns, v_lo, v_hi IN
        SELECT x.ns, substr(k.k, 1, 1024), substr(substr(k.k, 1, length(k.k) - 1) || '\x01'::bytea, 1, 1024)
          FROM unnest(v_names) AS x (ns) CROSS JOIN LATERAL (SELECT metastore.dataset_key(x.ns, '') AS k) AS k
         ORDER BY k.k
         LIMIT p_limit
    LOOP
        IF octet_length(v_ns) <= 1022 THEN
            SELECT count(*) INTO v_datasets FROM (
                SELECT FROM metastore.datasets AS d
                 WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) <= v_hi
                 ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
            SELECT count(*) INTO v_jobs FROM (
                SELECT FROM metastore.jobs AS j
                 WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_hi
                 ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
        ELSE
            SELECT count(*) INTO v_datasets FROM (
                SELECT FROM metastore.datasets AS d
                 WHERE substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) <= v_hi AND d.namespace = v_ns
                 ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
            SELECT count(*) INTO v_jobs FROM (
                SELECT FROM metastore.jobs AS j
                 WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= v_lo
                   AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_hi AND j.namespace = v_ns
                 ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                 LIMIT c_count + 1) AS c;
        END IF;
        -- Hidden ones are not counted (a handful: their ids).
        IF cardinality(v_hide.dataset_ids) > 0 OR cardinality(v_hide.job_ids) > 0 THEN
            v_datasets := v_datasets - (SELECT count(*) FROM metastore.datasets AS d
                                         WHERE d.id = ANY (v_hide.dataset_ids) AND d.namespace = v_ns);
            v_jobs := v_jobs - (SELECT count(*) FROM metastore.jobs AS j
                                 WHERE j.id = ANY (v_hide.job_ids) AND j.namespace = v_ns);
        END IF;
        -- A namespace whose every dataset and job is hidden one by one is gone too.
        CONTINUE WHEN v_datasets + v_jobs = 0;
        v_rows := v_rows || jsonb_build_array(jsonb_build_object(
            'namespace', v_ns, 'datasets', least(v_datasets, c_count), 'jobs', least(v_jobs, c_count),
            'more_datasets', v_datasets > c_count, 'more_jobs', v_jobs > c_count));
    END LOOP;
    RETURN jsonb_build_object('namespaces', v_rows, 'truncated', cardinality(v_names) > p_limit);
END
$$;

COMMENT ON FUNCTION metastore.list_namespaces(p_limit integer) IS 'The namespaces of datasets and jobs, in code point order, each with how many datasets and jobs it has, counted up to 1000 each: {"namespaces": [{"namespace", "datasets", "jobs", "more_datasets", "more_jobs"}], "truncated"}, the first p_limit (truncated: there are more; more_*: more than 1000). Hidden namespaces are left out, hidden datasets and jobs not counted (metastore.hide). Error codes: 22023 limit outside 1..1000.';

CREATE FUNCTION metastore.list_runs(p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL::text, p_state text DEFAULT NULL::text, p_user text DEFAULT NULL::text, p_source text DEFAULT NULL::text, p_job_namespace text DEFAULT NULL::text, p_dataset_id bigint DEFAULT NULL::bigint, p_from text DEFAULT NULL::text, p_to text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET "DateStyle" TO 'ISO, YMD'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    -- Runs looked at per page, at most: a combination of filters no single index serves (a rare
    -- state of one user) gives a page with fewer runs, or none, and a cursor to go on from.
    c_scan    constant integer := 5000;
    -- A namespace of at most this many jobs is read job by job (runs_job_latest_idx); a larger one
    -- by walking the timeline.
    c_jobs    constant integer := 500;
    c_states  constant text[] := ARRAY['START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER'];
    v_hide    record;
    v_states  text[];
    v_from    timestamptz := '-infinity';
    v_to      timestamptz := 'infinity';
    v_after   jsonb;
    v_t       timestamptz := 'infinity';
    v_i       bigint := 9223372036854775807;
    v_aliases bigint[];
    v_jobs    bigint[];
    v_driver  text;
    v_chunk   integer;
    v_scanned integer := 0;
    v_ids     bigint[];
    v_times   timestamptz[];
    v_page    bigint[] := '{}';
    v_kept    bigint[];
    v_runs    jsonb;
    v_next    text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF p_state IS NOT NULL THEN
        v_states := ARRAY(SELECT DISTINCT upper(btrim(s)) FROM unnest(string_to_array(p_state, ',')) AS s);
        IF cardinality(v_states) = 0 OR NOT v_states <@ c_states THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('state must be one or more of %s, separated by commas, not %s',
                                 array_to_string(c_states, ', '), p_state);
        END IF;
    END IF;
    -- Bad times raise 22007/22008 (400) naming the value.
    v_from := coalesce(p_from::timestamptz, v_from);
    v_to := coalesce(p_to::timestamptz, v_to);
    IF v_from > v_to THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('from (%s) is after to (%s)', p_from, p_to);
    END IF;
    IF p_cursor IS NOT NULL THEN
        BEGIN
            v_after := convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
            v_t := (v_after ->> 0)::timestamptz;
            v_i := (v_after ->> 1)::bigint;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR jsonb_array_length(v_after) <> 2
           OR jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR jsonb_typeof(v_after -> 1) IS DISTINCT FROM 'number' OR v_t IS NULL OR v_i IS NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023', MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged';
        END IF;
    END IF;
    v_hide := metastore.hidden_names();
    IF p_dataset_id IS NOT NULL THEN
        IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                        WHERE d.id = p_dataset_id AND d.id <> ALL (v_hide.dataset_ids)
                          AND d.namespace <> ALL (v_hide.namespaces)) THEN
            RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_dataset_id);
        END IF;
        -- Its symlink aliases name the same data (as the lineage graph crosses them).
        v_aliases := metastore.dataset_aliases(ARRAY[p_dataset_id], 100);
    END IF;

    -- Which index walks the timeline: the most selective filter's (a source or COMPLETE has none),
    -- the others are checked on each run.
    IF p_dataset_id IS NOT NULL THEN
        v_driver := 'dataset';
    ELSIF p_user IS NOT NULL THEN
        v_driver := 'user';
        -- With states that have an index too (not COMPLETE): walk the one with fewer runs, each
        -- counted on its index up to 1000 (a user of many runs and failures are rarer, or the
        -- other way round).
        IF NOT 'COMPLETE' = ANY (v_states)
           AND (SELECT count(*) FROM (
                    SELECT FROM unnest(v_states) AS k (state)
                     CROSS JOIN LATERAL (SELECT FROM metastore.runs AS r
                                          WHERE r.state = k.state AND r.state <> 'COMPLETE'
                                          ORDER BY r.state, r.first_event_time LIMIT 1000) AS x
                     LIMIT 1000) AS c)
               < (SELECT count(*) FROM (
                      SELECT FROM metastore.runs AS r
                       WHERE left(r.trino_user, 200) = left(p_user, 200) AND r.trino_user IS NOT NULL
                       ORDER BY left(r.trino_user, 200), r.first_event_time LIMIT 1000) AS c) THEN
            v_driver := 'state';
        END IF;
    ELSIF p_job_namespace IS NOT NULL THEN
        v_jobs := ARRAY(SELECT j.id FROM metastore.jobs AS j
                         WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                               >= substr(metastore.dataset_key(p_job_namespace, ''), 1, 1024)
                           AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                               <= substr(substr(metastore.dataset_key(p_job_namespace, ''), 1,
                                                length(metastore.dataset_key(p_job_namespace, '')) - 1)
                                         || '\x01'::bytea, 1, 1024)
                           AND j.namespace = p_job_namespace
                         -- In order, so that the scan stops at c_jobs + 1 (a bitmap reads the range whole).
                         ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                         LIMIT c_jobs + 1);
        v_driver := CASE WHEN cardinality(v_jobs) <= c_jobs THEN 'jobs'
                         WHEN NOT 'COMPLETE' = ANY (v_states) THEN 'state' ELSE 'time' END;
    -- runs_state_idx holds the runs that did not complete: COMPLETE, most runs, walks the timeline.
    ELSIF NOT 'COMPLETE' = ANY (v_states) THEN
        v_driver := 'state';
    ELSE
        v_driver := 'time';
    END IF;

    v_chunk := p_limit + 1;
    LOOP
        -- The next candidates after (v_t, v_i) in timeline order, from the driver's index.
        IF v_driver = 'dataset' THEN
            SELECT coalesce(array_agg(c.run_id ORDER BY c.run_time DESC, c.run_id DESC), '{}'),
                   coalesce(array_agg(c.run_time ORDER BY c.run_time DESC, c.run_id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT DISTINCT s.run_id, s.run_time
                      FROM unnest(v_aliases) AS a (id)
                     CROSS JOIN LATERAL (
                            SELECT rd.run_id, rd.run_time FROM metastore.run_datasets AS rd
                             WHERE rd.dataset_id = a.id AND (rd.run_time, rd.run_id) < (v_t, v_i)
                               AND rd.run_time >= v_from AND rd.run_time < v_to
                             ORDER BY rd.run_time DESC, rd.run_id DESC
                             -- A run reads and writes a dataset at most once each.
                             LIMIT 2 * v_chunk) AS s
                     ORDER BY s.run_time DESC, s.run_id DESC
                     LIMIT v_chunk) AS c;
        ELSIF v_driver = 'user' THEN
            SELECT coalesce(array_agg(c.id ORDER BY c.first_event_time DESC, c.id DESC), '{}'),
                   coalesce(array_agg(c.first_event_time ORDER BY c.first_event_time DESC, c.id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT r.id, r.first_event_time FROM metastore.runs AS r
                     WHERE left(r.trino_user, 200) = left(p_user, 200) AND r.trino_user IS NOT NULL
                       AND (r.first_event_time, r.id) < (v_t, v_i)
                       AND r.first_event_time >= v_from AND r.first_event_time < v_to
                     ORDER BY left(r.trino_user, 200), r.first_event_time DESC, r.id DESC
                     LIMIT v_chunk) AS c;
        ELSIF v_driver IN ('jobs', 'state') THEN
            -- Several ordered walks (one per job, or per state) merged.
            SELECT coalesce(array_agg(c.id ORDER BY c.first_event_time DESC, c.id DESC), '{}'),
                   coalesce(array_agg(c.first_event_time ORDER BY c.first_event_time DESC, c.id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT s.id, s.first_event_time
                      FROM unnest(CASE WHEN v_driver = 'jobs' THEN v_jobs END) AS k (job_id)
                     CROSS JOIN LATERAL (
                            SELECT r.id, r.first_event_time FROM metastore.runs AS r
                             WHERE r.job_id = k.job_id AND (r.first_event_time, r.id) < (v_t, v_i)
                               AND r.first_event_time >= v_from AND r.first_event_time < v_to
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS s
                    UNION ALL
                    SELECT s.id, s.first_event_time
                      FROM unnest(CASE WHEN v_driver = 'state' THEN v_states END) AS k (state)
                     CROSS JOIN LATERAL (
                            SELECT r.id, r.first_event_time FROM metastore.runs AS r
                             WHERE r.state = k.state AND r.state <> 'COMPLETE' AND (r.first_event_time, r.id) < (v_t, v_i)
                               AND r.first_event_time >= v_from AND r.first_event_time < v_to
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS s
                     ORDER BY 2 DESC, 1 DESC
                     LIMIT v_chunk) AS c;
        ELSE
            SELECT coalesce(array_agg(c.id ORDER BY c.first_event_time DESC, c.id DESC), '{}'),
                   coalesce(array_agg(c.first_event_time ORDER BY c.first_event_time DESC, c.id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT r.id, r.first_event_time FROM metastore.runs AS r
                     WHERE (r.first_event_time, r.id) < (v_t, v_i)
                       AND r.first_event_time >= v_from AND r.first_event_time < v_to
                     ORDER BY r.first_event_time DESC, r.id DESC
                     LIMIT v_chunk) AS c;
        END IF;
        EXIT WHEN cardinality(v_ids) = 0;
        v_scanned := v_scanned + cardinality(v_ids);
        v_t := v_times[cardinality(v_times)];
        v_i := v_ids[cardinality(v_ids)];

        -- Every filter on each candidate, in the candidates' order; the first p_limit + 1 kept.
        SELECT coalesce(array_agg(x.id ORDER BY x.o), '{}')
          INTO v_kept
          FROM (SELECT c.o, r.id
                  FROM unnest(v_ids) WITH ORDINALITY AS c (id, o)
                  JOIN metastore.runs AS r ON r.id = c.id
                  JOIN metastore.jobs AS j ON j.id = r.job_id
                 WHERE (v_states IS NULL OR r.state = ANY (v_states))
                   AND (p_user IS NULL OR r.trino_user = p_user)
                   AND (p_source IS NULL OR r.trino_source = p_source)
                   AND (p_job_namespace IS NULL OR j.namespace = p_job_namespace)
                   AND (v_aliases IS NULL
                        OR EXISTS (SELECT FROM metastore.run_datasets AS rd
                                    WHERE rd.run_id = r.id AND rd.dataset_id = ANY (v_aliases)))
                   AND r.job_id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)
                 ORDER BY c.o
                 LIMIT p_limit + 1 - cardinality(v_page)) AS x;
        v_page := v_page || v_kept;
        EXIT WHEN cardinality(v_page) > p_limit OR cardinality(v_ids) < v_chunk OR v_scanned >= c_scan;
        v_chunk := least(v_chunk * 4, c_scan - v_scanned);
    END LOOP;

    IF cardinality(v_page) > p_limit THEN
        v_page := v_page[1:p_limit];
        SELECT jsonb_build_array(r.first_event_time::text, r.id)::text INTO v_next
          FROM metastore.runs AS r WHERE r.id = v_page[p_limit];
    ELSIF v_scanned >= c_scan THEN
        -- Not at the end: the page looked at as many runs as one page may. Go on from the last.
        v_next := jsonb_build_array(v_t::text, v_i)::text;
    END IF;

    -- What the page shows, the datasets of all its runs in one statement: at most 100 of each side
    -- per run, along run_datasets' key (the smallest ids), and whether there are more.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', r.id, 'run_id', r.run_id, 'state', r.state,
               'started_at', r.started_at, 'ended_at', r.ended_at,
               'duration_s', extract(epoch FROM r.duration),
               'trino_user', r.trino_user, 'trino_source', r.trino_source,
               'error_message', r.error_message,
               'first_event_time', r.first_event_time, 'last_event_time', r.last_event_time,
               'event_count', r.event_count,
               'job', jsonb_build_object('id', j.id, 'namespace', j.namespace, 'name', j.name),
               'inputs', io.inputs, 'outputs', io.outputs,
               'datasets_truncated', (io.inputs_full OR io.outputs_full) AND EXISTS (
                   SELECT FROM metastore.run_datasets AS rd
                     JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                    WHERE rd.run_id = r.id
                      AND ((io.inputs_full AND rd.direction = 'input' AND rd.dataset_id > io.last_input)
                           OR (io.outputs_full AND rd.direction = 'output' AND rd.dataset_id > io.last_output))
                      AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)))
               ORDER BY p.o), '[]')
      INTO v_runs
      FROM unnest(v_page) WITH ORDINALITY AS p (id, o)
      JOIN metastore.runs AS r ON r.id = p.id
      JOIN metastore.jobs AS j ON j.id = r.job_id
     CROSS JOIN LATERAL (
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', s.id, 'namespace', s.namespace, 'name', s.name)
                                      ORDER BY s.namespace COLLATE "C", s.name COLLATE "C", s.id)
                                FILTER (WHERE s.direction = 'input'), '[]') AS inputs,
                   coalesce(jsonb_agg(jsonb_build_object('id', s.id, 'namespace', s.namespace, 'name', s.name)
                                      ORDER BY s.namespace COLLATE "C", s.name COLLATE "C", s.id)
                                FILTER (WHERE s.direction = 'output'), '[]') AS outputs,
                   -- A side of 100: is there a 101st (past the greatest id listed)? Asked above.
                   count(*) FILTER (WHERE s.direction = 'input') = 100 AS inputs_full,
                   count(*) FILTER (WHERE s.direction = 'output') = 100 AS outputs_full,
                   max(s.id) FILTER (WHERE s.direction = 'input') AS last_input,
                   max(s.id) FILTER (WHERE s.direction = 'output') AS last_output
              FROM (SELECT * FROM (
                        SELECT rd.direction, d.id, d.namespace, d.name
                          FROM metastore.run_datasets AS rd
                          JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                         WHERE rd.run_id = r.id AND rd.direction = 'input'
                           AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                         ORDER BY rd.dataset_id LIMIT 100) AS i
                    UNION ALL
                    SELECT * FROM (
                        SELECT rd.direction, d.id, d.namespace, d.name
                          FROM metastore.run_datasets AS rd
                          JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                         WHERE rd.run_id = r.id AND rd.direction = 'output'
                           AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                         ORDER BY rd.dataset_id LIMIT 100) AS o) AS s) AS io;
    IF v_next IS NOT NULL THEN
        v_next := translate(encode(convert_to(v_next, 'UTF8'), 'base64'), E'+/\n', '-_');
    END IF;
    RETURN jsonb_build_object('runs', v_runs, 'next_cursor', v_next);
END
$$;

COMMENT ON FUNCTION metastore.list_runs(p_limit integer, p_cursor text, p_state text, p_user text, p_source text, p_job_namespace text, p_dataset_id bigint, p_from text, p_to text) IS 'One page of runs, newest first by their first eventTime (then id), keyset-paginated: {"runs": [...], "next_cursor": text or null}. Each run with its state, times, Trino user and source, error, job, and the datasets it read (inputs) and wrote (outputs), at most 100 each. Filters (combined with AND): state (one or several, comma-separated), the Trino user, the Trino source, the job namespace, a dataset (runs that read or wrote it or one of its symlink aliases), first eventTime in [from, to). A page looks at most 5000 runs: a rare combination of filters may give fewer than p_limit runs, or none, with a next_cursor (null only at the end). Hidden datasets and jobs (metastore.hide) are left out. Error codes: 22023 limit outside 1..1000, an unknown state, from after to, or a cursor not returned by this function; 22007/22008 a time that is not one; P0002 no such dataset.';

CREATE FUNCTION metastore.lock_events_briefly() RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '100ms'
    AS $$
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
$$;

COMMENT ON FUNCTION metastore.lock_events_briefly() IS 'Takes a SHARE lock on metastore.events (the partitioned table, not its partitions: a VACUUM of one does not hold it up) for the rest of the transaction, waiting at most 100 ms at a time (20 tries), and returns the greatest event id (null when there is none). For metastore.backfill. Error codes: 55P03 not obtained.';

CREATE FUNCTION metastore.malformed_datasets(p_payload jsonb, p_item jsonb) RETURNS jsonb
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_key  text;
    v_list jsonb;
    v_item jsonb;
    v_pos  bigint;
    v_path text;
BEGIN
    FOREACH v_key IN ARRAY ARRAY['inputs', 'outputs', 'dataset'] LOOP
        v_list := p_payload -> v_key;
        CONTINUE WHEN v_list IS NULL OR jsonb_typeof(v_list) = 'null';
        IF v_key = 'dataset' THEN
            -- Only a DatasetEvent's dataset counts; a stray "dataset" key elsewhere is ignored.
            CONTINUE WHEN metastore.event_kind(p_payload) IS DISTINCT FROM 'dataset';
            v_list := jsonb_build_array(v_list);
        ELSIF jsonb_typeof(v_list) <> 'array' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('"%s" must be an array of datasets, not a JSON %s', v_key, jsonb_typeof(v_list));
        END IF;
        FOR v_item, v_pos IN SELECT a.e, a.o - 1 FROM jsonb_array_elements(v_list) WITH ORDINALITY AS a (e, o) LOOP
            v_path := CASE WHEN v_key = 'dataset' THEN 'dataset' ELSE format('%s[%s]', v_key, v_pos) END;
            IF jsonb_typeof(v_item) <> 'object' THEN
                RAISE EXCEPTION USING
                    ERRCODE = '22023',
                    MESSAGE = format('"%s" must be an object with "namespace" and "name"', v_path);
            END IF;
            -- Of any length: no index holds a whole name (change 5, metastore.dataset_key).
            PERFORM metastore.json_text(v_item -> 'namespace', v_path || '.namespace', NULL),
                    metastore.json_text(v_item -> 'name', v_path || '.name', NULL);
        END LOOP;
    END LOOP;
    -- extract_datasets saw a fault that this walk does not: the two disagree on the rules.
    RAISE EXCEPTION USING
        ERRCODE = 'XX000',
        MESSAGE = 'metastore.extract_datasets found a malformed dataset that metastore.malformed_datasets does not';
END
$$;

COMMENT ON FUNCTION metastore.malformed_datasets(p_payload jsonb, p_item jsonb) IS 'Raises what is wrong with the inputs, outputs or DatasetEvent dataset of p_payload (the first fault, in order; p_item, the item extract_datasets could not read, is unused); never returns. Called by metastore.extract_datasets only for an event its checks refuse. Error codes: 22023 a member that is not an array of objects with non-empty string namespace and name; XX000 no such fault (the two functions disagree).';

CREATE FUNCTION metastore.mention_key(p_namespace text, p_name text) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT pg_catalog.jsonb_build_array(p_namespace, p_name)::pg_catalog.text
$$;

COMMENT ON FUNCTION metastore.mention_key(p_namespace text, p_name text) IS 'The JSON text of [namespace, name]: the key of a dataset in the id map metastore.derive_datasets returns and derive_lineage and derive_run_datasets read, and of a job in the hash lineage_edges.job_sha256.';

CREATE FUNCTION metastore.name_tail(p_name text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    SELECT CASE WHEN pg_catalog.strpos(p_name, '/'::pg_catalog.text) OPERATOR(pg_catalog.>) 0
                THEN pg_catalog.split_part(p_name, '/'::pg_catalog.text, -1)
                ELSE pg_catalog.split_part(p_name, '.'::pg_catalog.text, -1) END
$$;

COMMENT ON FUNCTION metastore.name_tail(p_name text) IS 'The last part of a name: after its last / if it has one, else after its last . (the table of catalog.schema.table). Frozen (defined by change 9): indexes hold its results.';

CREATE FUNCTION metastore.note_field_names() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    INSERT INTO metastore.field_names (name)
    SELECT DISTINCT f.value ->> 'name'
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(NEW.fields) = 'array' THEN NEW.fields ELSE '[]' END) AS f
     WHERE jsonb_typeof(f.value) = 'object' AND jsonb_typeof(f.value -> 'name') = 'string'
       AND NOT EXISTS (SELECT FROM metastore.field_names AS n
                        WHERE n.name_key = sha256(metastore.dataset_key('', f.value ->> 'name')));
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION metastore.note_field_names() IS 'Trigger: adds the top-level field names of a new schema version to metastore.field_names.';

CREATE FUNCTION metastore.partitions_ahead() RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
    -- Whole days after today covered by consecutive daily partitions of metastore.events
    -- (events_pYYYYMMDD); -1 when not even today has one.
    SELECT coalesce(pg_catalog.min(d.n) - 1, 15)::integer
      FROM pg_catalog.generate_series(0, 15) AS d (n)
     WHERE pg_catalog.to_regclass(pg_catalog.format('metastore.events_p%s',
                                  pg_catalog.to_char(CURRENT_DATE + d.n, 'YYYYMMDD'))) IS NULL
$$;

COMMENT ON FUNCTION metastore.partitions_ahead() IS 'How many whole days after today (UTC) have their daily partition of metastore.events without a gap: 14 right after metastore.ensure_partitions(), -1 when today has none (events then wait in the default partition). 15 means at least 15. The service exports it as metastore_partitions_ahead_days.';

CREATE FUNCTION metastore.read_event(p_body bytea, OUT payload jsonb, OUT checked metastore.checked_event) RETURNS record
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_text text;
BEGIN
    BEGIN
        v_text := pg_catalog.convert_from(p_body, 'UTF8');
        payload := v_text::jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
        -- Not JSON PostgreSQL can hold: refused, and nothing to keep.
        GET STACKED DIAGNOSTICS checked.error_code = RETURNED_SQLSTATE, checked.error_message = MESSAGE_TEXT;
        RETURN;
    END;
    checked := metastore.check_event(payload);
    -- jsonb would keep the last of duplicate keys: not the event sent (033_json_unique_keys.sql).
    -- Only for an event that passed its checks: on PostgreSQL 15 this one prints the jsonb, which
    -- the checks (22003, 54M01) have made safe to print by then.
    IF checked.error_code IS NULL AND NOT metastore.json_has_unique_keys(v_text, payload) THEN
        checked := ROW(NULL, '22030', 'an object has the same key twice')::metastore.checked_event;
    END IF;
END
$$;

COMMENT ON FUNCTION metastore.read_event(p_body bytea, OUT payload jsonb, OUT checked metastore.checked_event) IS 'p_body (UTF-8 JSON bytes) as jsonb, and metastore.check_event''s answer for it. A body that is not JSON gives a null payload and its error: 22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 54001 nested too deep; 22030 an object with the same key twice (the payload is kept for the record).';

CREATE FUNCTION metastore.read_events(p_limit integer DEFAULT 100, p_cursor text DEFAULT NULL::text, p_event_time_from text DEFAULT NULL::text, p_event_time_to text DEFAULT NULL::text, p_received_from text DEFAULT NULL::text, p_received_to text DEFAULT NULL::text, p_job_namespace text DEFAULT NULL::text, p_job_name text DEFAULT NULL::text, p_dataset_namespace text DEFAULT NULL::text, p_dataset_name text DEFAULT NULL::text, p_event_type text DEFAULT NULL::text) RETURNS TABLE(event text, cursor text, more boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET "DateStyle" TO 'ISO, YMD'
    SET plan_cache_mode TO 'force_custom_plan'
    SET work_mem TO '64MB'
    AS $$
DECLARE
    -- A dataset filter: the datasets it names; when fewer than c_few links name them, their
    -- events (ids and times), from which the page is chosen instead of walking the feed. Above
    -- that, the feed is walked, and a page is full after about events / links rows.
    c_few     constant integer := 10000;
    c_page_bytes constant integer := 1048576;
    v_row     record;
    v_text    text;
    v_cursor  text;
    v_rows    text[] := '{}';
    v_cursors text[] := '{}';
    v_bytes   bigint := 0;
    v_more    boolean := false;
    v_ids     bigint[];
    v_ev_ids  bigint[];
    v_ev_at   timestamptz[];
    v_xact    xid8 := '0';
    v_id      bigint := 0;
    v_et_from timestamptz;
    v_et_to   timestamptz;
    v_rc_from timestamptz;
    v_rc_to   timestamptz;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    -- On Citus the order above does not hold: the events lie on the workers, each with its own
    -- transactions and visibility, and a horizon taken here can pass events a worker has not yet
    -- committed. There the feed reads the order one sequencer assigns after commit (docs/events.md,
    -- "On Citus"); refused where that order is missing (its change reverted), rather than skip events.
    IF metastore.feed_sequenced() THEN
        RETURN QUERY SELECT r.event, r.cursor, r.more
                       FROM metastore.read_sequenced_events(p_limit, p_cursor, p_event_time_from::timestamptz,
                                                            p_event_time_to::timestamptz, p_received_from::timestamptz,
                                                            p_received_to::timestamptz, p_job_namespace, p_job_name,
                                                            p_dataset_namespace, p_dataset_name, p_event_type) AS r;
        RETURN;
    END IF;
    -- The place the cursor names (22023 for one this function did not return).
    SELECT p.xact_id, p.event_id INTO v_xact, v_id FROM metastore.forward_position(p_cursor) AS p;
    -- Bad times raise 22007/22008 (400) naming the value.
    v_et_from := p_event_time_from::timestamptz;
    v_et_to := p_event_time_to::timestamptz;
    v_rc_from := p_received_from::timestamptz;
    v_rc_to := p_received_to::timestamptz;
    IF p_dataset_namespace IS NOT NULL OR p_dataset_name IS NOT NULL THEN
        -- By name_key when both are given; a namespace or a name alone has no index of its own.
        v_ids := ARRAY(SELECT d.id FROM metastore.datasets AS d
                        WHERE CASE WHEN p_dataset_namespace IS NOT NULL AND p_dataset_name IS NOT NULL
                                   THEN d.name_key = sha256(metastore.dataset_key(p_dataset_namespace, p_dataset_name))
                                   ELSE (p_dataset_namespace IS NULL OR d.namespace = p_dataset_namespace)
                                        AND (p_dataset_name IS NULL OR d.name = p_dataset_name) END);
        SELECT array_agg(l.event_id), array_agg(l.event_time) INTO v_ev_ids, v_ev_at
          FROM (SELECT l.event_id, l.event_time FROM metastore.event_datasets AS l
                 WHERE l.dataset_id = ANY (v_ids) LIMIT c_few + 1) AS l;
        IF cardinality(v_ev_ids) > c_few THEN
            v_ev_ids := NULL;
        ELSIF v_ev_ids IS NULL THEN
            RETURN;  -- no event mentions it
        END IF;
    END IF;

    FOR v_row IN
        SELECT e.xact_id, e.id, e.payload, e.received_at, e.source_kind, e.source_principal
          FROM metastore.events AS e
         WHERE (e.xact_id, e.id) > (v_xact, v_id)
           -- The horizon of this statement's own snapshot (see above): below it, all is final.
           AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
           AND (v_et_from IS NULL OR e.event_time >= v_et_from)
           AND (v_et_to IS NULL OR e.event_time < v_et_to)
           AND (v_rc_from IS NULL OR e.received_at >= v_rc_from)
           AND (v_rc_to IS NULL OR e.received_at < v_rc_to)
           -- The prefixes events_job_idx holds (change 5: job names of any length), then the whole.
           AND (p_job_namespace IS NULL OR (pg_catalog.left(e.job_namespace, 200) = pg_catalog.left(p_job_namespace, 200)
                                            AND e.job_namespace = p_job_namespace))
           AND (p_job_name IS NULL OR (pg_catalog.left(e.job_name, 400) = pg_catalog.left(p_job_name, 400)
                                       AND e.job_name = p_job_name))
           AND (p_event_type IS NULL OR e.event_type = upper(p_event_type))
           AND (v_ids IS NULL
                OR EXISTS (SELECT FROM metastore.event_datasets AS l
                            WHERE l.event_id = e.id AND l.event_time = e.event_time AND l.dataset_id = ANY (v_ids)))
           -- Key conditions the plan can take: ids on the primary key; times prune the partitions. (A
           -- plan may still walk the feed's index with the ids as its condition when estimates are
           -- off: 50 ms for 200 of a million events, where a full walk took 300. A UNION ALL that
           -- forced the lookups took the feed's ordered walk away from every other call.)
           AND (v_ev_ids IS NULL OR (e.id = ANY (v_ev_ids) AND e.event_time = ANY (v_ev_at)))
         ORDER BY e.xact_id, e.id
         LIMIT p_limit + 1
    LOOP
        -- Full: the row exists, so more follow; it is not printed (a page past its bytes is one large event).
        IF pg_catalog.cardinality(v_rows) = p_limit OR v_bytes >= c_page_bytes THEN
            v_more := true;
            EXIT;
        END IF;
        v_cursor := translate(encode(convert_to(v_row.xact_id::text || ':' || v_row.id::text, 'UTF8'), 'base64'),
                              E'+/\n', '-_');
        -- The payload as stored, rendered by PostgreSQL; the envelope around it is this store's.
        v_text := jsonb_build_object('id', v_row.id,
                                     'cursor', v_cursor,
                                     'received_at', v_row.received_at,
                                     'source_kind', v_row.source_kind,
                                     'source_principal', v_row.source_principal,
                                     'event', v_row.payload)::text;
        IF v_bytes > 0 AND v_bytes + octet_length(v_text) > c_page_bytes THEN
            v_more := true;
            EXIT;
        END IF;
        v_bytes := v_bytes + octet_length(v_text);
        -- array_append on the variable itself appends in place (no copy of what the page holds).
        v_rows := array_append(v_rows, v_text);
        v_cursors := array_append(v_cursors, v_cursor);
    END LOOP;
    RETURN QUERY SELECT r.event, r.cursor, v_more
                   FROM unnest(v_rows, v_cursors) WITH ORDINALITY AS r (event, cursor, n)
                  ORDER BY r.n;
END
$$;

COMMENT ON FUNCTION metastore.read_events(p_limit integer, p_cursor text, p_event_time_from text, p_event_time_to text, p_received_from text, p_received_to text, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) IS 'One page of the event feed: at most p_limit (1..1000) stored events after p_cursor, and at most 1 MiB of text unless its one event is larger, in the order of (transaction id, event id), each row the event as JSON text ({"id", "cursor", "received_at", "source_kind", "source_principal", "event": the payload as stored}), its cursor, and whether more events follow the page. Only events of transactions below the snapshot xmin are returned, so a reader paging with the cursor while ingest runs sees every committed event exactly once (the proof is in db/functions/120_read_events.sql and docs/events.md). Filters: eventTime and received_at ranges [from, to) (a time without a zone is UTC), job namespace and name, dataset namespace and name (events that mention it), event type. Error codes: 22023 a limit outside 1..1000 or a cursor not returned by this function; 22007/22008 a time that is not one. On Citus the order is that of metastore.feed_order, which metastore.sequence_feed assigns (metastore.read_sequenced_events; 0A000 where it is not deployed).';

CREATE FUNCTION metastore.read_sequenced_events(p_limit integer, p_cursor text, p_event_time_from timestamp with time zone, p_event_time_to timestamp with time zone, p_received_from timestamp with time zone, p_received_to timestamp with time zone, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) RETURNS TABLE(event text, cursor text, more boolean)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    SET "DateStyle" TO 'ISO, YMD'
    SET plan_cache_mode TO 'force_custom_plan'
    SET work_mem TO '64MB'
    AS $$
DECLARE
    c_batch      constant integer := 1000;
    -- Events fetched with their payload at once: as many as a PL/pgSQL loop over a query holds
    -- on one server (it fetches 10 rows at a time).
    c_fetch      constant integer := 10;
    c_page_bytes constant integer := 1048576;
    v_after      bigint;
    v_datasets   bigint[];
    v_seqs       bigint[];
    v_ids        bigint[];
    v_at         timestamptz[];
    v_found      bigint[];
    v_m_seqs     bigint[];
    v_m_ids      bigint[];
    v_m_at       timestamptz[];
    v_from       integer;
    v_row        record;
    v_text       text;
    v_cursor     text;
    v_rows       text[] := '{}';
    v_cursors    text[] := '{}';
    v_bytes      bigint := 0;
    v_more       boolean := false;
BEGIN
    v_after := metastore.feed_seq(p_cursor);
    IF p_dataset_namespace IS NOT NULL OR p_dataset_name IS NOT NULL THEN
        v_datasets := ARRAY(SELECT d.id FROM metastore.datasets AS d
                             WHERE CASE WHEN p_dataset_namespace IS NOT NULL AND p_dataset_name IS NOT NULL
                                        THEN d.name_key = sha256(metastore.dataset_key(p_dataset_namespace, p_dataset_name))
                                        ELSE (p_dataset_namespace IS NULL OR d.namespace = p_dataset_namespace)
                                             AND (p_dataset_name IS NULL OR d.name = p_dataset_name) END);
        IF cardinality(v_datasets) = 0 THEN
            RETURN;  -- no such dataset
        END IF;
    END IF;
    <<walk>>
    LOOP
        SELECT array_agg(o.seq ORDER BY o.seq), array_agg(o.event_id ORDER BY o.seq), array_agg(o.event_time ORDER BY o.seq)
          INTO v_seqs, v_ids, v_at
          FROM (SELECT q.seq, q.event_id, q.event_time
                  FROM metastore.feed_order AS q
                 WHERE q.seq > v_after
                   AND (p_event_time_from IS NULL OR q.event_time >= p_event_time_from)
                   AND (p_event_time_to IS NULL OR q.event_time < p_event_time_to)
                 ORDER BY q.seq
                 LIMIT c_batch) AS o;
        EXIT walk WHEN v_seqs IS NULL;
        -- Ids are unique: the times only prune the shards asked.
        SELECT array_agg(e.id) INTO v_found
          FROM metastore.events AS e
         WHERE e.id = ANY (v_ids) AND e.event_time = ANY (v_at)
           AND (p_received_from IS NULL OR e.received_at >= p_received_from)
           AND (p_received_to IS NULL OR e.received_at < p_received_to)
           AND (p_job_namespace IS NULL OR (pg_catalog.left(e.job_namespace, 200) = pg_catalog.left(p_job_namespace, 200)
                                            AND e.job_namespace = p_job_namespace))
           AND (p_job_name IS NULL OR (pg_catalog.left(e.job_name, 400) = pg_catalog.left(p_job_name, 400)
                                       AND e.job_name = p_job_name))
           AND (p_event_type IS NULL OR e.event_type = upper(p_event_type))
           AND (v_datasets IS NULL
                OR EXISTS (SELECT FROM metastore.event_datasets AS l
                            WHERE l.event_id = e.id AND l.event_time = e.event_time AND l.dataset_id = ANY (v_datasets)));
        SELECT array_agg(u.seq ORDER BY u.n), array_agg(u.id ORDER BY u.n), array_agg(u.at ORDER BY u.n)
          INTO v_m_seqs, v_m_ids, v_m_at
          FROM unnest(v_seqs, v_ids, v_at) WITH ORDINALITY AS u (seq, id, at, n)
         WHERE u.id = ANY (v_found);
        v_from := 1;
        WHILE v_from <= coalesce(cardinality(v_m_ids), 0) LOOP
            FOR v_row IN
                SELECT e.id, e.payload, e.received_at, e.source_kind, e.source_principal,
                       array_position(v_m_ids, e.id) AS i
                  FROM metastore.events AS e
                 WHERE e.id = ANY (v_m_ids[v_from:v_from + c_fetch - 1])
                   AND e.event_time = ANY (v_m_at[v_from:v_from + c_fetch - 1])
                 ORDER BY 6
            LOOP
                IF pg_catalog.cardinality(v_rows) = p_limit OR v_bytes >= c_page_bytes THEN
                    v_more := true;
                    EXIT walk;
                END IF;
                v_cursor := translate(encode(convert_to('s:' || v_m_seqs[v_row.i]::text, 'UTF8'), 'base64'),
                                      E'+/\n', '-_');
                v_text := jsonb_build_object('id', v_row.id,
                                             'cursor', v_cursor,
                                             'received_at', v_row.received_at,
                                             'source_kind', v_row.source_kind,
                                             'source_principal', v_row.source_principal,
                                             'event', v_row.payload)::text;
                IF v_bytes > 0 AND v_bytes + octet_length(v_text) > c_page_bytes THEN
                    v_more := true;
                    EXIT walk;
                END IF;
                v_bytes := v_bytes + octet_length(v_text);
                v_rows := array_append(v_rows, v_text);
                v_cursors := array_append(v_cursors, v_cursor);
            END LOOP;
            v_from := v_from + c_fetch;
        END LOOP;
        EXIT walk WHEN cardinality(v_seqs) < c_batch;
        v_after := v_seqs[cardinality(v_seqs)];
    END LOOP;
    RETURN QUERY SELECT r.event, r.cursor, v_more
                   FROM unnest(v_rows, v_cursors) WITH ORDINALITY AS r (event, cursor, n)
                  ORDER BY r.n;
END
$$;

COMMENT ON FUNCTION metastore.read_sequenced_events(p_limit integer, p_cursor text, p_event_time_from timestamp with time zone, p_event_time_to timestamp with time zone, p_received_from timestamp with time zone, p_received_to timestamp with time zone, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) IS 'metastore.read_events on Citus: the same page, read in the order of metastore.feed_order (seq), with a cursor of that order (metastore.feed_seq). Called by metastore.read_events, which checks the limit and the times.';

CREATE FUNCTION metastore.record_rejection(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    c_prefix_bytes constant integer := 4096;
    v_cut          integer := c_prefix_bytes;
    v_prefix       bytea;
    v_text         text;
    v_codes        integer[] := '{}';
    v_i            integer := 0;
    v_n            integer;
    v_byte         integer;
    v_len          integer;
    v_code         integer;
BEGIN
    IF p_body IS NOT NULL THEN
        -- Cut at a character boundary: step back over the continuation bytes (10xxxxxx) that
        -- follow the cut, so that no character is split.
        WHILE v_cut > c_prefix_bytes - 3 AND v_cut < pg_catalog.octet_length(p_body)
              AND (pg_catalog.get_byte(p_body, v_cut) & 192) = 128 LOOP
            v_cut := v_cut - 1;
        END LOOP;
        v_prefix := pg_catalog.substr(p_body, 1, v_cut);
        BEGIN
            v_text := pg_catalog.convert_from(v_prefix, 'UTF8');
        EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
            v_text := NULL;
        END;
        IF v_text IS NULL THEN
            -- Not UTF-8 (or a NUL byte): decode leniently, one character at a time, each byte
            -- that does not start a well-formed character becoming U+FFFD.
            v_n := pg_catalog.octet_length(v_prefix);
            WHILE v_i < v_n LOOP
                v_byte := pg_catalog.get_byte(v_prefix, v_i);
                v_len := CASE WHEN v_byte BETWEEN 1 AND 127 THEN 1
                              WHEN v_byte BETWEEN 194 AND 223 THEN 2
                              WHEN v_byte BETWEEN 224 AND 239 THEN 3
                              WHEN v_byte BETWEEN 240 AND 244 THEN 4
                              ELSE 0 END;
                v_code := CASE v_len WHEN 1 THEN v_byte WHEN 2 THEN v_byte & 31 WHEN 3 THEN v_byte & 15
                                     WHEN 4 THEN v_byte & 7 END;
                IF v_len = 0 OR v_i + v_len > v_n THEN
                    v_len := 0;
                ELSE
                    FOR v_k IN 1 .. v_len - 1 LOOP
                        v_byte := pg_catalog.get_byte(v_prefix, v_i + v_k);
                        IF (v_byte & 192) <> 128 THEN
                            v_len := 0;
                            EXIT;
                        END IF;
                        v_code := (v_code << 6) | (v_byte & 63);
                    END LOOP;
                END IF;
                -- Overlong forms, surrogates and code points past U+10FFFF are not characters.
                IF v_len = 0 OR (v_len = 3 AND (v_code < 2048 OR v_code BETWEEN 55296 AND 57343))
                   OR (v_len = 4 AND (v_code < 65536 OR v_code > 1114111)) THEN
                    v_codes := v_codes || 65533;
                    v_i := v_i + 1;
                ELSE
                    v_codes := v_codes || v_code;
                    v_i := v_i + v_len;
                END IF;
            END LOOP;
            v_text := (SELECT pg_catalog.string_agg(pg_catalog.chr(c.code), '' ORDER BY c.o)
                         FROM pg_catalog.unnest(v_codes) WITH ORDINALITY AS c (code, o));
        END IF;
    END IF;

    INSERT INTO metastore.rejected_events (body_prefix, body_bytes, body_sha256, sqlstate, reason,
                                           source_kind, source_principal)
    VALUES (v_text, pg_catalog.octet_length(p_body),
            pg_catalog.sha256(p_body), p_sqlstate, p_reason, p_source_kind, p_source_principal);
END
$$;

COMMENT ON FUNCTION metastore.record_rejection(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) IS 'Records a refused event in metastore.rejected_events: the first 4096 bytes of p_body as text (decoded leniently), its size and sha256 (all null when p_body is null), the SQLSTATE and reason, and the source (already checked by metastore.check_source). Internal: the ingest functions and metastore.reject_event call it.';

CREATE FUNCTION metastore.reject_event(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_kind text := metastore.check_source(p_source_kind, p_source_principal);
BEGIN
    IF p_sqlstate IS NULL OR p_sqlstate !~ '^[0-9A-Z]{5}$' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = 'p_sqlstate must be a SQLSTATE: five digits or capital letters';
    END IF;
    IF p_reason IS NULL OR p_reason = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'p_reason must say why';
    END IF;
    PERFORM metastore.record_rejection(p_body, p_sqlstate, pg_catalog.left(p_reason, 2000), v_kind,
                                       p_source_principal);
END
$_$;

COMMENT ON FUNCTION metastore.reject_event(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) IS 'Records in metastore.rejected_events an event the service accepted but could not store (p_body as received, or null; p_sqlstate and p_reason say why; the reason is cut at 2000 characters). Error codes: 22023 p_sqlstate not a SQLSTATE, p_reason missing, an unknown source kind, or a principal with the unauthenticated kind (p_source_kind null means unauthenticated).';

CREATE FUNCTION metastore.roll_up_datasets(p_dataset_ids bigint[] DEFAULT NULL::bigint[]) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_folded bigint;
BEGIN
    -- Rows in (namespace, name) order, as every writer takes them (metastore.store_events); a
    -- concurrent roll-up of the same datasets waits here, then deletes only what is left.
    PERFORM
       FROM metastore.datasets AS d
      WHERE CASE WHEN p_dataset_ids IS NULL
                 THEN d.id IN (SELECT a.dataset_id FROM metastore.dataset_activity AS a)
                 ELSE d.id = ANY (p_dataset_ids) END
      ORDER BY d.namespace, d.name
        FOR NO KEY UPDATE OF d;

    -- Activity of the dataset's own generation is folded in; of an older one (what a rebuild
    -- replaced) dropped; of a newer one (a rebuild under way) left for the rebuild to fold when it
    -- ends (metastore.backfill).
    WITH moved AS (
        DELETE FROM metastore.dataset_activity AS a
         USING metastore.datasets AS d
         WHERE d.id = a.dataset_id AND a.generation <= d.generation
           AND (p_dataset_ids IS NULL OR a.dataset_id = ANY (p_dataset_ids))
        RETURNING a.*, a.generation = d.generation AS same_generation
    ), sums AS (
        SELECT m.dataset_id, min(m.first_seen) AS first_seen, max(m.last_seen) AS last_seen,
               sum(m.input_events) AS input_events, sum(m.output_events) AS output_events,
               bool_or(m.direct) AS direct, count(*) AS n
          FROM moved AS m
         WHERE m.same_generation
         GROUP BY m.dataset_id
    ), folded AS (
        UPDATE metastore.datasets AS d
           SET kind = CASE WHEN s.direct THEN 'dataset' ELSE d.kind END,
               first_seen = least(d.first_seen, s.first_seen), last_seen = greatest(d.last_seen, s.last_seen),
               input_events = d.input_events + s.input_events, output_events = d.output_events + s.output_events
          FROM sums AS s
         WHERE d.id = s.dataset_id
        RETURNING s.n
    )
    SELECT coalesce(sum(f.n), 0) INTO v_folded FROM folded AS f;
    RETURN v_folded;
END
$$;

COMMENT ON FUNCTION metastore.roll_up_datasets(p_dataset_ids bigint[]) IS 'Folds metastore.dataset_activity of each dataset''s own generation into metastore.datasets (counts, first_seen, last_seen) for the given datasets, or all of them when null, drops activity of older generations, and returns how many activity rows it folded. metastore.datasets_view reads the same before and after.';

CREATE FUNCTION metastore.schema_version() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
    SELECT coalesce(max(version), 0) FROM metastore_migrations.schema_version
$$;

COMMENT ON FUNCTION metastore.schema_version() IS 'The newest applied change of db/deploy; the service compares it with the version it was built for.';

CREATE FUNCTION metastore.search(p_q text, p_limit integer DEFAULT 20) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    SET enable_seqscan TO 'off'
    AS $_$
DECLARE
    -- Substring candidates ranked per kind (the first in storage order): 2 x p_limit, at least this.
    c_sample  constant integer := 50;
    -- Without a trigram index, names looked through per kind for a substring (the answer says
    -- partial): of datasets and fields (where pg_trgm is missing), of jobs the newest (they have none).
    c_scan    constant integer := 50000;
    -- q of one or two characters has no trigram: looked for in fewer names (it is in most of them).
    c_scan_short constant integer := 10000;
    c_scan_jobs constant integer := 2000;
    -- Schema versions looked through for the datasets that have a field now: through the index of
    -- field names, and walked first.
    c_versions constant integer := 500;
    c_walk    constant integer := 100;
    v_hide    record;
    v_q       text;
    v_lq      text;
    v_key     bytea;
    v_like    text;
    v_partial boolean := false;
    v_scan    integer;
    v_cand    record;
    v_results jsonb := '[]';
    v_field   jsonb;
    v_more    boolean;
    v_fields  integer := 0;
BEGIN
    IF p_q IS NULL OR btrim(p_q) = '' OR octet_length(p_q) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'q must be a text of 1 to 1000 bytes, not only spaces';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 100, not %s', p_limit);
    END IF;
    v_q := btrim(p_q);
    v_lq := lower(v_q);
    -- The key of the search indexes: the first 400 bytes of the lower-case name.
    v_key := metastore.search_key(v_q);
    v_like := replace(replace(replace(v_lq, E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_');
    v_hide := metastore.hidden_names();
    v_scan := CASE WHEN length(v_lq) < 3 THEN c_scan_short ELSE c_scan END;

    -- Candidates of every kind and tier, best first. Exact (0): the name, or its last part, is q.
    -- Prefix (1): it starts with q; the closer first. Substring (2): the trigram index where there
    -- is one (or a bounded look), the first max(c_sample, 2 x p_limit) of each kind ranked: a word
    -- that starts with q first (after ., _, / and the like), then where q starts, then the shorter name.
    FOR v_cand IN
        WITH ranged AS (
            -- A dataset or job whose name or last part (metastore.name_tail) starts with q: ranges of
            -- the search indexes, the first 2 x p_limit of each in name order.
            (SELECT 'dataset' AS type, d.id, d.namespace, d.name, d.kind
               FROM metastore.datasets AS d
              WHERE metastore.search_key(d.name) >= v_key AND metastore.search_key(d.name) < v_key || '\xff'::bytea
                AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(d.name), d.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT 'dataset', d.id, d.namespace, d.name, d.kind
               FROM metastore.datasets AS d
              WHERE metastore.search_key(metastore.name_tail(d.name)) >= v_key
                AND metastore.search_key(metastore.name_tail(d.name)) < v_key || '\xff'::bytea
                AND (strpos(d.name, '/') > 0 OR strpos(d.name, '.') > 0)
                AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(metastore.name_tail(d.name)), d.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT 'job', j.id, j.namespace, j.name, NULL
               FROM metastore.jobs AS j
              WHERE metastore.search_key(j.name) >= v_key AND metastore.search_key(j.name) < v_key || '\xff'::bytea
                AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(j.name), j.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT 'job', j.id, j.namespace, j.name, NULL
               FROM metastore.jobs AS j
              WHERE metastore.search_key(metastore.name_tail(j.name)) >= v_key
                AND metastore.search_key(metastore.name_tail(j.name)) < v_key || '\xff'::bytea
                AND (strpos(j.name, '/') > 0 OR strpos(j.name, '.') > 0)
                AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)
              ORDER BY metastore.search_key(metastore.name_tail(j.name)), j.id
              LIMIT 2 * p_limit)
            UNION
            (SELECT DISTINCT ON (metastore.search_key(f.name), f.name) 'field', NULL::bigint, NULL::text, f.name, NULL
               FROM metastore.field_names AS f
              WHERE metastore.search_key(f.name) >= v_key AND metastore.search_key(f.name) < v_key || '\xff'::bytea
              ORDER BY metastore.search_key(f.name), f.name
              LIMIT 2 * p_limit)
        ), matched AS (
            -- A key cut at 400 bytes matches more than the name does: the whole name decides.
            SELECT r.*, lower(r.name) AS lname,
                   CASE WHEN r.type = 'field' THEN lower(r.name) ELSE lower(metastore.name_tail(r.name)) END AS ltail
              FROM ranged AS r
        ), tiered AS (
            SELECT m.type, m.id, m.namespace, m.name, m.kind, m.lname,
                   CASE WHEN v_lq IN (m.lname, m.ltail) THEN 0 ELSE 1 END AS tier,
                   -- The closer the better: how much longer than q the part it starts is.
                   least(CASE WHEN m.lname LIKE v_like || '%' THEN length(m.lname) END,
                         CASE WHEN m.ltail LIKE v_like || '%' THEN length(m.ltail) END) AS word,
                   0 AS pos
              FROM matched AS m
             WHERE m.lname LIKE v_like || '%' OR m.ltail LIKE v_like || '%'
            UNION ALL
            SELECT s.type, s.id, s.namespace, s.name, s.kind, s.lname, 2,
                   -- A word of the name that starts with q before one that only holds it.
                   CASE WHEN substr(s.lname, strpos(s.lname, v_lq) - 1, 1) ~ '[[:alnum:]]' THEN 1 ELSE 0 END,
                   strpos(s.lname, v_lq)
              FROM metastore.search_substrings(v_lq, v_like, greatest(c_sample, 2 * p_limit), v_scan, c_scan_jobs,
                                               v_hide.dataset_ids, v_hide.job_ids, v_hide.namespaces) AS s
             WHERE (SELECT count(*) FROM matched AS m WHERE m.lname LIKE v_like || '%' OR m.ltail LIKE v_like || '%')
                   < p_limit
        )
        SELECT t.* FROM tiered AS t
         ORDER BY t.tier, t.word, t.pos, length(t.name), t.lname COLLATE "C", t.name COLLATE "C", t.type,
                  t.namespace COLLATE "C", t.id
    LOOP
        IF v_cand.type = 'field' THEN
            -- The datasets whose current fields have it, a few (with a mark when there are more); a
            -- name no current version has is left out. Bounded both ways: a common field is found
            -- among the first c_walk versions (the walk stops at the sixth dataset), and only a rarer
            -- one goes to the index of field names, whose bitmap is as large as the versions that
            -- have the name (so about 6 / c_walk of them at most), c_versions of them looked at.
            EXIT WHEN v_fields >= 2 * p_limit;
            v_fields := v_fields + 1;
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                                      ORDER BY x.namespace COLLATE "C", x.name COLLATE "C", x.id)
                                FILTER (WHERE x.n <= 5), '[]'),
                   count(*) > 5
              INTO v_field, v_more
              FROM (SELECT f.*, row_number() OVER (ORDER BY f.id) AS n
                      FROM (SELECT d.id, d.namespace, d.name
                              FROM ((SELECT w.* FROM (SELECT * FROM metastore.dataset_schema_versions
                                                       ORDER BY dataset_id, fields_sha256 LIMIT c_walk) AS w
                                      WHERE w.fields @> jsonb_build_array(jsonb_build_object('name', v_cand.name)))
                                    UNION ALL
                                    -- Read only when the walk found fewer than six (the Limit below
                                    -- stops before it), past the versions walked.
                                    (SELECT v.* FROM metastore.dataset_schema_versions AS v
                                      WHERE jsonb_path_query_array(v.fields, '$[*].name')
                                            @> jsonb_build_array(v_cand.name)
                                        AND (v.dataset_id, v.fields_sha256) > (
                                                SELECT w.dataset_id, w.fields_sha256
                                                  FROM metastore.dataset_schema_versions AS w
                                                 ORDER BY w.dataset_id, w.fields_sha256
                                                 OFFSET c_walk - 1 LIMIT 1)
                                      LIMIT c_versions)) AS v
                              -- A dataset has one current version: no dataset twice. Taken as
                              -- they come, the walk stops at the sixth.
                              JOIN metastore.datasets AS d ON d.id = v.dataset_id
                             WHERE NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                                WHERE n.dataset_id = v.dataset_id
                                                  AND (n.last_seen, n.first_seen, v.fields_sha256)
                                                      > (v.last_seen, v.first_seen, n.fields_sha256))
                               AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                             LIMIT 6) AS f) AS x;
            CONTINUE WHEN v_field = '[]';
            v_results := v_results || jsonb_build_array(jsonb_build_object(
                'type', 'field', 'match', (ARRAY['exact', 'prefix', 'substring'])[v_cand.tier + 1],
                'field', v_cand.name, 'datasets', v_field, 'more_datasets', v_more));
        ELSE
            v_results := v_results || jsonb_build_array(jsonb_build_object(
                'type', v_cand.type, 'match', (ARRAY['exact', 'prefix', 'substring'])[v_cand.tier + 1],
                'id', v_cand.id, 'namespace', v_cand.namespace, 'name', v_cand.name)
                || CASE WHEN v_cand.type = 'dataset' THEN jsonb_build_object('kind', v_cand.kind) ELSE '{}' END);
        END IF;
        EXIT WHEN jsonb_array_length(v_results) >= p_limit;
    END LOOP;

    -- Partial: a substring search looked through part of the names only (no trigram index there).
    IF jsonb_array_length(v_results) < p_limit THEN
        -- The large tables by their row estimate; jobs past the newest c_scan_jobs by their index.
        v_partial := ((to_regclass('metastore.datasets_name_trgm_idx') IS NULL OR length(v_lq) < 3)
                      AND (SELECT c.reltuples FROM pg_class AS c WHERE c.oid = 'metastore.datasets'::regclass) > v_scan)
                  OR EXISTS (SELECT FROM metastore.jobs AS j ORDER BY j.id DESC OFFSET c_scan_jobs)
                  OR ((to_regclass('metastore.field_names_name_trgm_idx') IS NULL OR length(v_lq) < 3)
                      AND (SELECT c.reltuples FROM pg_class AS c WHERE c.oid = 'metastore.field_names'::regclass) > v_scan);
    END IF;
    RETURN jsonb_build_object('q', v_q, 'results', v_results, 'partial', v_partial);
END
$_$;

COMMENT ON FUNCTION metastore.search(p_q text, p_limit integer) IS 'Dataset names, job names and top-level field names that contain p_q (trimmed, compared in lower case), ranked: exact (the name, or the last part of a dataset or job name, after its last / or else its last ., is q), then prefix (it starts with q; the closer first), then substring (a word starting with it first, then where it starts, then shorter names): {"q", "results": [...], "partial"}, at most p_limit. A dataset or job result has its id, namespace and name; a field result the field and up to 5 datasets whose current fields have it (more_datasets: there are more). partial: a substring search looked through part of the names of some kind: job names (the newest 2000; they have no trigram index), or dataset or field names (the first 50000, or 10000 for q of one or two characters) where pg_trgm is missing or q is that short. Hidden datasets, jobs and namespaces (metastore.hide) are left out. Error codes: 22023 q empty or over 1000 bytes, limit outside 1..100.';

CREATE FUNCTION metastore.search_key(p_text text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    -- metastore.dataset_key('', x) is a zero byte and the bytes of x.
    SELECT pg_catalog.substr(metastore.dataset_key(''::pg_catalog.text, pg_catalog.lower(p_text)), 2, 400)
$$;

COMMENT ON FUNCTION metastore.search_key(p_text text) IS 'The first 400 bytes of lower(p_text): the key of the search indexes, in code point order. Frozen (defined by change 9): indexes hold its results.';

CREATE FUNCTION metastore.search_substrings(p_lq text, p_like text, p_sample integer, p_scan integer, p_scan_jobs integer, p_hidden_datasets bigint[], p_hidden_jobs bigint[], p_hidden_namespaces text[]) RETURNS TABLE(type text, id bigint, namespace text, name text, kind text, lname text)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET enable_seqscan TO 'on'
    AS $_$
DECLARE
    -- With a trigram index (pg_trgm) and q long enough to have a trigram, the first p_sample matches
    -- in storage order (EXECUTE: planned for the pattern at hand). Of datasets, the first c_walk
    -- names are walked first: a common q has p_sample matches there, and the index would build a
    -- bitmap of all its matches (49 000 for a common word among a million names) to give the same
    -- first ones. The index looks for the last c_window characters of q only, each match checked
    -- for the whole: its cost grows with the trigrams looked up, and a whole qualified name has
    -- dozens of common ones (hive, .s0.) where its last part alone is as selective. Otherwise the
    -- first p_scan names of the table in storage order (of jobs, the p_scan_jobs newest), a bounded
    -- look, which metastore.search reports.
    c_indexed constant text := $q$
        WITH walked AS MATERIALIZED (
            SELECT 'dataset'::text AS type, d.id, d.namespace, d.name, d.kind, lower(d.name) AS lname
              FROM (SELECT * FROM metastore.datasets LIMIT $12) AS d
             WHERE $1 AND strpos(lower(d.name), $11) > 0 AND lower(d.name) NOT LIKE $3
               AND lower(metastore.name_tail(d.name)) NOT LIKE $3 AND d.id <> ALL ($5) AND d.namespace <> ALL ($7)
             LIMIT $4)
        SELECT * FROM walked WHERE (SELECT count(*) FROM walked) >= $4
        UNION ALL
        SELECT * FROM (
            SELECT 'dataset'::text, d.id, d.namespace, d.name, d.kind, lower(d.name)
              FROM metastore.datasets AS d
             WHERE $1 AND (SELECT count(*) FROM walked) < $4
               AND lower(d.name) LIKE $10 AND strpos(lower(d.name), $11) > 0 AND lower(d.name) NOT LIKE $3
               AND lower(metastore.name_tail(d.name)) NOT LIKE $3 AND d.id <> ALL ($5) AND d.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT 'job'::text, j.id, j.namespace, j.name, NULL::text, lower(j.name)
              FROM metastore.jobs AS j
             WHERE $8 AND lower(j.name) LIKE $10 AND strpos(lower(j.name), $11) > 0 AND lower(j.name) NOT LIKE $3
               AND lower(metastore.name_tail(j.name)) NOT LIKE $3 AND j.id <> ALL ($6) AND j.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT DISTINCT 'field'::text, NULL::bigint, NULL::text, f.name, NULL::text, lower(f.name)
              FROM metastore.field_names AS f
             WHERE $9 AND lower(f.name) LIKE $10 AND strpos(lower(f.name), $11) > 0 AND lower(f.name) NOT LIKE $3
             LIMIT $4) AS x
    $q$;
    c_scanned constant text := $q$
        SELECT * FROM (
            SELECT 'dataset'::text, d.id, d.namespace, d.name, d.kind, lower(d.name)
              FROM (SELECT * FROM metastore.datasets LIMIT $10) AS d
             WHERE NOT $1 AND lower(d.name) LIKE $2 AND lower(d.name) NOT LIKE $3
               AND lower(metastore.name_tail(d.name)) NOT LIKE $3 AND d.id <> ALL ($5) AND d.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT 'job'::text, j.id, j.namespace, j.name, NULL::text, lower(j.name)
              FROM (SELECT * FROM metastore.jobs ORDER BY id DESC LIMIT $11) AS j
             WHERE NOT $8 AND lower(j.name) LIKE $2 AND lower(j.name) NOT LIKE $3
               AND lower(metastore.name_tail(j.name)) NOT LIKE $3 AND j.id <> ALL ($6) AND j.namespace <> ALL ($7)
             LIMIT $4) AS x
        UNION ALL
        SELECT * FROM (
            SELECT DISTINCT 'field'::text, NULL::bigint, NULL::text, f.name, NULL::text, lower(f.name)
              FROM (SELECT * FROM metastore.field_names LIMIT $10) AS f
             WHERE NOT $9 AND lower(f.name) LIKE $2 AND lower(f.name) NOT LIKE $3
             LIMIT $4) AS x
    $q$;
    c_window   constant integer := 12;
    c_walk     constant integer := 3000;
    v_window   text := right(p_lq, c_window);
    v_long     boolean := length(p_lq) >= 3;
    v_datasets boolean := v_long AND to_regclass('metastore.datasets_name_trgm_idx') IS NOT NULL;
    -- Job names have no trigram index (V0009): always the bounded look, newest jobs first.
    v_jobs     boolean := false;
    v_fields   boolean := v_long AND to_regclass('metastore.field_names_name_trgm_idx') IS NOT NULL;
BEGIN
    IF v_datasets OR v_jobs OR v_fields THEN
        RETURN QUERY EXECUTE c_indexed
            USING v_datasets, '%' || p_like || '%', p_like || '%', p_sample, p_hidden_datasets, p_hidden_jobs,
                  p_hidden_namespaces, v_jobs, v_fields,
                  '%' || replace(replace(replace(v_window, E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%',
                  p_lq, c_walk;
    END IF;
    IF NOT (v_datasets AND v_jobs AND v_fields) THEN
        RETURN QUERY EXECUTE c_scanned
            USING v_datasets, '%' || p_like || '%', p_like || '%', p_sample, p_hidden_datasets, p_hidden_jobs,
                  p_hidden_namespaces, v_jobs, v_fields, p_scan, p_scan_jobs;
    END IF;
END
$_$;

COMMENT ON FUNCTION metastore.search_substrings(p_lq text, p_like text, p_sample integer, p_scan integer, p_scan_jobs integer, p_hidden_datasets bigint[], p_hidden_jobs bigint[], p_hidden_namespaces text[]) IS 'For metastore.search: up to p_sample dataset names, job names and field names each whose lower case holds p_lq (p_like: it as a LIKE pattern) but does not start with it, without the hidden ones given: through the trigram indexes of dataset and field names where pg_trgm made them and p_lq has 3 characters or more, else among the first p_scan rows of the table (of jobs, the p_scan_jobs newest).';

CREATE FUNCTION metastore.sequence_feed() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '500ms'
    AS $$
DECLARE
    -- Rows looked at per pass: one statement on the workers for all of them.
    c_batch constant integer := 5000;
    v_ids   bigint[];
    v_at    timestamptz[];
    v_ready bigint[];
    v_moved integer;
BEGIN
    IF to_regclass('metastore.feed_pending') IS NULL THEN
        RETURN NULL;  -- one server: the feed's order needs no sequencer
    END IF;
    -- At most half the caller's statement_timeout too, so that a short read budget is not spent
    -- waiting (0 would mean waiting without bound: hence at least 1 ms).
    PERFORM pg_catalog.set_config('lock_timeout',
                                  greatest(1, least(500, coalesce(nullif(s.setting::integer, 0) / 2, 500)))::text, true)
       FROM pg_catalog.pg_settings AS s WHERE s.name = 'statement_timeout';
    BEGIN
        LOCK TABLE metastore.feed_order IN EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;
    END;
    SELECT array_agg(p.event_id ORDER BY p.event_id), array_agg(p.event_time ORDER BY p.event_id)
      INTO v_ids, v_at
      FROM (SELECT q.event_id, q.event_time FROM metastore.feed_pending AS q ORDER BY q.event_id LIMIT c_batch) AS p;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    -- Ids are unique: the times only prune the shards asked.
    SELECT array_agg(e.id) INTO v_ready
      FROM metastore.events AS e
     WHERE e.id = ANY (v_ids) AND e.event_time = ANY (v_at);
    IF v_ready IS NULL THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM metastore.feed_pending AS p WHERE p.event_id = ANY (v_ready)
        RETURNING p.event_id, p.event_time
    )
    INSERT INTO metastore.feed_order (event_id, event_time)
    SELECT m.event_id, m.event_time FROM moved AS m ORDER BY m.event_id;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END
$$;

COMMENT ON FUNCTION metastore.sequence_feed() IS 'Citus: one pass of the event feed''s sequencer: numbers (metastore.feed_order) the stored events of metastore.feed_pending that are visible, and returns how many; 0 when none is, or when another pass held the sequencer for longer than its wait (500 ms); NULL on one server, where the feed needs none. Call it in a transaction of its own before reading the feed.';

CREATE FUNCTION metastore.settings_keep_row() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '55000',
        MESSAGE = 'metastore.settings keeps exactly one row',
        HINT = 'Change a setting with UPDATE metastore.settings SET ...';
END
$$;

COMMENT ON FUNCTION metastore.settings_keep_row() IS 'Trigger: metastore.settings keeps its one row (SQLSTATE 55000).';

CREATE FUNCTION metastore.store_events(p_payloads jsonb[], p_events metastore.valid_event[], p_source_kind text DEFAULT 'unauthenticated'::text, p_source_principal text DEFAULT NULL::text) RETURNS TABLE(event_id bigint, duplicate boolean)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    v_ids        bigint[];
    v_dups       boolean[];
    v_hashes     bytea[];
    v_new_ids    bigint[];
    v_new_pay    jsonb[];
    v_new_ev     metastore.valid_event[];
    v_datasets   jsonb;
    v_id         bigint;
BEGIN
    -- 1. The events, in the order given. Equal payloads have equal eventTimes, so they meet in one
    -- partition, where (payload_sha256, event_time) is unique; the first of equal ones in the set
    -- is stored, the others are its duplicates.
    v_hashes := ARRAY(SELECT sha256(convert_to(p.payload::text, 'UTF8'))
                        FROM unnest(p_payloads) WITH ORDINALITY AS p (payload, o) ORDER BY p.o);
    WITH ins AS (
        INSERT INTO metastore.events AS e (
            payload, payload_sha256, event_kind, event_type, event_time, run_id, job_namespace, job_name,
            producer, schema_url, source_kind, source_principal)
        SELECT u.payload, u.h, u.event_kind, u.event_type, u.event_time, u.run_id, u.job_namespace, u.job_name,
               u.producer, u.schema_url, p_source_kind, p_source_principal
          FROM ROWS FROM (unnest(p_payloads), unnest(v_hashes), unnest(p_events))
               AS u (payload, h)
        -- A second equal event of the set conflicts with the first, inserted by this statement.
        ON CONFLICT (payload_sha256, event_time) DO NOTHING
        RETURNING e.id, e.payload_sha256, e.event_time
    )
    SELECT array_agg(i.id ORDER BY k.o), array_agg(i.id IS NULL ORDER BY k.o)
      INTO v_ids, v_dups
      FROM (SELECT u.ordinality AS o, u.h, u.event_time,
                   u.ordinality = min(u.ordinality) OVER (PARTITION BY u.h, u.event_time) AS first
              FROM ROWS FROM (unnest(v_hashes), unnest(p_events)) WITH ORDINALITY
                   AS u (h)) AS k
      LEFT JOIN ins AS i ON k.first AND i.payload_sha256 = k.h AND i.event_time = k.event_time;

    IF array_position(v_ids, NULL) IS NOT NULL THEN
        -- Resent: the stored copy already carries everything derived from it. A statement of its
        -- own per copy: it sees copies that a concurrent writer committed while the insert waited on
        -- them. (One key lookup each, a single shard on Citus, which refuses the lookup as a
        -- correlated subquery beside unnest.)
        FOR v_i IN 1 .. cardinality(v_ids) LOOP
            CONTINUE WHEN v_ids[v_i] IS NOT NULL;
            SELECT e.id INTO v_id FROM metastore.events AS e
             WHERE e.payload_sha256 = v_hashes[v_i] AND e.event_time = (p_events[v_i]).event_time;
            v_ids[v_i] := v_id;
        END LOOP;
        IF array_position(v_ids, NULL) IS NOT NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = '40001',
                MESSAGE = 'an equal event was stored and removed while this one was stored: send it again';
        END IF;
    END IF;

    -- Only the events stored now derive anything (usually all of them: no copy then).
    IF NOT true = ANY (v_dups) THEN
        v_new_ids := v_ids;
        v_new_pay := p_payloads;
        v_new_ev := p_events;
    ELSE
        SELECT array_agg(u.id ORDER BY u.ordinality), array_agg(u.payload ORDER BY u.ordinality),
               array_agg(x.ev ORDER BY u.ordinality)
          INTO v_new_ids, v_new_pay, v_new_ev
          FROM ROWS FROM (unnest(v_ids), unnest(v_dups), unnest(p_payloads), unnest(p_events)) WITH ORDINALITY
               AS u (id, dup, payload)
         CROSS JOIN LATERAL (SELECT ROW(u.event_kind, u.event_type, u.event_time, u.run_id, u.job_namespace,
                                        u.job_name, u.producer, u.schema_url, u.mentions)::metastore.valid_event) AS x (ev)
         WHERE NOT u.dup;
    END IF;

    IF v_new_ids IS NOT NULL THEN
        -- Citus: the new events wait in the event's transaction for the feed's sequencer
        -- (metastore.sequence_feed; docs/events.md, "On Citus"). Only where that table exists.
        IF to_regclass('metastore.feed_pending') IS NOT NULL THEN
            INSERT INTO metastore.feed_pending (event_id, event_time)
            SELECT u.id, u.event_time FROM ROWS FROM (unnest(v_new_ids), unnest(v_new_ev)) AS u (id);
        END IF;

        -- 2. Datasets, their activity, links and symlinks (metastore.derive_datasets).
        v_datasets := metastore.derive_datasets(v_new_ids, v_new_ev, true);

        -- 3. Each derivation only where its change is deployed: a revert drops its tables and its
        -- function (db/DESIGN.md, "Reverting a change, and the operator"), and PL/pgSQL looks a function up only
        -- when a call runs, so ingest goes on until the older release's deploy replaces this function.
        IF to_regclass('metastore.column_lineage') IS NOT NULL THEN
            PERFORM metastore.derive_lineage(v_new_ids, v_new_pay, v_new_ev, v_datasets);
        END IF;
        IF to_regclass('metastore.runs') IS NOT NULL THEN
            PERFORM metastore.derive_job_run(v_new_pay, v_new_ev);
            -- The runs' datasets, once their runs exist (and are locked by this transaction).
            IF to_regclass('metastore.run_datasets') IS NOT NULL THEN
                PERFORM metastore.derive_run_datasets(v_new_ev, v_datasets);
            END IF;
        END IF;
    END IF;

    RETURN QUERY SELECT u.id, u.dup FROM unnest(v_ids, v_dups) AS u (id, dup);
END
$$;

COMMENT ON FUNCTION metastore.store_events(p_payloads jsonb[], p_events metastore.valid_event[], p_source_kind text, p_source_principal text) IS 'Stores events that metastore.validate_event accepted (p_events[i] read from p_payloads[i]), each once: an event equal as JSON to a stored one, or to an earlier one of the set, returns that one with duplicate = true. One row per event, in order. Derives (metastore.derive_datasets) the new events'' datasets, links and symlinks, (metastore.derive_lineage) schema versions, lineage edges and column lineage, and (metastore.derive_job_run) jobs and runs, and (metastore.derive_run_datasets) the datasets of each run. Error codes: 40001 an equal event vanished meanwhile (retry).';

CREATE FUNCTION metastore.unhide(p_kind text, p_namespace text, p_name text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $$
DECLARE
    v_entry record;  -- not metastore.hidden: db/functions is applied before change 9 too
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('dataset', 'job', 'namespace') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('kind must be dataset, job or namespace, not %s', coalesce(p_kind, 'null'));
    END IF;
    IF p_namespace IS NULL OR (p_kind = 'namespace') <> (p_name IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'a namespace is named alone; a dataset or a job by its namespace and name';
    END IF;
    UPDATE metastore.hidden AS h
       SET unhidden_by = session_user, unhidden_at = clock_timestamp()
     WHERE h.kind = p_kind AND h.name_key = sha256(metastore.dataset_key(p_namespace, coalesce(p_name, '')))
       AND h.unhidden_at IS NULL
    RETURNING h.* INTO v_entry;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002',
            MESSAGE = format('no %s %s is hidden', p_kind,
                             CASE WHEN p_name IS NULL THEN p_namespace ELSE p_namespace || ' ' || p_name END);
    END IF;
    RETURN jsonb_build_object('unhidden', to_jsonb(v_entry) - 'name_key');
END
$$;

COMMENT ON FUNCTION metastore.unhide(p_kind text, p_namespace text, p_name text) IS 'Shows again a dataset, job or namespace metastore.hide hid (same arguments), recording who (session_user) and when. Returns {"unhidden": the entry}. Owner only. Error codes: 22023 an unknown kind, no namespace, a name missing or given where it must not be; P0002 it is not hidden.';

CREATE FUNCTION metastore.use_group_roles(p_app text DEFAULT NULL::text, p_reader text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $_$
DECLARE
    v_old_app    text;
    v_old_reader text;
    v_app        text;
    v_reader     text;
    v_role       text;
    v_from       text;
    v_to         text;
    v_kind       text;
    v_object     text;
    v_priv       text;
    v_moved      integer := 0;
BEGIN
    SELECT r.app_role, r.reader_role INTO STRICT v_old_app, v_old_reader FROM metastore.group_roles AS r FOR UPDATE;
    v_app := coalesce(p_app, v_old_app);
    v_reader := coalesce(p_reader, v_old_reader);
    IF v_app = v_reader THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('the app and reader roles must differ, not both %s', v_app);
    END IF;

    FOREACH v_role IN ARRAY ARRAY[v_app, v_reader] LOOP
        -- Names that need no quoting anywhere (SQL, libpq options, YAML) and are no reserved role.
        IF v_role !~ '^[a-z_][a-z0-9_]{0,62}$' OR v_role LIKE 'pg\_%' OR v_role = 'public' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('group role name %s is not valid: 1 to 63 lower-case ASCII letters, digits and _, '
                                 'not starting with a digit or pg_', quote_literal(v_role));
        END IF;
        IF NOT EXISTS (SELECT FROM pg_roles AS r WHERE r.rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE EXCEPTION USING
                    ERRCODE = '42501',
                    MESSAGE = format('group role %I does not exist and %I may not create it', v_role, current_user),
                    HINT = format('A DBA creates it first: CREATE ROLE %I NOLOGIN;', v_role);
            END;
        ELSIF EXISTS (SELECT FROM pg_roles AS r
                       WHERE r.rolname = v_role AND (r.rolcanlogin OR r.rolsuper OR r.rolbypassrls)) THEN
            -- A login role here would be the owner, a service or a person: each installation's
            -- privileges go to its own NOLOGIN groups, and logins are made members of them.
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('%I is a login, superuser or BYPASSRLS role; a group role must be NOLOGIN', v_role);
        END IF;
    END LOOP;

    -- Every privilege the old roles hold in this schema and on this database goes to the new ones.
    FOR v_from, v_to IN
        SELECT t.f, t.t FROM (VALUES (v_old_app, v_app), (v_old_reader, v_reader)) AS t (f, t)
         WHERE t.f <> t.t AND to_regrole(t.f) IS NOT NULL
    LOOP
        FOR v_kind, v_object, v_priv IN
            SELECT 'SCHEMA', quote_ident(n.nspname), a.privilege_type
              FROM pg_namespace AS n CROSS JOIN LATERAL aclexplode(n.nspacl) AS a
             WHERE n.nspname = 'metastore' AND a.grantee = to_regrole(v_from)
            UNION ALL
            SELECT CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text, a.privilege_type
              FROM pg_class AS c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
             WHERE c.relnamespace = 'metastore'::regnamespace AND a.grantee = to_regrole(v_from)
            UNION ALL
            SELECT 'ROUTINE', p.oid::regprocedure::text, a.privilege_type
              FROM pg_proc AS p CROSS JOIN LATERAL aclexplode(p.proacl) AS a
             WHERE p.pronamespace = 'metastore'::regnamespace AND a.grantee = to_regrole(v_from)
            UNION ALL
            SELECT 'DATABASE', quote_ident(d.datname), a.privilege_type
              FROM pg_database AS d CROSS JOIN LATERAL aclexplode(d.datacl) AS a
             WHERE d.datname = current_database() AND a.grantee = to_regrole(v_from)
        LOOP
            EXECUTE format('GRANT %s ON %s %s TO %I', v_priv, v_kind, v_object, v_to);
            EXECUTE format('REVOKE %s ON %s %s FROM %I', v_priv, v_kind, v_object, v_from);
            v_moved := v_moved + 1;
        END LOOP;
    END LOOP;
    UPDATE metastore.group_roles SET app_role = v_app, reader_role = v_reader, chosen = true;

    -- Any role of the cluster may connect to a new database (PUBLIC's default): only this
    -- installation's roles may (the database owner and superusers always can).
    EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), v_app, v_reader);
    IF has_database_privilege('public', current_database(), 'CONNECT') THEN
        RAISE WARNING USING
            MESSAGE = format('every role may still connect to database %I', current_database()),
            HINT = format('%I does not own the database; its owner runs: REVOKE CONNECT ON DATABASE %I FROM PUBLIC;',
                          current_user, current_database());
    END IF;
    RETURN jsonb_build_object('app_role', v_app, 'reader_role', v_reader, 'privileges_moved', v_moved);
END
$_$;

COMMENT ON FUNCTION metastore.use_group_roles(p_app text, p_reader text) IS 'Makes p_app and p_reader (null: keep the recorded one) this installation''s group roles: creates them NOLOGIN when missing (needs CREATEROLE), moves every privilege the previous ones held in schema metastore and on the database to them, records them in metastore.group_roles, and lets only them (besides the owner) connect to the database. Returns {"app_role", "reader_role", "privileges_moved"}. Error codes: 22023 a name that is not valid, equal names, or an existing role that can log in; 42501 a missing role the caller may not create.';

CREATE FUNCTION metastore.validate_event(p_payload jsonb) RETURNS metastore.valid_event
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET "TimeZone" TO 'UTC'
    AS $_$
DECLARE
    -- Every stored event can be served back (docs/events.md, "Events the store can serve back"):
    -- no event prints to more than c_text_cap bytes of JSON text, nor to more than c_text_ratio
    -- times its size as stored once it prints to more than c_text_floor; none nests deeper than
    -- 512 levels (the jsonpath below).
    c_text_cap   constant bigint := 16777216;
    c_text_floor constant bigint := 1048576;
    c_text_ratio constant integer := 8;
    v_result    metastore.valid_event;
    v_time_text text;
    v_past      interval;
    v_future    interval;
    v_earliest  timestamptz;
    v_latest    timestamptz;
    v_numbers   jsonb;
    v_long      jsonb;
    v_zeros     jsonb;
    v_scale     integer;
    v_least     bigint := 0;
    v_printed   bigint;
    v_allowed   bigint;
BEGIN
    -- First, before anything walks the whole event: nesting. Readers of the feed, export and
    -- forwarding parse events (Python's json stops near 1000 levels, counting its caller's frames;
    -- Jackson at 1000; the feed's envelope adds two), and PostgreSQL's own jsonpath walks overflow
    -- their stack at about 11,900. The walk stops at level 512: a container there is the 513th.
    IF pg_catalog.jsonb_path_exists(p_payload, 'strict $.**{512} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION USING
            ERRCODE = '54M02',
            MESSAGE = 'the event is nested more than 512 levels deep; at most 512 are accepted, so that readers '
                      'such as Python''s json module and Jackson (1000 levels) can parse it when it is served back';
    END IF;

    -- Then numbers, compared, never printed: only those that may print long are looked at (zeros,
    -- whose text depends on their scale, and magnitudes from 1e16 up or below 1e-16: 17 characters
    -- or more). Outside the IEEE-754 double range (I-JSON, RFC 7493) they are refused: jsonb keeps
    -- them exact and small (1e131071 takes a few bytes), but their text is unbounded (131,072
    -- digits), and the de-duplication hash and consumers read text. A zero keeps the scale it was
    -- written with (0e-16383 prints 16,385 characters): more than 324 decimals, which no double
    -- needs, is refused too.
    v_allowed := least(c_text_cap, greatest(c_text_floor, c_text_ratio * pg_catalog.pg_column_size(p_payload)::bigint));
    v_numbers := pg_catalog.jsonb_path_query_array(p_payload, 'strict $.** ? (@.type() == "number")');
    v_long := pg_catalog.jsonb_path_query_array(v_numbers,
                  'strict $[*] ? (@ >= 1e16 || @ <= -1e16 || (@ < 1e-16 && @ > -1e-16))');
    IF v_long <> '[]'::jsonb THEN
        v_zeros := pg_catalog.jsonb_path_query_array(v_long, 'strict $[*] ? (@ == 0)');
        -- A zero prints as "0", or "0." and its decimals.
        SELECT max(pg_catalog.scale(z.v::numeric)),
               coalesce(sum(CASE WHEN pg_catalog.scale(z.v::numeric) > 0 THEN pg_catalog.scale(z.v::numeric) + 2
                                 ELSE 1 END), 0)
          INTO v_scale, v_least
          FROM pg_catalog.jsonb_array_elements(v_zeros) AS z (v);
        -- The others print 17 characters or more each; 65 from 1e64 (or below 1e-64), 257 from
        -- 1e256. Each walk is skipped once the event is known to print past its bound.
        v_least := v_least + 17 * (pg_catalog.jsonb_array_length(v_long) - pg_catalog.jsonb_array_length(v_zeros));
        IF v_scale > 324 OR (v_least <= v_allowed AND pg_catalog.jsonb_path_exists(v_long,
               'strict $[*] ? (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308'
               ' || (@ < 4.9e-324 && @ > -4.9e-324 && @ != 0))')) THEN
            RAISE EXCEPTION USING
                ERRCODE = '22003',
                MESSAGE = 'a number is outside the IEEE-754 double range (magnitude above 1.7976931348623157e308, '
                          'nonzero below 4.9e-324, or a zero with more than 324 decimals): such numbers are not '
                          'accepted (I-JSON, RFC 7493)';
        END IF;
        IF v_least <= v_allowed THEN
            v_least := v_least + 48 * pg_catalog.jsonb_array_length(pg_catalog.jsonb_path_query_array(v_long,
                           'strict $[*] ? (@ >= 1e64 || @ <= -1e64 || (@ < 1e-64 && @ > -1e-64 && @ != 0))'));
        END IF;
        IF v_least <= v_allowed THEN
            v_least := v_least + 192 * pg_catalog.jsonb_array_length(pg_catalog.jsonb_path_query_array(v_long,
                           'strict $[*] ? (@ >= 1e256 || @ <= -1e256 || (@ < 1e-256 && @ > -1e-256 && @ != 0))'));
        END IF;
    END IF;

    -- Then the size of the event's text as stored, what the feed, export and forwarding serve. The
    -- bound is relative to its size as stored (jsonb, uncompressed), the same on every ingest path
    -- whatever the request looked like: real events print to 0.8 to 1.02 times it, numbers from 1e308
    -- on 19 times. Everything but numbers prints to at most 6 times what it takes stored (a control
    -- character in a string is one byte stored and \u0001 printed; a member's key, separators and
    -- brackets fit in its 4-byte entry), so the event prints to at most 6 times its stored size plus
    -- its numbers' text ("[" and ", " standing for their separators). That bound is enough for most
    -- events; the others are printed, unless their long numbers alone print past the bound.
    IF v_least <= v_allowed THEN
        IF 6 * pg_catalog.pg_column_size(p_payload)::bigint + pg_catalog.octet_length(v_numbers::text) <= v_allowed THEN
            v_printed := 0;  -- within the bound, whatever its exact size
        ELSE
            v_printed := pg_catalog.octet_length(p_payload::text);
        END IF;
    END IF;
    IF coalesce(v_printed, v_least) > v_allowed THEN
        RAISE EXCEPTION USING
            ERRCODE = '54M01',
            MESSAGE = pg_catalog.format(
                'the event prints to %s%s bytes of JSON text as stored, more than the %s accepted for it (%s times '
                'its %s bytes as stored, at least %s, at most %s): numbers written with large exponents print '
                'every digit (1e308 prints 309)',
                CASE WHEN v_printed IS NULL THEN 'at least ' ELSE '' END, coalesce(v_printed, v_least), v_allowed,
                c_text_ratio, pg_catalog.pg_column_size(p_payload), c_text_floor, c_text_cap);
    END IF;

    IF pg_catalog.jsonb_typeof(p_payload) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('an OpenLineage event must be a JSON object, not a JSON %s',
                                        pg_catalog.jsonb_typeof(p_payload));
    END IF;

    v_result.event_kind := metastore.event_kind(p_payload);
    IF v_result.event_kind IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = 'not an OpenLineage event: it needs "run" and "job" objects (RunEvent), '
                      'a "job" object (JobEvent) or a "dataset" object (DatasetEvent)';
    END IF;

    v_time_text := metastore.json_text(p_payload -> 'eventTime', 'eventTime', 64);
    -- PostgreSQL also reads words like 'now' or 'epoch' as times: accept ISO 8601 only.
    IF v_time_text !~ '^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}(:?\d{2})?)?$' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22007',
            MESSAGE = pg_catalog.format(
                '"eventTime" must be an ISO 8601 date-time such as 2024-05-01T12:00:00.000Z, not "%s"', v_time_text);
    END IF;
    BEGIN
        v_result.event_time := v_time_text::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION USING
            ERRCODE = '22007',
            MESSAGE = pg_catalog.format('"eventTime" is not a valid date-time: "%s"', v_time_text);
    END;

    -- The window of metastore.settings, and whatever it says, years 1 to 9999 (UTC) only.
    SELECT s.event_time_past, s.event_time_future INTO v_past, v_future FROM metastore.settings AS s;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000', MESSAGE = 'metastore.settings has no row: the deploy makes it, see V0002';
    END IF;
    v_earliest := greatest(pg_catalog.now() - v_past, '0001-01-01 00:00:00+00'::timestamptz);
    v_latest := least(pg_catalog.now() + v_future, '9999-12-31 23:59:59.999999+00'::timestamptz);
    IF v_result.event_time < v_earliest OR v_result.event_time > v_latest THEN
        RAISE EXCEPTION USING
            ERRCODE = '22008',
            MESSAGE = pg_catalog.format(
                '"eventTime" %s is outside the accepted window: from %s to %s (now - %s to now + %s)',
                v_time_text,
                pg_catalog.to_char(v_earliest, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                pg_catalog.to_char(v_latest, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                v_past, v_future);
    END IF;

    IF v_result.event_kind = 'run' THEN
        v_result.run_id := metastore.json_text(p_payload #> '{run,runId}', 'run.runId', 256);
    END IF;
    IF v_result.event_kind IN ('run', 'job') THEN
        -- Of any length, like dataset names: events_job_idx holds prefixes only (change 5).
        v_result.job_namespace := metastore.json_text(p_payload #> '{job,namespace}', 'job.namespace', NULL);
        v_result.job_name := metastore.json_text(p_payload #> '{job,name}', 'job.name', NULL);
    END IF;
    v_result.event_type := metastore.json_text(p_payload -> 'eventType', 'eventType', 64, false);
    v_result.producer := metastore.json_text(p_payload -> 'producer', 'producer', 2000, false);
    v_result.schema_url := metastore.json_text(p_payload -> 'schemaURL', 'schemaURL', 2000, false);
    v_result.mentions := ARRAY(SELECT x FROM metastore.extract_datasets(p_payload) AS x);
    RETURN v_result;
END
$_$;

COMMENT ON FUNCTION metastore.validate_event(p_payload jsonb) IS 'Checks that p_payload is an OpenLineage event this store accepts and returns what it says (event kind, type, time, run, job, producer, schema URL, and the datasets it mentions). Writes nothing. Error codes: 54M02 nested more than 512 levels deep; 22003 a number outside the IEEE-754 double range (or a zero with more than 324 decimals); 54M01 its JSON text as stored larger than 16 MiB, or than 1 MiB and 8 times its size as stored; 22023 not an event or a malformed member; 22007 eventTime not an ISO 8601 date-time; 22008 eventTime outside the window of metastore.settings; 22001 a member too long; 55000 metastore.settings has no row.';

CREATE FUNCTION metastore.write_probe() RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'pg_temp'
    SET lock_timeout TO '200ms'
    AS $$
BEGIN
    -- The mode every insert takes; conflicts only with SHARE and stronger locks. ONLY: one lock
    -- per parent, not one per daily partition (a lock on a partition's parent conflicts too).
    LOCK TABLE ONLY metastore.events, metastore.datasets, ONLY metastore.event_datasets, metastore.dataset_symlinks,
        metastore.rejected_events
        IN ROW EXCLUSIVE MODE;
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$$;

COMMENT ON FUNCTION metastore.write_probe() IS 'true when the tables ingest writes can be locked for writing within 200 ms (nothing holds a lock against writers), false otherwise. The service''s async writers use it to tell an event that cannot be stored from a database that cannot store anything right now.';

CREATE TABLE metastore.column_lineage (
    output_dataset_id bigint NOT NULL,
    output_field text NOT NULL,
    input_dataset_id bigint NOT NULL,
    input_field text NOT NULL,
    transformation_type text NOT NULL,
    transformation_subtype text NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    edge_sha256 bytea NOT NULL,
    generation integer DEFAULT 1 NOT NULL
);

COMMENT ON TABLE metastore.column_lineage IS 'output field <- input field, once per (output dataset, output field, input dataset, input field, transformation type, subtype), first_seen and last_seen to the hour (UTC). Only input datasets the same event mentions are resolved.';

COMMENT ON COLUMN metastore.column_lineage.output_field IS 'Empty: the facet''s dataset-level "dataset" list (the input affects the whole output dataset).';

COMMENT ON COLUMN metastore.column_lineage.transformation_type IS 'transformations[].type (DIRECT, INDIRECT); empty when not given.';

COMMENT ON COLUMN metastore.column_lineage.transformation_subtype IS 'transformations[].subtype; empty when not given.';

COMMENT ON COLUMN metastore.column_lineage.edge_sha256 IS 'sha256 of the JSON array [output_field, input_field, transformation_type, transformation_subtype] as text.';

CREATE TABLE metastore.dataset_activity (
    dataset_id bigint NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    input_events bigint NOT NULL,
    output_events bigint NOT NULL,
    generation integer DEFAULT 1 NOT NULL,
    direct boolean DEFAULT false NOT NULL
);

COMMENT ON TABLE metastore.dataset_activity IS 'What events added to existing datasets (counts, eventTimes) and metastore.roll_up_datasets has not folded into metastore.datasets yet; metastore.datasets_view adds it. No foreign key: its check would lock the dataset row, which this table is here to avoid.';

COMMENT ON COLUMN metastore.dataset_activity.generation IS 'The generation (metastore.derive_state) of the events counted: datasets_view adds only the rows of the dataset''s own generation; a rebuild folds the newer ones in when it ends.';

COMMENT ON COLUMN metastore.dataset_activity.direct IS 'Some of the events counted name the dataset as an input, output or dataset, not only as a symlink.';

CREATE TABLE metastore.event_datasets (
    event_id bigint NOT NULL,
    dataset_id bigint NOT NULL,
    direction text NOT NULL,
    event_time timestamp with time zone NOT NULL,
    CONSTRAINT event_datasets_direction_check CHECK ((direction = ANY (ARRAY['input'::text, 'output'::text, 'none'::text])))
)
PARTITION BY RANGE (event_time);

COMMENT ON TABLE metastore.event_datasets IS 'Which event mentions which dataset: input (read), output (written), or none (the dataset of a DatasetEvent). Symlink identifiers are linked with the direction of the dataset that carries them. Partitioned by event_time like metastore.events, with the same daily partitions.';

COMMENT ON COLUMN metastore.event_datasets.event_id IS 'metastore.events.id of the event (with event_time, its primary key). No foreign key: one into a partitioned table would forbid dropping its partitions, and retention drops a day of events and of links together. store_event and backfill write links only for stored events.';

COMMENT ON COLUMN metastore.event_datasets.event_time IS 'The event''s event_time: the partition key, the same as the event''s.';

CREATE TABLE metastore.events (
    id bigint NOT NULL,
    payload jsonb NOT NULL,
    payload_sha256 bytea NOT NULL,
    event_kind text NOT NULL,
    event_type text,
    event_time timestamp with time zone NOT NULL,
    run_id text,
    job_namespace text,
    job_name text,
    producer text,
    schema_url text,
    received_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    source_kind text DEFAULT 'unauthenticated'::text NOT NULL,
    source_principal text,
    xact_id xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT events_event_kind_check CHECK ((event_kind = ANY (ARRAY['run'::text, 'job'::text, 'dataset'::text]))),
    CONSTRAINT events_principal_needs_kind CHECK (((source_principal IS NULL) OR (source_kind <> 'unauthenticated'::text))),
    CONSTRAINT events_source_kind_check CHECK ((source_kind = ANY (ARRAY['unauthenticated'::text, 'inferred'::text, 'authenticated'::text])))
)
PARTITION BY RANGE (event_time);

COMMENT ON TABLE metastore.events IS 'Every accepted OpenLineage event, verbatim as JSONB, append-only. One row per distinct event: a resent event equal as JSON is stored once. Partitioned by event_time, one partition per UTC day (metastore.create_partitions); whole days are dropped by metastore.apply_retention.';

COMMENT ON COLUMN metastore.events.payload IS 'The event as received (JSONB: key order and whitespace are not kept).';

COMMENT ON COLUMN metastore.events.payload_sha256 IS 'sha256 of payload::text; with event_time (equal for equal payloads) the de-duplication key.';

COMMENT ON COLUMN metastore.events.event_kind IS 'run (run+job), job (job only) or dataset (dataset only): the OpenLineage event kind.';

COMMENT ON COLUMN metastore.events.event_type IS 'eventType (START, RUNNING, COMPLETE, ABORT, FAIL, OTHER); null when the producer sent none.';

COMMENT ON COLUMN metastore.events.event_time IS 'eventTime; a time without a zone is read as UTC.';

COMMENT ON COLUMN metastore.events.run_id IS 'run.runId (text: producers do not all send UUIDs).';

COMMENT ON COLUMN metastore.events.received_at IS 'When this store committed the event.';

COMMENT ON COLUMN metastore.events.source_kind IS 'How the sender is known: unauthenticated (no authentication, the only kind today), inferred (derived from network facts such as a client certificate or address), authenticated (a verified principal). Reserved for when authentication exists.';

COMMENT ON COLUMN metastore.events.source_principal IS 'Who sent the event when known (e.g. a user or service account); null when unauthenticated.';

COMMENT ON COLUMN metastore.events.xact_id IS 'Id of the transaction that stored the event (pg_current_xact_id(); 0 for events stored before the feed existed). With id, the order of metastore.read_events: a page returns only rows whose transaction is below the reader''s snapshot xmin, all finished, so a cursor never skips a row that commits later. Kept when create_partitions moves a row out of the default partition.';

CREATE VIEW metastore.dataset_events_view AS
 SELECT dataset_id,
    event_id,
    direction,
    event_kind,
    event_type,
    event_time,
    run_id,
    job_namespace,
    job_name,
    received_at
   FROM (metastore.events e
     JOIN metastore.event_datasets l ON (((l.event_id = e.id) AND (l.event_time = e.event_time))));

COMMENT ON VIEW metastore.dataset_events_view IS 'Which events mention which dataset, with the event''s header.';

CREATE TABLE metastore.dataset_schema_versions (
    dataset_id bigint NOT NULL,
    fields_sha256 bytea NOT NULL,
    fields jsonb NOT NULL,
    first_event_id bigint NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    generation integer DEFAULT 1 NOT NULL
);

COMMENT ON TABLE metastore.dataset_schema_versions IS 'Each distinct field list (schema facet) a dataset was seen with, once: the version with the latest last_seen is the current schema.';

COMMENT ON COLUMN metastore.dataset_schema_versions.fields_sha256 IS 'sha256 of fields::text: the version''s key.';

COMMENT ON COLUMN metastore.dataset_schema_versions.fields IS 'The schema facet''s "fields" array as sent (name, type, description, nested "fields").';

COMMENT ON COLUMN metastore.dataset_schema_versions.first_event_id IS 'metastore.events.id of the earliest event (by eventTime) that carried this field list.';

COMMENT ON COLUMN metastore.dataset_schema_versions.first_seen IS 'Earliest eventTime with this field list.';

COMMENT ON COLUMN metastore.dataset_schema_versions.last_seen IS 'Latest eventTime with this field list.';

COMMENT ON COLUMN metastore.dataset_schema_versions.generation IS 'The generation (metastore.derive_state) of the events the row was derived from.';

CREATE TABLE metastore.dataset_symlinks (
    dataset_id bigint NOT NULL,
    symlink_id bigint NOT NULL,
    type text NOT NULL,
    generation integer DEFAULT 1 NOT NULL,
    CONSTRAINT dataset_symlinks_check CHECK ((dataset_id <> symlink_id))
);

COMMENT ON TABLE metastore.dataset_symlinks IS 'symlinks facet: dataset_id carries an identifier naming symlink_id (type as sent, e.g. TABLE; empty when absent).';

COMMENT ON COLUMN metastore.dataset_symlinks.generation IS 'The latest generation (metastore.derive_state) of an event that names the symlink.';

CREATE VIEW metastore.dataset_symlinks_view AS
 SELECT dataset_id,
    symlink_id,
    type
   FROM metastore.dataset_symlinks s;

COMMENT ON VIEW metastore.dataset_symlinks_view IS 'dataset_id carries a symlinks-facet identifier naming symlink_id.';

CREATE TABLE metastore.datasets (
    id bigint NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    scheme text GENERATED ALWAYS AS (
CASE
    WHEN (strpos(namespace, '://'::text) > 1) THEN lower(split_part(namespace, '://'::text, 1))
    ELSE NULL::text
END) STORED,
    authority text GENERATED ALWAYS AS (
CASE
    WHEN (strpos(namespace, '://'::text) > 1) THEN split_part(substr(namespace, (strpos(namespace, '://'::text) + 3)), '/'::text, 1)
    ELSE NULL::text
END) STORED,
    kind text NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    input_events bigint DEFAULT 0 NOT NULL,
    output_events bigint DEFAULT 0 NOT NULL,
    name_key bytea GENERATED ALWAYS AS (sha256(metastore.dataset_key(namespace, name))) STORED,
    generation integer DEFAULT 1 NOT NULL,
    CONSTRAINT datasets_input_events_check CHECK ((input_events >= 0)),
    CONSTRAINT datasets_kind_check CHECK ((kind = ANY (ARRAY['dataset'::text, 'symlink'::text]))),
    CONSTRAINT datasets_output_events_check CHECK ((output_events >= 0))
);

COMMENT ON TABLE metastore.datasets IS 'Every dataset any stored event mentions, once per (namespace, name).';

COMMENT ON COLUMN metastore.datasets.scheme IS 'The namespace''s scheme: the text before "://", lower-cased; null when there is none.';

COMMENT ON COLUMN metastore.datasets.authority IS 'The namespace after "://" up to the first "/" (host[:port], bucket, ...); null without a scheme.';

COMMENT ON COLUMN metastore.datasets.kind IS 'dataset once it appeared as an input, output or DatasetEvent dataset; symlink while it is known only as a symlink identifier.';

COMMENT ON COLUMN metastore.datasets.first_seen IS 'Earliest eventTime of the events that mention it.';

COMMENT ON COLUMN metastore.datasets.last_seen IS 'Latest eventTime of the events that mention it.';

COMMENT ON COLUMN metastore.datasets.input_events IS 'How many events read it (links with direction input).';

COMMENT ON COLUMN metastore.datasets.output_events IS 'How many events wrote it (links with direction output).';

COMMENT ON COLUMN metastore.datasets.name_key IS 'sha256 of metastore.dataset_key(namespace, name): the unique key of a dataset, for names of any length.';

COMMENT ON COLUMN metastore.datasets.generation IS 'The generation (metastore.derive_state) whose events kind, first_seen, last_seen and the counts come from; dataset_activity of another generation is not part of them.';

ALTER TABLE metastore.datasets ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME metastore.datasets_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE VIEW metastore.datasets_view AS
 SELECT id,
    namespace,
    name,
    scheme,
    authority,
        CASE
            WHEN a.direct THEN 'dataset'::text
            ELSE d.kind
        END AS kind,
    LEAST(d.first_seen, a.first_seen) AS first_seen,
    GREATEST(d.last_seen, a.last_seen) AS last_seen,
    (d.input_events + COALESCE(a.input_events, (0)::bigint)) AS input_events,
    (d.output_events + COALESCE(a.output_events, (0)::bigint)) AS output_events
   FROM (metastore.datasets d
     LEFT JOIN LATERAL ( SELECT min(x.first_seen) AS first_seen,
            max(x.last_seen) AS last_seen,
            (sum(x.input_events))::bigint AS input_events,
            (sum(x.output_events))::bigint AS output_events,
            bool_or(x.direct) AS direct
           FROM metastore.dataset_activity x
          WHERE ((x.dataset_id = d.id) AND (x.generation = d.generation))) a ON (true));

COMMENT ON VIEW metastore.datasets_view IS 'Datasets as applications may read them.';

CREATE TABLE metastore.derive_state (
    singleton boolean DEFAULT true NOT NULL,
    generation integer DEFAULT 1 NOT NULL,
    rebuild text DEFAULT 'none'::text NOT NULL,
    rebuild_rules text,
    rebuild_high_id bigint,
    rebuild_started_at timestamp with time zone,
    rebuild_finished_at timestamp with time zone,
    CONSTRAINT derive_state_generation_check CHECK ((generation >= 1)),
    CONSTRAINT derive_state_rebuild_check CHECK ((rebuild = ANY (ARRAY['none'::text, 'starting'::text, 'deriving'::text, 'finishing'::text]))),
    CONSTRAINT derive_state_singleton_check CHECK (singleton)
);

COMMENT ON TABLE metastore.derive_state IS 'One row: the generation live ingest derives with, and the rebuild metastore.backfill runs, if any.';

COMMENT ON COLUMN metastore.derive_state.rebuild IS 'none; starting (the cut is taken, its ranges are not written yet); deriving (sessions of metastore.backfill derive the ranges of metastore.rebuild_ranges); finishing (every range is derived: the rows of older generations are being removed).';

COMMENT ON COLUMN metastore.derive_state.rebuild_rules IS 'md5 of the rule functions'' definitions when the rebuild started: a backfill that finds other rules deployed since starts the rebuild again.';

COMMENT ON COLUMN metastore.derive_state.rebuild_high_id IS 'The greatest event id when the rebuild started: events up to it are derived by the rebuild, later ones were derived by ingest in the new generation already.';

CREATE TABLE metastore.event_datasets_default (
    event_id bigint NOT NULL,
    dataset_id bigint NOT NULL,
    direction text NOT NULL,
    event_time timestamp with time zone NOT NULL,
    CONSTRAINT event_datasets_direction_check CHECK ((direction = ANY (ARRAY['input'::text, 'output'::text, 'none'::text])))
);

COMMENT ON TABLE metastore.event_datasets_default IS 'Links of the events in metastore.events_default.';

CREATE TABLE metastore.events_default (
    id bigint NOT NULL,
    payload jsonb NOT NULL,
    payload_sha256 bytea NOT NULL,
    event_kind text NOT NULL,
    event_type text,
    event_time timestamp with time zone NOT NULL,
    run_id text,
    job_namespace text,
    job_name text,
    producer text,
    schema_url text,
    received_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    source_kind text DEFAULT 'unauthenticated'::text NOT NULL,
    source_principal text,
    xact_id xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT events_event_kind_check CHECK ((event_kind = ANY (ARRAY['run'::text, 'job'::text, 'dataset'::text]))),
    CONSTRAINT events_principal_needs_kind CHECK (((source_principal IS NULL) OR (source_kind <> 'unauthenticated'::text))),
    CONSTRAINT events_source_kind_check CHECK ((source_kind = ANY (ARRAY['unauthenticated'::text, 'inferred'::text, 'authenticated'::text])))
);

COMMENT ON TABLE metastore.events_default IS 'Events whose eventTime falls on a day without a partition; metastore.create_partitions moves them into the day''s partition when it creates it.';

ALTER TABLE metastore.events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME metastore.events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE metastore.field_names (
    name text NOT NULL,
    name_key bytea GENERATED ALWAYS AS (sha256(metastore.dataset_key(''::text, name))) STORED
);

COMMENT ON TABLE metastore.field_names IS 'Top-level field names of metastore.dataset_schema_versions, for metastore.search (which datasets have one now: the versions themselves). Added by the trigger metastore.note_field_names; never removed.';

CREATE TABLE metastore.forward_refusals (
    target text NOT NULL,
    event_id bigint NOT NULL,
    cursor text NOT NULL,
    status integer NOT NULL,
    body text NOT NULL,
    refused_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    CONSTRAINT forward_refusals_body_check CHECK ((length(body) <= 2000)),
    CONSTRAINT forward_refusals_status_check CHECK ((status = ANY (ARRAY[400, 422])))
);

COMMENT ON TABLE metastore.forward_refusals IS 'Events a forwarding target refused with 400 or 422 (the answers that judge an event): its status and the start of its body (credentials of the URL replaced by ***), the newest 1000 per target. Written by metastore.forward_refused.';

CREATE TABLE metastore.forward_targets (
    name text NOT NULL,
    cursor text,
    sent bigint DEFAULT 0 NOT NULL,
    refused bigint DEFAULT 0 NOT NULL,
    lease_owner text,
    lease_until timestamp with time zone,
    last_error text,
    last_error_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    failing_since timestamp with time zone,
    CONSTRAINT forward_targets_failures_check CHECK ((failures >= 0)),
    CONSTRAINT forward_targets_refused_check CHECK ((refused >= 0)),
    CONSTRAINT forward_targets_sent_check CHECK ((sent >= 0))
);

COMMENT ON TABLE metastore.forward_targets IS 'Downstreams that receive every stored event (live forwarding), with the feed cursor of the last event each acknowledged and the lease of the forwarder sending to it. Written by metastore.forward_claim and forward_ack.';

COMMENT ON COLUMN metastore.forward_targets.cursor IS 'metastore.read_events cursor of the last event the target answered; null: from the first event.';

COMMENT ON COLUMN metastore.forward_targets.refused IS 'Events the target judged and refused (400 or 422): skipped, and kept in metastore.forward_refusals.';

COMMENT ON COLUMN metastore.forward_targets.failures IS 'Attempts in a row that ended without an answer judging the event (no answer, 401, 403, 404, 408, 413, 429, 5xx, a redirect not followed): retried with backoff; 0 once an attempt ends well.';

COMMENT ON COLUMN metastore.forward_targets.failing_since IS 'When the current run of failures began (null: none).';

CREATE TABLE metastore.group_roles (
    singleton boolean DEFAULT true NOT NULL,
    app_role text NOT NULL,
    reader_role text NOT NULL,
    chosen boolean NOT NULL,
    CONSTRAINT group_roles_check CHECK ((app_role <> reader_role)),
    CONSTRAINT group_roles_singleton_check CHECK (singleton)
);

COMMENT ON TABLE metastore.group_roles IS 'This installation''s two NOLOGIN group roles (one row): app_role (ingest and read) and reader_role (read only). Function grants go to them; set by `metastore db deploy --app-role/--reader-role`. chosen is false until a deploy has set them on a new installation (it then derives them from the database''s name).';

CREATE TABLE metastore.hidden (
    id bigint NOT NULL,
    kind text NOT NULL,
    namespace text NOT NULL,
    name text,
    name_key bytea GENERATED ALWAYS AS (sha256(metastore.dataset_key(namespace, COALESCE(name, ''::text)))) STORED,
    reason text,
    hidden_by text NOT NULL,
    hidden_at timestamp with time zone NOT NULL,
    unhidden_by text,
    unhidden_at timestamp with time zone,
    CONSTRAINT hidden_check CHECK (((kind = 'namespace'::text) = (name IS NULL))),
    CONSTRAINT hidden_check1 CHECK (((unhidden_by IS NULL) = (unhidden_at IS NULL))),
    CONSTRAINT hidden_kind_check CHECK ((kind = ANY (ARRAY['dataset'::text, 'job'::text, 'namespace'::text])))
);

COMMENT ON TABLE metastore.hidden IS 'Datasets, jobs and namespaces (every dataset and job of one) left out of every read function''s answer, by name: written by metastore.hide and metastore.unhide (owner only), with who and when. The events stay, and the event feed serves them.';

COMMENT ON COLUMN metastore.hidden.hidden_by IS 'session_user of the metastore.hide call.';

COMMENT ON COLUMN metastore.hidden.unhidden_at IS 'When metastore.unhide showed it again; null while hidden.';

ALTER TABLE metastore.hidden ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME metastore.hidden_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE metastore.jobs (
    id bigint NOT NULL,
    namespace text NOT NULL,
    name text NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    latest_sql text,
    sql_dialect text,
    sql_time timestamp with time zone,
    processing_type text,
    integration text,
    job_type text,
    type_time timestamp with time zone,
    name_key bytea GENERATED ALWAYS AS (sha256(metastore.dataset_key(namespace, name))) STORED,
    generation integer DEFAULT 1 NOT NULL
)
WITH (fillfactor='80');

COMMENT ON TABLE metastore.jobs IS 'Every job any stored run or job event names, once per (namespace, name). Derived by metastore.derive_job_run; rebuilt by metastore.backfill.';

COMMENT ON COLUMN metastore.jobs.first_seen IS 'Earliest eventTime of the events that name the job.';

COMMENT ON COLUMN metastore.jobs.last_seen IS 'Latest eventTime of the events that name the job.';

COMMENT ON COLUMN metastore.jobs.latest_sql IS 'sql job facet (query) of the event with the latest eventTime that carries one (ties: the greater text).';

COMMENT ON COLUMN metastore.jobs.sql_time IS 'eventTime of the event latest_sql comes from.';

COMMENT ON COLUMN metastore.jobs.job_type IS 'jobType job facet (processingType, integration, jobType) of the latest event that carries one.';

COMMENT ON COLUMN metastore.jobs.name_key IS 'sha256 of metastore.dataset_key(namespace, name): the unique key of a job, for names of any length.';

ALTER TABLE metastore.jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME metastore.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE VIEW metastore.jobs_view AS
 SELECT id,
    namespace,
    name,
    first_seen,
    last_seen,
    latest_sql,
    sql_dialect,
    processing_type,
    integration,
    job_type
   FROM metastore.jobs j;

COMMENT ON VIEW metastore.jobs_view IS 'Jobs as applications may read them.';

CREATE TABLE metastore.lineage_edges (
    upstream_id bigint NOT NULL,
    downstream_id bigint NOT NULL,
    job_sha256 bytea NOT NULL,
    job_namespace text NOT NULL,
    job_name text NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    generation integer DEFAULT 1 NOT NULL
);

COMMENT ON TABLE metastore.lineage_edges IS 'upstream_id was an input and downstream_id an output of one event of the job, once per (upstream, downstream, job), first_seen and last_seen to the hour (UTC). Symlink identifiers get no edges: lineage queries cross metastore.dataset_symlinks.';

COMMENT ON COLUMN metastore.lineage_edges.job_sha256 IS 'sha256 of the JSON array [job namespace, job name] as text: the job''s key.';

CREATE TABLE metastore.rebuild_ranges (
    low bigint NOT NULL,
    high bigint NOT NULL,
    CONSTRAINT rebuild_ranges_check CHECK ((high > low))
);

COMMENT ON TABLE metastore.rebuild_ranges IS 'The events the running rebuild has still to derive, as id ranges low < id <= high; a range''s row is deleted in the transaction that derived it, so a rebuild stopped at any point resumes where it was.';

CREATE TABLE metastore.rejected_events (
    id bigint NOT NULL,
    sqlstate text NOT NULL,
    reason text NOT NULL,
    received_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    source_kind text DEFAULT 'unauthenticated'::text NOT NULL,
    source_principal text,
    body_prefix text,
    body_bytes integer,
    body_sha256 bytea,
    CONSTRAINT rejected_events_body_bytes_check CHECK ((body_bytes >= 0)),
    CONSTRAINT rejected_events_principal_needs_kind CHECK (((source_principal IS NULL) OR (source_kind <> 'unauthenticated'::text))),
    CONSTRAINT rejected_events_source_kind_check CHECK ((source_kind = ANY (ARRAY['unauthenticated'::text, 'inferred'::text, 'authenticated'::text])))
);

COMMENT ON TABLE metastore.rejected_events IS 'Well-formed JSON that was refused as an OpenLineage event, and accepted events the service could not store (metastore.reject_event), with the reason: what a person needs to diagnose it, not the whole body. Bodies that are not JSON at all are refused without being kept. metastore.apply_retention removes rows received before its cutoff.';

COMMENT ON COLUMN metastore.rejected_events.sqlstate IS 'Why, as a SQLSTATE (the code the client was answered).';

COMMENT ON COLUMN metastore.rejected_events.reason IS 'Why, in words.';

COMMENT ON COLUMN metastore.rejected_events.source_kind IS 'As metastore.events.source_kind.';

COMMENT ON COLUMN metastore.rejected_events.source_principal IS 'As metastore.events.source_principal: null when unauthenticated.';

COMMENT ON COLUMN metastore.rejected_events.body_prefix IS 'The first 4096 bytes of the body as text (a character cut at the end is dropped; bytes that are not UTF-8 become U+FFFD). For an event of a batch: its JSON text as PostgreSQL prints it, and null when it holds numbers outside the double range (22003), whose text would be unbounded.';

COMMENT ON COLUMN metastore.rejected_events.body_bytes IS 'Size of the whole body in bytes (see body_prefix).';

COMMENT ON COLUMN metastore.rejected_events.body_sha256 IS 'sha256 of the whole body (see body_prefix).';

ALTER TABLE metastore.rejected_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME metastore.rejected_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE metastore.run_datasets (
    run_id bigint NOT NULL,
    dataset_id bigint NOT NULL,
    direction text NOT NULL,
    run_time timestamp with time zone NOT NULL,
    generation integer DEFAULT 1 NOT NULL,
    CONSTRAINT run_datasets_direction_check CHECK ((direction = ANY (ARRAY['input'::text, 'output'::text])))
);

COMMENT ON TABLE metastore.run_datasets IS 'run_id (metastore.runs.id) read (input) or wrote (output) dataset_id in one of its events. Derived by metastore.derive_run_datasets; rebuilt by metastore.backfill. No foreign keys (db/CONVENTIONS.md).';

COMMENT ON COLUMN metastore.run_datasets.run_time IS 'The run''s first_event_time (updated when it moves): the order of the runs timeline.';

COMMENT ON COLUMN metastore.run_datasets.generation IS 'The generation (metastore.derive_state) of the events the row was derived from.';

CREATE TABLE metastore.runs (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    run_id text NOT NULL,
    state text NOT NULL,
    state_class smallint NOT NULL,
    state_rank smallint NOT NULL,
    state_time timestamp with time zone NOT NULL,
    started_at timestamp with time zone,
    ended_at timestamp with time zone,
    duration interval GENERATED ALWAYS AS ((ended_at - started_at)) STORED,
    error_message text,
    trino_user text,
    trino_source text,
    trino_catalog text,
    trino_schema text,
    context_time timestamp with time zone,
    first_event_time timestamp with time zone NOT NULL,
    last_event_time timestamp with time zone NOT NULL,
    event_count bigint DEFAULT 0 NOT NULL,
    generation integer DEFAULT 1 NOT NULL,
    CONSTRAINT runs_event_count_check CHECK ((event_count >= 0)),
    CONSTRAINT runs_state_check CHECK ((state = ANY (ARRAY['START'::text, 'RUNNING'::text, 'COMPLETE'::text, 'FAIL'::text, 'ABORT'::text, 'OTHER'::text])))
)
WITH (fillfactor='80');

COMMENT ON TABLE metastore.runs IS 'Every run of a job, once per (job, run.runId), derived from its events by metastore.derive_job_run. Its datasets are those of its events (metastore.event_datasets, through metastore.events.run_id).';

COMMENT ON COLUMN metastore.runs.state IS 'Decided by the run''s events, whatever their order: a terminal event (COMPLETE, FAIL, ABORT) wins over START and RUNNING, which win over OTHER (or no eventType); within a class the latest eventTime wins; at an equal eventTime FAIL > ABORT > COMPLETE and RUNNING > START, then the greater error message.';

COMMENT ON COLUMN metastore.runs.state_class IS 'The class of state, the first part of its key: 2 COMPLETE, FAIL or ABORT; 1 START or RUNNING; 0 OTHER.';

COMMENT ON COLUMN metastore.runs.state_rank IS 'The order of state at an equal eventTime, the third part of its key: FAIL 3, ABORT 2, COMPLETE and RUNNING 1, START and OTHER 0.';

COMMENT ON COLUMN metastore.runs.state_time IS 'eventTime of the event that decided the state.';

COMMENT ON COLUMN metastore.runs.started_at IS 'Earliest eventTime of the run''s START events; null without one.';

COMMENT ON COLUMN metastore.runs.ended_at IS 'eventTime of the terminal event that decided the state; null while not ended.';

COMMENT ON COLUMN metastore.runs.error_message IS 'errorMessage run facet (message) of the event that decided the state.';

COMMENT ON COLUMN metastore.runs.trino_user IS 'trino_query_context run facet (user, source, catalog, schema) of the latest event that carries it; null where the facet lacks the key (Trino sends user and source from 477 on, catalog and schema not at all).';

COMMENT ON COLUMN metastore.runs.event_count IS 'How many stored events belong to the run.';

ALTER TABLE metastore.runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME metastore.runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE VIEW metastore.runs_view AS
 SELECT id,
    job_id,
    run_id,
    state,
    started_at,
    ended_at,
    duration,
    error_message,
    trino_user,
    trino_source,
    trino_catalog,
    trino_schema,
    first_event_time,
    last_event_time,
    event_count
   FROM metastore.runs r;

COMMENT ON VIEW metastore.runs_view IS 'Runs as applications may read them.';

CREATE TABLE metastore.settings (
    event_time_past interval DEFAULT '10 years'::interval NOT NULL,
    event_time_future interval DEFAULT '1 day'::interval NOT NULL,
    max_batch_events integer DEFAULT 100 NOT NULL,
    CONSTRAINT settings_event_time_future_check CHECK (((event_time_future >= '00:00:00'::interval) AND (event_time_future <= '1000 years'::interval))),
    CONSTRAINT settings_event_time_past_check CHECK (((event_time_past >= '00:00:00'::interval) AND (event_time_past <= '1000 years'::interval))),
    CONSTRAINT settings_max_batch_events_check CHECK (((max_batch_events >= 1) AND (max_batch_events <= 100000)))
);

COMMENT ON TABLE metastore.settings IS 'Ingest settings, one row: change them with UPDATE metastore.settings SET ... as the owner; they apply to the next statement. The row cannot be deleted, nor a second one added.';

COMMENT ON COLUMN metastore.settings.event_time_past IS 'An event whose eventTime is before now() - event_time_past is refused (SQLSTATE 22008) and kept in rejected_events. Default 10 years.';

COMMENT ON COLUMN metastore.settings.event_time_future IS 'An event whose eventTime is after now() + event_time_future is refused (SQLSTATE 22008) and kept in rejected_events. Default 1 day.';

COMMENT ON COLUMN metastore.settings.max_batch_events IS 'Most events one metastore.ingest_batch call takes; a larger batch is refused whole (SQLSTATE 54000, HTTP 413). Default 100: a batch of 100 Trino COMPLETE events (about 18 KB each) is stored well within the service''s ingest deadline of 1.5 s.';

CREATE TABLE metastore_migrations.schema_version (
    version bigint NOT NULL,
    description text NOT NULL,
    type metastore_migrations.schema_version_type DEFAULT 'auto'::metastore_migrations.schema_version_type NOT NULL,
    installed_by text NOT NULL,
    installed_on timestamp without time zone DEFAULT now() NOT NULL
);

ALTER TABLE ONLY metastore.event_datasets ATTACH PARTITION metastore.event_datasets_default DEFAULT;

ALTER TABLE ONLY metastore.events ATTACH PARTITION metastore.events_default DEFAULT;

ALTER TABLE ONLY metastore.column_lineage
    ADD CONSTRAINT column_lineage_key UNIQUE (output_dataset_id, input_dataset_id, edge_sha256);

ALTER TABLE ONLY metastore.dataset_schema_versions
    ADD CONSTRAINT dataset_schema_versions_pkey PRIMARY KEY (dataset_id, fields_sha256);

ALTER TABLE ONLY metastore.dataset_symlinks
    ADD CONSTRAINT dataset_symlinks_pkey PRIMARY KEY (dataset_id, symlink_id, type);

ALTER TABLE ONLY metastore.datasets
    ADD CONSTRAINT datasets_name_key_key UNIQUE (name_key);

ALTER TABLE ONLY metastore.datasets
    ADD CONSTRAINT datasets_pkey PRIMARY KEY (id);

ALTER TABLE ONLY metastore.derive_state
    ADD CONSTRAINT derive_state_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY metastore.event_datasets
    ADD CONSTRAINT event_datasets_pkey PRIMARY KEY (event_id, dataset_id, direction, event_time);

ALTER TABLE ONLY metastore.event_datasets_default
    ADD CONSTRAINT event_datasets_default_pkey PRIMARY KEY (event_id, dataset_id, direction, event_time);

ALTER TABLE ONLY metastore.events
    ADD CONSTRAINT events_payload_sha256_key UNIQUE (payload_sha256, event_time);

ALTER TABLE ONLY metastore.events_default
    ADD CONSTRAINT events_default_payload_sha256_event_time_key UNIQUE (payload_sha256, event_time);

ALTER TABLE ONLY metastore.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (id, event_time);

ALTER TABLE ONLY metastore.events_default
    ADD CONSTRAINT events_default_pkey PRIMARY KEY (id, event_time);

ALTER TABLE ONLY metastore.forward_refusals
    ADD CONSTRAINT forward_refusals_pkey PRIMARY KEY (target, event_id);

ALTER TABLE ONLY metastore.forward_targets
    ADD CONSTRAINT forward_targets_pkey PRIMARY KEY (name);

ALTER TABLE ONLY metastore.group_roles
    ADD CONSTRAINT group_roles_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY metastore.hidden
    ADD CONSTRAINT hidden_pkey PRIMARY KEY (id);

ALTER TABLE ONLY metastore.jobs
    ADD CONSTRAINT jobs_name_key_key UNIQUE (name_key);

ALTER TABLE ONLY metastore.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY metastore.lineage_edges
    ADD CONSTRAINT lineage_edges_pkey PRIMARY KEY (upstream_id, downstream_id, job_sha256);

ALTER TABLE ONLY metastore.rebuild_ranges
    ADD CONSTRAINT rebuild_ranges_pkey PRIMARY KEY (low);

ALTER TABLE ONLY metastore.rejected_events
    ADD CONSTRAINT rejected_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY metastore.run_datasets
    ADD CONSTRAINT run_datasets_pkey PRIMARY KEY (run_id, dataset_id, direction);

ALTER TABLE ONLY metastore.runs
    ADD CONSTRAINT runs_job_run_key UNIQUE (job_id, run_id);

ALTER TABLE ONLY metastore.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY metastore_migrations.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (version);

CREATE INDEX column_lineage_input_idx ON metastore.column_lineage USING btree (input_dataset_id, "left"(input_field, 200));

CREATE INDEX dataset_activity_dataset_idx ON metastore.dataset_activity USING btree (dataset_id);

CREATE INDEX dataset_schema_versions_names_idx ON metastore.dataset_schema_versions USING gin (jsonb_path_query_array(fields, '$[*]."name"'::jsonpath) jsonb_path_ops);

CREATE INDEX dataset_symlinks_symlink_idx ON metastore.dataset_symlinks USING btree (symlink_id);

CREATE INDEX datasets_name_trgm_idx ON metastore.datasets USING gin (lower(name) public.gin_trgm_ops);

COMMENT ON INDEX metastore.datasets_name_trgm_idx IS 'Trigram index of lower(name): serves the q filter of metastore.list_datasets (a substring of the name).';

CREATE INDEX datasets_order_idx ON metastore.datasets USING btree (substr(metastore.dataset_key(namespace, name), 1, 1024));

COMMENT ON INDEX metastore.datasets_order_idx IS 'The first 1024 bytes of metastore.dataset_key: (namespace, name) order for metastore.list_datasets.';

CREATE INDEX datasets_scheme_idx ON metastore.datasets USING btree ("left"(scheme, 200), substr(metastore.dataset_key(namespace, name), 1, 1024));

CREATE INDEX datasets_search_idx ON metastore.datasets USING btree (metastore.search_key(name));

COMMENT ON INDEX metastore.datasets_search_idx IS 'Exact and prefix name search (metastore.search).';

CREATE INDEX datasets_search_tail_idx ON metastore.datasets USING btree (metastore.search_key(metastore.name_tail(name))) WHERE ((strpos(name, '/'::text) > 0) OR (strpos(name, '.'::text) > 0));

COMMENT ON INDEX metastore.datasets_search_tail_idx IS 'Exact and prefix search of a name''s last part (metastore.search).';

CREATE INDEX event_datasets_dataset_idx ON ONLY metastore.event_datasets USING btree (dataset_id, event_time, event_id);

CREATE INDEX event_datasets_default_dataset_id_event_time_event_id_idx ON metastore.event_datasets_default USING btree (dataset_id, event_time, event_id);

CREATE INDEX events_event_time_idx ON ONLY metastore.events USING btree (event_time);

CREATE INDEX events_default_event_time_idx ON metastore.events_default USING btree (event_time);

CREATE INDEX events_job_idx ON ONLY metastore.events USING btree ("left"(job_namespace, 200), "left"(job_name, 400)) WHERE (job_name IS NOT NULL);

CREATE INDEX events_default_left_left1_idx ON metastore.events_default USING btree ("left"(job_namespace, 200), "left"(job_name, 400)) WHERE (job_name IS NOT NULL);

CREATE INDEX events_run_id_idx ON ONLY metastore.events USING btree (run_id) WHERE (run_id IS NOT NULL);

CREATE INDEX events_default_run_id_idx ON metastore.events_default USING btree (run_id) WHERE (run_id IS NOT NULL);

CREATE INDEX events_feed_idx ON ONLY metastore.events USING btree (xact_id, id);

CREATE INDEX events_default_xact_id_id_idx ON metastore.events_default USING btree (xact_id, id);

CREATE INDEX field_names_key_idx ON metastore.field_names USING btree (name_key);

CREATE INDEX field_names_name_trgm_idx ON metastore.field_names USING gin (lower(name) public.gin_trgm_ops);

COMMENT ON INDEX metastore.field_names_name_trgm_idx IS 'Trigram index of lower(name): substring search (metastore.search).';

CREATE INDEX field_names_search_idx ON metastore.field_names USING btree (metastore.search_key(name));

CREATE UNIQUE INDEX hidden_active_key ON metastore.hidden USING btree (kind, name_key) WHERE (unhidden_at IS NULL);

CREATE INDEX jobs_order_idx ON metastore.jobs USING btree (substr(metastore.dataset_key(namespace, name), 1, 1024));

CREATE INDEX jobs_search_idx ON metastore.jobs USING btree (metastore.search_key(name));

COMMENT ON INDEX metastore.jobs_search_idx IS 'Exact and prefix name search (metastore.search).';

CREATE INDEX jobs_search_tail_idx ON metastore.jobs USING btree (metastore.search_key(metastore.name_tail(name))) WHERE ((strpos(name, '/'::text) > 0) OR (strpos(name, '.'::text) > 0));

COMMENT ON INDEX metastore.jobs_search_tail_idx IS 'Exact and prefix search of a name''s last part (metastore.search).';

CREATE INDEX lineage_edges_downstream_idx ON metastore.lineage_edges USING btree (downstream_id, upstream_id, job_sha256);

CREATE INDEX rejected_events_received_at_idx ON metastore.rejected_events USING btree (received_at);

CREATE INDEX run_datasets_dataset_idx ON metastore.run_datasets USING btree (dataset_id, run_time, run_id);

CREATE INDEX runs_job_latest_idx ON metastore.runs USING btree (job_id, first_event_time DESC, id DESC);

CREATE INDEX runs_state_idx ON metastore.runs USING btree (state, first_event_time, id) WHERE (state <> 'COMPLETE'::text);

CREATE INDEX runs_time_idx ON metastore.runs USING btree (first_event_time, id);

COMMENT ON INDEX metastore.runs_time_idx IS 'The runs timeline (metastore.list_runs), newest first.';

CREATE INDEX runs_user_idx ON metastore.runs USING btree ("left"(trino_user, 200), first_event_time, id) WHERE (trino_user IS NOT NULL);

CREATE UNIQUE INDEX settings_one_row ON metastore.settings USING btree ((true));

ALTER INDEX metastore.event_datasets_dataset_idx ATTACH PARTITION metastore.event_datasets_default_dataset_id_event_time_event_id_idx;

ALTER INDEX metastore.event_datasets_pkey ATTACH PARTITION metastore.event_datasets_default_pkey;

ALTER INDEX metastore.events_event_time_idx ATTACH PARTITION metastore.events_default_event_time_idx;

ALTER INDEX metastore.events_job_idx ATTACH PARTITION metastore.events_default_left_left1_idx;

ALTER INDEX metastore.events_payload_sha256_key ATTACH PARTITION metastore.events_default_payload_sha256_event_time_key;

ALTER INDEX metastore.events_pkey ATTACH PARTITION metastore.events_default_pkey;

ALTER INDEX metastore.events_run_id_idx ATTACH PARTITION metastore.events_default_run_id_idx;

ALTER INDEX metastore.events_feed_idx ATTACH PARTITION metastore.events_default_xact_id_id_idx;

CREATE STATISTICS metastore.datasets_lower_name ON lower(name) FROM metastore.datasets;

COMMENT ON STATISTICS metastore.datasets_lower_name IS 'How common a substring of lower(name) is, for the plan of metastore.list_datasets with q.';

CREATE TRIGGER dataset_schema_versions_field_names AFTER INSERT ON metastore.dataset_schema_versions FOR EACH ROW EXECUTE FUNCTION metastore.note_field_names();

CREATE TRIGGER events_append_only BEFORE DELETE OR UPDATE ON metastore.events FOR EACH ROW EXECUTE FUNCTION metastore.forbid_change();

CREATE TRIGGER settings_keep_row BEFORE DELETE ON metastore.settings FOR EACH ROW EXECUTE FUNCTION metastore.settings_keep_row();

CREATE TRIGGER settings_keep_row_truncate BEFORE TRUNCATE ON metastore.settings FOR EACH STATEMENT EXECUTE FUNCTION metastore.settings_keep_row();

ALTER TABLE ONLY metastore.forward_refusals
    ADD CONSTRAINT forward_refusals_target_fkey FOREIGN KEY (target) REFERENCES metastore.forward_targets(name) ON UPDATE CASCADE ON DELETE CASCADE;

GRANT USAGE ON SCHEMA metastore TO metastore_app;
GRANT USAGE ON SCHEMA metastore TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.apply_retention(p_keep interval) FROM PUBLIC;

REVOKE ALL ON PROCEDURE metastore.backfill(IN p_batch_size integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.check_event(p_payload jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.check_source(p_source_kind text, p_source_principal text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.create_partitions(p_from date, p_days_ahead integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.dataset_aliases(p_ids bigint[], p_limit integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.dataset_key(p_namespace text, p_name text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.dataset_layer(p_id bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.dataset_lineage(p_id bigint, p_direction text, p_depth integer, p_node_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.dataset_lineage(p_id bigint, p_direction text, p_depth integer, p_node_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.dataset_lineage(p_id bigint, p_direction text, p_depth integer, p_node_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.dataset_runs(p_dataset_id bigint, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.dataset_runs(p_dataset_id bigint, p_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.dataset_runs(p_dataset_id bigint, p_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.dataset_summary(p_namespaces_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.dataset_summary(p_namespaces_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.dataset_summary(p_namespaces_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.datasets_with_field(p_field text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.datasets_with_field(p_field text, p_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.datasets_with_field(p_field text, p_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.datasets_with_field_among(p_ids bigint[], p_field text, p_limit integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.derive_datasets(p_event_ids bigint[], p_events metastore.valid_event[], p_roll_up boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.derive_generation() FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.derive_job_run(p_payloads jsonb[], p_events metastore.valid_event[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.derive_lineage(p_event_ids bigint[], p_payloads jsonb[], p_events metastore.valid_event[], p_dataset_ids jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.derive_run_datasets(p_events metastore.valid_event[], p_dataset_ids jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.ensure_partitions() FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.ensure_partitions() TO metastore_app;

REVOKE ALL ON FUNCTION metastore.event_kind(p_payload jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.expiring_days(p_keep interval) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.extract_datasets(p_payload jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.facet_text(p_value jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.feed_seq(p_cursor text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.feed_sequenced() FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.field_lineage(p_id bigint, p_field text, p_direction text, p_depth integer, p_node_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.field_lineage(p_id bigint, p_field text, p_direction text, p_depth integer, p_node_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.field_lineage(p_id bigint, p_field text, p_direction text, p_depth integer, p_node_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.fold_rebuilt_datasets(p_ids bigint[], p_generation integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.forbid_change() FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.forward_ack(p_target text, p_owner text, p_cursor text, p_sent integer, p_refused integer, p_error text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.forward_ack(p_target text, p_owner text, p_cursor text, p_sent integer, p_refused integer, p_error text) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.forward_claim(p_target text, p_owner text, p_lease_seconds integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.forward_claim(p_target text, p_owner text, p_lease_seconds integer) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.forward_key(p_url text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.forward_page(p_cursor text, p_limit integer, p_max_bytes integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.forward_page(p_cursor text, p_limit integer, p_max_bytes integer) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.forward_position(p_cursor text, OUT xact_id xid8, OUT event_id bigint) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.forward_refused(p_target text, p_owner text, p_event_id bigint, p_cursor text, p_status integer, p_body text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.forward_refused(p_target text, p_owner text, p_event_id bigint, p_cursor text, p_status integer, p_body text) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.forward_remove(p_target text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.forward_status() FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.forward_status() TO metastore_app;
GRANT ALL ON FUNCTION metastore.forward_status() TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.generation_greatest(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.generation_least(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.get_dataset(p_id bigint, p_events_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.get_dataset(p_id bigint, p_events_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.get_dataset(p_id bigint, p_events_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.get_job(p_id bigint, p_runs_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.get_job(p_id bigint, p_runs_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.get_job(p_id bigint, p_runs_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.get_run(p_id bigint) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.get_run(p_id bigint) TO metastore_app;
GRANT ALL ON FUNCTION metastore.get_run(p_id bigint) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.group_role(p_kind text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.hidden_list(p_all boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.hidden_names(OUT dataset_ids bigint[], OUT job_ids bigint[], OUT job_edge_keys bytea[], OUT namespaces text[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.hide(p_kind text, p_namespace text, p_name text, p_reason text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.ingest_batch(p_body bytea, p_source_kind text, p_source_principal text, OUT status text, OUT result jsonb) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.ingest_batch(p_body bytea, p_source_kind text, p_source_principal text, OUT status text, OUT result jsonb) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.ingest_checked(p_bodies bytea[], p_payloads jsonb[], p_checked metastore.checked_event[], p_source_kind text, p_source_principal text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.ingest_event(p_body bytea, p_source_kind text, p_source_principal text, OUT status text, OUT event_id bigint, OUT error_code text, OUT error_message text, OUT event_type text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.ingest_event(p_body bytea, p_source_kind text, p_source_principal text, OUT status text, OUT event_id bigint, OUT error_code text, OUT error_message text, OUT event_type text) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.ingest_events(p_bodies bytea[], p_source_kind text, p_source_principal text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.ingest_events(p_bodies bytea[], p_source_kind text, p_source_principal text) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.json_has_unique_keys(p_json text, p_parsed jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.json_text(p_value jsonb, p_path text, p_max_bytes integer, p_required boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.lineage_graph(p_id bigint, p_direction text, p_depth integer, p_node_limit integer, p_include text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.lineage_graph(p_id bigint, p_direction text, p_depth integer, p_node_limit integer, p_include text) TO metastore_app;
GRANT ALL ON FUNCTION metastore.lineage_graph(p_id bigint, p_direction text, p_depth integer, p_node_limit integer, p_include text) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.list_datasets(p_limit integer, p_cursor text, p_namespace text, p_scheme text, p_kind text, p_q text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.list_datasets(p_limit integer, p_cursor text, p_namespace text, p_scheme text, p_kind text, p_q text) TO metastore_app;
GRANT ALL ON FUNCTION metastore.list_datasets(p_limit integer, p_cursor text, p_namespace text, p_scheme text, p_kind text, p_q text) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text) TO metastore_app;
GRANT ALL ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text, p_sort text, p_state text, p_user text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text, p_sort text, p_state text, p_user text) TO metastore_app;
GRANT ALL ON FUNCTION metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text, p_sort text, p_state text, p_user text) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.list_namespaces(p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.list_namespaces(p_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.list_namespaces(p_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.list_runs(p_limit integer, p_cursor text, p_state text, p_user text, p_source text, p_job_namespace text, p_dataset_id bigint, p_from text, p_to text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.list_runs(p_limit integer, p_cursor text, p_state text, p_user text, p_source text, p_job_namespace text, p_dataset_id bigint, p_from text, p_to text) TO metastore_app;
GRANT ALL ON FUNCTION metastore.list_runs(p_limit integer, p_cursor text, p_state text, p_user text, p_source text, p_job_namespace text, p_dataset_id bigint, p_from text, p_to text) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.lock_events_briefly() FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.malformed_datasets(p_payload jsonb, p_item jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.mention_key(p_namespace text, p_name text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.name_tail(p_name text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.note_field_names() FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.partitions_ahead() FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.partitions_ahead() TO metastore_app;
GRANT ALL ON FUNCTION metastore.partitions_ahead() TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.read_event(p_body bytea, OUT payload jsonb, OUT checked metastore.checked_event) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.read_events(p_limit integer, p_cursor text, p_event_time_from text, p_event_time_to text, p_received_from text, p_received_to text, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.read_events(p_limit integer, p_cursor text, p_event_time_from text, p_event_time_to text, p_received_from text, p_received_to text, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) TO metastore_app;
GRANT ALL ON FUNCTION metastore.read_events(p_limit integer, p_cursor text, p_event_time_from text, p_event_time_to text, p_received_from text, p_received_to text, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.read_sequenced_events(p_limit integer, p_cursor text, p_event_time_from timestamp with time zone, p_event_time_to timestamp with time zone, p_received_from timestamp with time zone, p_received_to timestamp with time zone, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.record_rejection(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.reject_event(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.reject_event(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) TO metastore_app;

REVOKE ALL ON FUNCTION metastore.roll_up_datasets(p_dataset_ids bigint[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.schema_version() FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.schema_version() TO metastore_app;
GRANT ALL ON FUNCTION metastore.schema_version() TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.search(p_q text, p_limit integer) FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.search(p_q text, p_limit integer) TO metastore_app;
GRANT ALL ON FUNCTION metastore.search(p_q text, p_limit integer) TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.search_key(p_text text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.search_substrings(p_lq text, p_like text, p_sample integer, p_scan integer, p_scan_jobs integer, p_hidden_datasets bigint[], p_hidden_jobs bigint[], p_hidden_namespaces text[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.sequence_feed() FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.sequence_feed() TO metastore_app;
GRANT ALL ON FUNCTION metastore.sequence_feed() TO metastore_reader;

REVOKE ALL ON FUNCTION metastore.settings_keep_row() FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.store_events(p_payloads jsonb[], p_events metastore.valid_event[], p_source_kind text, p_source_principal text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.unhide(p_kind text, p_namespace text, p_name text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.use_group_roles(p_app text, p_reader text) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.validate_event(p_payload jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION metastore.write_probe() FROM PUBLIC;
GRANT ALL ON FUNCTION metastore.write_probe() TO metastore_app;

GRANT SELECT ON TABLE metastore.dataset_events_view TO metastore_app;
GRANT SELECT ON TABLE metastore.dataset_events_view TO metastore_reader;

GRANT SELECT ON TABLE metastore.dataset_symlinks_view TO metastore_app;
GRANT SELECT ON TABLE metastore.dataset_symlinks_view TO metastore_reader;

GRANT SELECT ON TABLE metastore.datasets_view TO metastore_app;
GRANT SELECT ON TABLE metastore.datasets_view TO metastore_reader;

GRANT SELECT ON TABLE metastore.jobs_view TO metastore_app;
GRANT SELECT ON TABLE metastore.jobs_view TO metastore_reader;

GRANT SELECT ON TABLE metastore.runs_view TO metastore_app;
GRANT SELECT ON TABLE metastore.runs_view TO metastore_reader;
