-- The datasets each run read and wrote, from a set of stored events: called by
-- metastore.store_events and metastore.backfill right after metastore.derive_job_run, which made
-- the set's runs (and locked their rows: a run's rows here are written by one transaction at a time).
CREATE OR REPLACE FUNCTION metastore.derive_run_datasets(
    p_events      metastore.valid_event[],
    p_dataset_ids jsonb
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
-- Lookups by key only, as derive_lineage's (see there): a generic plan does them as well. The
-- planner guesses 100 rows for a jsonb set function and joined them to the whole table by hash (a
-- scan of every run's rows, growing with the store): a probe per run instead.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $fn$
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
$fn$;

COMMENT ON FUNCTION metastore.derive_run_datasets(metastore.valid_event[], jsonb) IS
    'Applies a set of stored events (p_events as metastore.validate_event read them) to metastore.run_datasets: '
    'each run''s inputs and outputs (not symlink identifiers), with p_dataset_ids the ids of the datasets they '
    'mention (as metastore.derive_datasets returns them), and each run''s first_event_time as run_time. Runs '
    'must exist (metastore.derive_job_run first, in the same transaction). A row of an older generation is '
    'replaced. Called by store_events and backfill; not for applications.';

REVOKE ALL ON FUNCTION metastore.derive_run_datasets(metastore.valid_event[], jsonb) FROM PUBLIC;
