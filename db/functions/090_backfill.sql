-- Rebuilds the derived tables from metastore.events. A procedure, not a function,
-- so that it can commit between batches: a function runs in one transaction.
-- No SET clause and no SECURITY DEFINER: PostgreSQL forbids both with COMMIT inside. It runs
-- with its caller's rights (the owner's, as only the owner may call it), so it pins its
-- search_path itself: set_config(..., true) at the start of each of its transactions, before
-- any statement of that transaction is parsed (a COMMIT ends a local setting). Functions are
-- qualified too (db/CONVENTIONS.md). It turns JIT compilation off the same way: its statements over
-- sets of 1000 events cost more than jit_above_cost, and compiling them took 0.6 s per statement per
-- set on PostgreSQL 15 with LLVM, five times what the whole backfill took without (tests/db/functions/
-- test_backfill.py::test_no_statement_is_jit_compiled).
CREATE OR REPLACE PROCEDURE metastore.backfill(p_batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $fn$
DECLARE
    v_last  bigint := 0;
    v_high  bigint;
    v_done  bigint := 0;
    -- Events per derivation call (at most p_batch_size): big enough that a statement's cost is shared
    -- by many events, small enough that a call's arrays stay in tens of MB. derive_job_run alone over
    -- 20 000 Trino START and COMPLETE events: 1.5-1.8 s in sets of 1000, 1.9-2.0 s of 5000.
    c_derive_set constant integer := 1000;
    v_layer    boolean;
    v_jobs     boolean;
    v_ids      bigint[];
    v_payloads jsonb[];
    v_events   metastore.valid_event[];
    v_ds_ids   bigint[];
    v_ds_ns    text[];
    v_ds_names text[];
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
    IF p_batch_size IS NULL OR p_batch_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'p_batch_size must be a positive number';
    END IF;

    DROP TABLE IF EXISTS pg_temp.backfill_seen, pg_temp.backfill_mentions;
    CREATE TEMP TABLE backfill_seen (event_id bigint PRIMARY KEY);
    CREATE TEMP TABLE backfill_mentions (
        event_id bigint, event_time timestamptz, namespace text, name text, direction text,
        symlink_of_namespace text, symlink_of_name text, symlink_type text);

    -- 1. Extract every stored event, a batch per transaction; live tables are untouched.
    LOOP
        SELECT pg_catalog.max(b.id) INTO v_high
          FROM (SELECT e.id FROM metastore.events AS e WHERE e.id > v_last ORDER BY e.id LIMIT p_batch_size) AS b;
        EXIT WHEN v_high IS NULL;
        INSERT INTO pg_temp.backfill_seen SELECT e.id FROM metastore.events AS e WHERE e.id > v_last AND e.id <= v_high;
        INSERT INTO pg_temp.backfill_mentions
        SELECT e.id, e.event_time, x.*
          FROM metastore.events AS e
         CROSS JOIN LATERAL metastore.extract_datasets(e.payload) AS x
         WHERE e.id > v_last AND e.id <= v_high;
        GET DIAGNOSTICS v_done = ROW_COUNT;
        v_last := v_high;
        RAISE NOTICE 'backfill: read events up to id %', v_last;
        COMMIT;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true), pg_catalog.set_config('jit', 'off', true);
    END LOOP;

    -- 2. Hold off new events while the rest is read and the result swapped in. The lock reaches
    -- every partition; metastore.create_partitions and apply_retention back off until it ends.
    LOCK TABLE metastore.events IN SHARE MODE;
    WITH late AS (
        INSERT INTO pg_temp.backfill_seen
        SELECT e.id FROM metastore.events AS e
         WHERE NOT EXISTS (SELECT FROM pg_temp.backfill_seen AS s WHERE s.event_id = e.id)
        RETURNING event_id)
    INSERT INTO pg_temp.backfill_mentions
    SELECT e.id, e.event_time, x.*
      FROM late JOIN metastore.events AS e ON e.id = late.event_id
     CROSS JOIN LATERAL metastore.extract_datasets(e.payload) AS x;

    -- 3. Datasets keep their ids; what no event mentions any more goes last. Their totals are
    -- recomputed whole: the activity that waited to be folded in is part of them.
    DELETE FROM metastore.dataset_activity;
    INSERT INTO metastore.datasets AS d (namespace, name, kind, first_seen, last_seen, input_events, output_events)
    SELECT m.namespace, m.name,
           CASE WHEN pg_catalog.bool_or(m.symlink_of_namespace IS NULL) THEN 'dataset' ELSE 'symlink' END,
           pg_catalog.min(m.event_time), pg_catalog.max(m.event_time),
           pg_catalog.count(DISTINCT m.event_id) FILTER (WHERE m.direction = 'input'),
           pg_catalog.count(DISTINCT m.event_id) FILTER (WHERE m.direction = 'output')
      FROM pg_temp.backfill_mentions AS m
     GROUP BY m.namespace, m.name
    ON CONFLICT (name_key) DO UPDATE
       SET kind = excluded.kind, first_seen = excluded.first_seen, last_seen = excluded.last_seen,
           input_events = excluded.input_events, output_events = excluded.output_events
     WHERE (d.kind, d.first_seen, d.last_seen, d.input_events, d.output_events)
           IS DISTINCT FROM (excluded.kind, excluded.first_seen, excluded.last_seen, excluded.input_events,
                             excluded.output_events);

    -- Links carry their event's event_time: the partition key, shared with metastore.events.
    -- In event order: the links' primary key is filled in order, and step 4 reads a set's datasets
    -- back by event id.
    CREATE TEMP TABLE backfill_links ON COMMIT DROP AS
    SELECT DISTINCT m.event_id, d.id AS dataset_id, m.direction, m.event_time
      FROM pg_temp.backfill_mentions AS m
      JOIN metastore.datasets AS d ON d.namespace = m.namespace AND d.name = m.name
     ORDER BY m.event_id, d.id, m.direction;
    DELETE FROM metastore.event_datasets AS t
     WHERE NOT EXISTS (SELECT FROM pg_temp.backfill_links AS n
                        WHERE n.event_id = t.event_id AND n.dataset_id = t.dataset_id AND n.direction = t.direction
                          AND n.event_time = t.event_time);
    INSERT INTO metastore.event_datasets (event_id, dataset_id, direction, event_time)
    SELECT n.event_id, n.dataset_id, n.direction, n.event_time FROM pg_temp.backfill_links AS n
     ORDER BY n.event_id, n.dataset_id, n.direction
    ON CONFLICT DO NOTHING;

    CREATE TEMP TABLE backfill_symlinks ON COMMIT DROP AS
    SELECT DISTINCT c.id AS dataset_id, s.id AS symlink_id, m.symlink_type AS type
      FROM pg_temp.backfill_mentions AS m
      JOIN metastore.datasets AS s ON s.namespace = m.namespace AND s.name = m.name
      JOIN metastore.datasets AS c ON c.namespace = m.symlink_of_namespace AND c.name = m.symlink_of_name
     WHERE m.symlink_of_namespace IS NOT NULL;
    DELETE FROM metastore.dataset_symlinks AS t
     WHERE NOT EXISTS (SELECT FROM pg_temp.backfill_symlinks AS n
                        WHERE n.dataset_id = t.dataset_id AND n.symlink_id = t.symlink_id AND n.type = t.type);
    INSERT INTO metastore.dataset_symlinks (dataset_id, symlink_id, type)
    SELECT n.dataset_id, n.symlink_id, n.type FROM pg_temp.backfill_symlinks AS n
    ON CONFLICT DO NOTHING;

    -- 4. Schema versions, lineage edges and column lineage, jobs and runs: recomputed from every event
    -- with the functions live ingest runs (metastore.derive_lineage, metastore.derive_job_run), a set
    -- of events per call, in id order as ingest saw them; any split into sets gives the same rows.
    -- Job and run rows are reset to "no event yet", so their ids are kept; what no event reached goes.
    -- (Short of V0006 and V0007, where db/functions are applied too, there are none.)
    v_layer := pg_catalog.to_regclass('metastore.column_lineage') IS NOT NULL;
    v_jobs := pg_catalog.to_regclass('metastore.runs') IS NOT NULL;
    IF v_layer THEN
        DELETE FROM metastore.column_lineage;
        DELETE FROM metastore.lineage_edges;
        DELETE FROM metastore.dataset_schema_versions;
    END IF;
    IF v_jobs THEN
        UPDATE metastore.runs
           SET state = 'OTHER', state_class = 0, state_rank = 0, state_time = '-infinity', started_at = NULL,
               ended_at = NULL, error_message = NULL, trino_user = NULL, trino_source = NULL, trino_catalog = NULL, trino_schema = NULL, context_time = NULL,
               first_event_time = 'infinity', last_event_time = '-infinity', event_count = 0;
        UPDATE metastore.jobs
           SET first_seen = 'infinity', last_seen = '-infinity', latest_sql = NULL, sql_dialect = NULL, sql_time = NULL,
               processing_type = NULL, integration = NULL, job_type = NULL, type_time = NULL;
    END IF;
    IF v_layer OR v_jobs THEN
        -- The mentions extracted in step 1, per event: no second extraction.
        CREATE INDEX ON pg_temp.backfill_mentions (event_id);
        CREATE INDEX ON pg_temp.backfill_links (event_id);
        v_last := 0;
        LOOP
            -- The next set's last id, from the ids read above (an index on a temporary table). A
            -- range of ids, not ORDER BY id LIMIT on events: PostgreSQL 15 planned that as a scan of
            -- every partition from the start for each set.
            SELECT pg_catalog.max(s.event_id) INTO v_high
              FROM (SELECT s.event_id FROM pg_temp.backfill_seen AS s WHERE s.event_id > v_last
                     ORDER BY s.event_id LIMIT least(p_batch_size, c_derive_set)) AS s;
            EXIT WHEN v_high IS NULL;
            SELECT pg_catalog.array_agg(e.id ORDER BY e.id), pg_catalog.array_agg(e.payload ORDER BY e.id),
                   pg_catalog.array_agg(ROW(e.event_kind, e.event_type, e.event_time, e.run_id, e.job_namespace,
                                            e.job_name, e.producer, e.schema_url,
                                            ARRAY(SELECT ROW(m.namespace, m.name, m.direction, m.symlink_of_namespace,
                                                             m.symlink_of_name, m.symlink_type)::metastore.dataset_mention
                                                    FROM pg_temp.backfill_mentions AS m WHERE m.event_id = e.id)
                                            )::metastore.valid_event ORDER BY e.id)
              INTO v_ids, v_payloads, v_events
              FROM metastore.events AS e
             WHERE e.id > v_last AND e.id <= v_high;
            v_last := v_high;
            -- None left in the range when retention dropped its day while step 1 read others.
            CONTINUE WHEN v_ids IS NULL;
            IF v_layer THEN
                -- The set's datasets, known from its links: derive_lineage need not look each
                -- mention up by its key again (the same datasets: links come from every mention).
                SELECT pg_catalog.array_agg(d.id), pg_catalog.array_agg(d.namespace), pg_catalog.array_agg(d.name)
                  INTO v_ds_ids, v_ds_ns, v_ds_names
                  FROM metastore.datasets AS d
                 WHERE d.id IN (SELECT l.dataset_id FROM pg_temp.backfill_links AS l
                                 WHERE l.event_id = ANY (v_ids));
                PERFORM metastore.derive_lineage(v_ids, v_payloads, v_events, v_ds_ids, v_ds_ns, v_ds_names);
            END IF;
            IF v_jobs THEN
                PERFORM metastore.derive_job_run(v_payloads, v_events);
            END IF;
        END LOOP;
    END IF;
    IF v_jobs THEN
        DELETE FROM metastore.runs AS r WHERE r.event_count = 0;
        DELETE FROM metastore.jobs AS j WHERE j.first_seen = 'infinity';
    END IF;

    DELETE FROM metastore.datasets AS d
     WHERE NOT EXISTS (SELECT FROM pg_temp.backfill_mentions AS m WHERE m.namespace = d.namespace AND m.name = d.name);

    DROP TABLE pg_temp.backfill_seen, pg_temp.backfill_mentions;
    COMMIT;
END
$fn$;

COMMENT ON PROCEDURE metastore.backfill(integer) IS
    'Rebuilds datasets, event_datasets, dataset_symlinks, dataset_schema_versions, lineage_edges, '
    'column_lineage, jobs and runs from metastore.events with the same rules as live ingest '
    '(metastore.extract_datasets, metastore.derive_lineage, metastore.derive_job_run). Run it with CALL '
    'outside a transaction block. Reads events in '
    'batches of p_batch_size, committing after each, so no transaction spans the whole table; the final '
    'step holds a SHARE lock on metastore.events (ingest waits) while it reads what arrived meanwhile and '
    'applies the result. Dataset ids are kept. After metastore.apply_retention it recomputes everything from '
    'the events that remain (datasets no remaining event mentions are removed). '
    'Error codes: 22023 p_batch_size not positive.';

REVOKE ALL ON PROCEDURE metastore.backfill(integer) FROM PUBLIC;
