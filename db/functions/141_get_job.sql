CREATE OR REPLACE FUNCTION metastore.get_job(
    p_id         bigint,
    p_runs_limit integer DEFAULT 50
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_job jsonb;
BEGIN
    IF p_runs_limit IS NULL OR p_runs_limit < 0 OR p_runs_limit > 1000 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('runs_limit must be from 0 to 1000, not %s', p_runs_limit);
    END IF;
    SELECT to_jsonb(j) INTO v_job FROM metastore.jobs_view AS j WHERE j.id = p_id;
    IF v_job IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no job has id %s', p_id);
    END IF;
    -- Its latest runs, newest first, through the (job_id, first_event_time, id) index.
    RETURN v_job || jsonb_build_object(
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
    'One job with its latest SQL (sql job facet), job type, and its latest p_runs_limit runs, newest first. '
    'Error codes: P0002 no such job; 22023 runs_limit outside 0..1000.';

REVOKE ALL ON FUNCTION metastore.get_job(bigint, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.get_job(bigint, integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
