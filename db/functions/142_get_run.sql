CREATE OR REPLACE FUNCTION metastore.get_run(p_id bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
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
$fn$;

COMMENT ON FUNCTION metastore.get_run(bigint) IS
    'One run: its state, times, error, Trino user and source, its job, its events (newest first, at most '
    '1000), the datasets they read (inputs) and wrote (outputs), the SQL of its latest event with an sql '
    'facet, and the run facets errorMessage, nominalTime, processing_engine, parent and trino_query_context '
    'as sent (each from the latest event that carries it). The run of a hidden job (metastore.hide) is not '
    'found, hidden datasets are not listed. Error codes: P0002 no such run.';

REVOKE ALL ON FUNCTION metastore.get_run(bigint) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.get_run(bigint) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
