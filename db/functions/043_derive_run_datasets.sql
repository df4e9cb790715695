-- The datasets each run read and wrote, from a set of stored events: called by
-- metastore.store_events and metastore.backfill right after metastore.derive_job_run, which made
-- the set's runs (and locked their rows: a run's rows here are written by one transaction at a time).
CREATE OR REPLACE FUNCTION metastore.derive_run_datasets(
    p_events      metastore.valid_event[],
    p_dataset_ids jsonb
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
-- Lookups by key only, as derive_lineage's (see there): a generic plan does them as well.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $fn$
DECLARE
    v_generation integer := metastore.derive_generation();
    v_runs       jsonb;
BEGIN
    -- The set's runs, by the JSON text of [job namespace, job name, run id]: a probe of jobs and one
    -- of runs per distinct run (callers call this only where change 11 is deployed, after change 7).
    SELECT jsonb_object_agg(jsonb_build_array(k.job_namespace, k.job_name, k.run_id)::text,
                            jsonb_build_array(r.id, r.first_event_time))
      INTO v_runs
      FROM (SELECT DISTINCT u.job_namespace, u.job_name, u.run_id
              FROM unnest(p_events) AS u
             WHERE u.run_id IS NOT NULL AND u.job_name IS NOT NULL AND u.job_namespace IS NOT NULL) AS k
      JOIN metastore.jobs AS j ON j.name_key = sha256(metastore.dataset_key(k.job_namespace, k.job_name))
      JOIN metastore.runs AS r ON r.job_id = j.id AND r.run_id = k.run_id;
    IF v_runs IS NULL THEN
        RETURN;
    END IF;

    -- Each event's inputs and outputs (a symlink identifier is the same data under another name:
    -- readers cross metastore.dataset_symlinks), in key order as every writer takes them. A row of
    -- an older generation is taken over (metastore.backfill rebuilds).
    IF p_dataset_ids IS NOT NULL AND p_dataset_ids <> '{}' THEN
        INSERT INTO metastore.run_datasets AS t (run_id, dataset_id, direction, run_time, generation)
        SELECT DISTINCT (x.run ->> 0)::bigint, x.dataset_id, x.direction, (x.run ->> 1)::timestamptz, v_generation
          FROM (SELECT v_runs -> jsonb_build_array(u.job_namespace, u.job_name, u.run_id)::text AS run,
                       (p_dataset_ids ->> jsonb_build_array(m.namespace, m.name)::text)::bigint AS dataset_id,
                       m.direction
                  FROM unnest(p_events) AS u
                 CROSS JOIN LATERAL unnest(u.mentions) AS m
                 WHERE u.run_id IS NOT NULL AND m.symlink_of_namespace IS NULL
                   AND m.direction IN ('input', 'output')) AS x
         WHERE x.run IS NOT NULL AND x.dataset_id IS NOT NULL
         ORDER BY 1, 2, 3
        ON CONFLICT (run_id, dataset_id, direction) DO UPDATE
           SET run_time = excluded.run_time, generation = excluded.generation
         WHERE t.generation <> excluded.generation OR t.run_time <> excluded.run_time;
    END IF;

    -- An event earlier than a run's first (a START after its COMPLETE) moves its first_event_time:
    -- its rows follow, so that the timeline of a dataset keeps the order of the runs timeline.
    UPDATE metastore.run_datasets AS t
       SET run_time = (r.value ->> 1)::timestamptz
      FROM jsonb_each(v_runs) AS r
     WHERE t.run_id = (r.value ->> 0)::bigint AND t.run_time <> (r.value ->> 1)::timestamptz;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_run_datasets(metastore.valid_event[], jsonb) IS
    'Applies a set of stored events (p_events as metastore.validate_event read them) to metastore.run_datasets: '
    'each run''s inputs and outputs (not symlink identifiers), with p_dataset_ids the ids of the datasets they '
    'mention (as metastore.derive_datasets returns them), and each run''s first_event_time as run_time. Runs '
    'must exist (metastore.derive_job_run first, in the same transaction). A row of an older generation is '
    'replaced. Called by store_events and backfill; not for applications.';

REVOKE ALL ON FUNCTION metastore.derive_run_datasets(metastore.valid_event[], jsonb) FROM PUBLIC;
