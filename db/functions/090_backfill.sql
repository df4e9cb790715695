-- Rebuilds the derived tables from metastore.events while ingest goes on, in committed sets of
-- events, from as many sessions as call it at once.
--
-- A rebuild is a new generation (metastore.derive_state). It starts at a cut, under a SHARE lock on
-- metastore.events held for a few statements: every event stored until then is the rebuild's to
-- derive, as id ranges in metastore.rebuild_ranges; every event stored later is derived by ingest
-- in the new generation already. Each derivation replaces a row of an older generation with what
-- the new one says and merges into a row of its own, whatever order the sets come in, so each
-- event counts once, and a row is the old one until the rebuild first reaches it. Sessions take
-- ranges with SKIP LOCKED and delete a range's row in the transaction that derived it: a rebuild
-- stopped at any point resumes where it was at the next call. Each session folds the datasets'
-- activity once it runs out of ranges, and the last one removes what no event of the new
-- generation reached.
--
-- Locks. Every transaction of a session first locks the derive_state row: FOR SHARE to derive or
-- fold in the generation it finds there (none of its rows changes generation meanwhile), FOR
-- UPDATE to start a generation or to end one, and only then metastore.events, for the cut and the
-- end. (Its statements share their transaction's snapshot, taken by that first one: what must see
-- the writers a lock waited for is read by a function it calls, which takes its own.) So a cut waits for the range transactions under way, without holding ingest, then holds
-- ingest only while it records the cut; and a session of a generation that a newer one replaced
-- notices it at its next transaction and works for the newer one or leaves.
--
-- A procedure, not a function, so that it can commit between sets. No SET clause and no SECURITY
-- DEFINER: PostgreSQL forbids both with COMMIT inside. It runs with its caller's rights (the
-- owner's, as only the owner may call it), so it pins its search_path itself: set_config(..., true)
-- first in each of its transactions, before any other statement of that transaction is parsed (a
-- COMMIT ends a local setting). Functions are qualified too (db/CONVENTIONS.md). It turns JIT
-- compilation off the same way: its statements over sets of 1000 events cost more than
-- jit_above_cost, and compiling them cost more than running them
-- (tests/db/functions/test_backfill.py::test_no_statement_is_jit_compiled).
CREATE OR REPLACE PROCEDURE metastore.backfill(p_batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $fn$
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
$fn$;

COMMENT ON PROCEDURE metastore.backfill(integer) IS
    'Rebuilds datasets, dataset_activity, event_datasets, dataset_symlinks, dataset_schema_versions, '
    'lineage_edges, column_lineage, jobs, runs and run_datasets from metastore.events with the rules live ingest uses '
    '(metastore.derive_datasets, derive_lineage, derive_job_run, derive_run_datasets), while ingest goes on. Run it with CALL '
    'outside a transaction block, in one session or in several at once (they share the work). A call '
    'starts a rebuild (a new generation, at a cut taken under a brief SHARE lock on metastore.events) or '
    'joins the one under way (or leaves, when one with the same rules ended since it began), derives '
    'the events up to the cut p_batch_size (at most 1000) per transaction, and the last session out '
    'removes what no event reached; a rebuild stopped at any point resumes at the next call, and one whose rules a deploy changed starts again. Ids of datasets, jobs '
    'and runs are kept. Error codes: 22023 p_batch_size not positive; 55P03 the cut''s lock not obtained '
    'within about 2 s (retry).';

REVOKE ALL ON PROCEDURE metastore.backfill(integer) FROM PUBLIC;
