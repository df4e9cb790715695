CREATE OR REPLACE FUNCTION metastore.dataset_runs(
    p_dataset_id bigint,
    p_limit      integer DEFAULT 20
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
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
$fn$;

COMMENT ON FUNCTION metastore.dataset_runs(bigint, integer) IS
    'The latest runs (at most p_limit, newest first) that read or wrote a dataset, among its newest '
    '4 * p_limit read and write links, each with its state, times, job and the job''s latest SQL: '
    '{"dataset_id", "runs": [...]}. A hidden dataset (metastore.hide) is not found, runs of hidden jobs are not '
    'listed. Error codes: P0002 no such dataset; 22023 limit outside 1..100.';

REVOKE ALL ON FUNCTION metastore.dataset_runs(bigint, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.dataset_runs(bigint, integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
