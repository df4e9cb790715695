CREATE OR REPLACE FUNCTION metastore.get_job(
    p_id         bigint,
    p_runs_limit integer DEFAULT 50
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
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
$fn$;

COMMENT ON FUNCTION metastore.get_job(bigint, integer) IS
    'One job with its latest SQL (sql job facet), job type, the datasets its latest 1000 runs read (inputs) and '
    'wrote (outputs), at most 100 each (datasets_truncated: more), each with its symlinks both ways, and its '
    'latest p_runs_limit runs, newest first. A hidden job (metastore.hide) is not found, hidden datasets are not '
    'listed. Error codes: P0002 no such job; 22023 runs_limit outside 0..1000.';

REVOKE ALL ON FUNCTION metastore.get_job(bigint, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.get_job(bigint, integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
