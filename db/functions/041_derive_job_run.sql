-- Jobs and runs from one event: the one rule, used by store_event for every newly stored event
-- and by backfill for every stored one. Each value it keeps is a minimum, a maximum, or the
-- value of the event with the greatest key (the ORDER BY ... LIMIT 1 below), so the rows are a
-- function of the set of events, whatever order they came in (COMPLETE before START, retries).
CREATE OR REPLACE FUNCTION metastore.derive_job_run(
    p_payload       jsonb,
    p_event_type    text,
    p_event_time    timestamptz,
    p_run_id        text,
    p_job_namespace text,
    p_job_name      text
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_job   jsonb := p_payload -> 'job' -> 'facets';
    v_run   jsonb := p_payload -> 'run' -> 'facets';
    v_ctx   jsonb := p_payload -> 'run' -> 'facets' -> 'trino_query_context';
    v_sql   text;
    v_state text;
    v_error text;
    v_job_id bigint;
BEGIN
    IF p_job_name IS NULL OR p_job_namespace IS NULL THEN
        RETURN;  -- a DatasetEvent: no job
    END IF;
    -- Facet values count only as JSON strings: anything else is not what the facet's spec says.
    IF jsonb_typeof(v_job -> 'sql' -> 'query') = 'string' THEN
        v_sql := v_job -> 'sql' ->> 'query';
    END IF;

    INSERT INTO metastore.jobs AS j (
        namespace, name, first_seen, last_seen, latest_sql, sql_dialect, sql_time,
        processing_type, integration, job_type, type_time)
    VALUES (
        p_job_namespace, p_job_name, p_event_time, p_event_time,
        v_sql,
        CASE WHEN v_sql IS NOT NULL AND jsonb_typeof(v_job -> 'sql' -> 'dialect') = 'string'
             THEN v_job -> 'sql' ->> 'dialect' END,
        CASE WHEN v_sql IS NOT NULL THEN p_event_time END,
        CASE WHEN jsonb_typeof(v_job -> 'jobType' -> 'processingType') = 'string'
             THEN v_job -> 'jobType' ->> 'processingType' END,
        CASE WHEN jsonb_typeof(v_job -> 'jobType' -> 'integration') = 'string'
             THEN v_job -> 'jobType' ->> 'integration' END,
        CASE WHEN jsonb_typeof(v_job -> 'jobType' -> 'jobType') = 'string'
             THEN v_job -> 'jobType' ->> 'jobType' END,
        CASE WHEN jsonb_typeof(v_job -> 'jobType') = 'object' THEN p_event_time END)
    ON CONFLICT (namespace, name) DO UPDATE
       SET first_seen = least(j.first_seen, excluded.first_seen),
           last_seen = greatest(j.last_seen, excluded.last_seen),
           (latest_sql, sql_dialect, sql_time) = (
               SELECT s.q, s.d, s.t
                 FROM (VALUES (j.latest_sql, j.sql_dialect, j.sql_time),
                              (excluded.latest_sql, excluded.sql_dialect, excluded.sql_time)) AS s (q, d, t)
                ORDER BY s.t DESC NULLS LAST, s.q COLLATE "C" DESC NULLS LAST, s.d COLLATE "C" DESC NULLS LAST
                LIMIT 1),
           (processing_type, integration, job_type, type_time) = (
               SELECT s.p, s.i, s.k, s.t
                 FROM (VALUES (j.processing_type, j.integration, j.job_type, j.type_time),
                              (excluded.processing_type, excluded.integration, excluded.job_type,
                               excluded.type_time)) AS s (p, i, k, t)
                ORDER BY s.t DESC NULLS LAST, s.p COLLATE "C" DESC NULLS LAST, s.i COLLATE "C" DESC NULLS LAST,
                         s.k COLLATE "C" DESC NULLS LAST
                LIMIT 1)
    RETURNING j.id INTO v_job_id;

    IF p_run_id IS NULL THEN
        RETURN;  -- a JobEvent: the job only
    END IF;
    v_state := CASE WHEN p_event_type IN ('START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT') THEN p_event_type
                    ELSE 'OTHER' END;
    IF jsonb_typeof(v_run -> 'errorMessage' -> 'message') = 'string' THEN
        v_error := v_run -> 'errorMessage' ->> 'message';
    END IF;

    INSERT INTO metastore.runs AS r (
        job_id, run_id, state, state_time, started_at, ended_at, error_message,
        trino_user, trino_source, trino_catalog, trino_schema, context_time,
        first_event_time, last_event_time, event_count)
    VALUES (
        v_job_id, p_run_id, v_state, p_event_time,
        CASE WHEN v_state = 'START' THEN p_event_time END,
        CASE WHEN v_state IN ('COMPLETE', 'FAIL', 'ABORT') THEN p_event_time END,
        v_error,
        CASE WHEN jsonb_typeof(v_ctx -> 'user') = 'string' THEN v_ctx ->> 'user' END,
        CASE WHEN jsonb_typeof(v_ctx -> 'source') = 'string' THEN v_ctx ->> 'source' END,
        CASE WHEN jsonb_typeof(v_ctx -> 'catalog') = 'string' THEN v_ctx ->> 'catalog' END,
        CASE WHEN jsonb_typeof(v_ctx -> 'schema') = 'string' THEN v_ctx ->> 'schema' END,
        CASE WHEN jsonb_typeof(v_ctx) = 'object' THEN p_event_time END,
        p_event_time, p_event_time, 1)
    ON CONFLICT (job_id, run_id) DO UPDATE
       SET -- The state: terminal (COMPLETE, FAIL, ABORT) over START and RUNNING over OTHER; then the
           -- latest eventTime; at an equal time FAIL > ABORT > COMPLETE, RUNNING > START; then the
           -- greater error message. ended_at and the error come with the event that decided it.
           (state, state_time, ended_at, error_message) = (
               SELECT s.st, s.t, s.e, s.m
                 FROM (VALUES (r.state, r.state_time, r.ended_at, r.error_message),
                              (excluded.state, excluded.state_time, excluded.ended_at, excluded.error_message))
                      AS s (st, t, e, m)
                ORDER BY CASE WHEN s.st IN ('COMPLETE', 'FAIL', 'ABORT') THEN 2
                              WHEN s.st IN ('START', 'RUNNING') THEN 1 ELSE 0 END DESC,
                         s.t DESC,
                         CASE s.st WHEN 'FAIL' THEN 3 WHEN 'ABORT' THEN 2 WHEN 'COMPLETE' THEN 1
                                   WHEN 'RUNNING' THEN 1 ELSE 0 END DESC,
                         s.m COLLATE "C" DESC NULLS LAST
                LIMIT 1),
           started_at = least(r.started_at, excluded.started_at),
           (trino_user, trino_source, trino_catalog, trino_schema, context_time) = (
               SELECT s.u, s.s, s.c, s.sc, s.t
                 FROM (VALUES (r.trino_user, r.trino_source, r.trino_catalog, r.trino_schema, r.context_time),
                              (excluded.trino_user, excluded.trino_source, excluded.trino_catalog,
                               excluded.trino_schema, excluded.context_time)) AS s (u, s, c, sc, t)
                ORDER BY s.t DESC NULLS LAST, s.u COLLATE "C" DESC NULLS LAST, s.s COLLATE "C" DESC NULLS LAST,
                         s.c COLLATE "C" DESC NULLS LAST, s.sc COLLATE "C" DESC NULLS LAST
                LIMIT 1),
           first_event_time = least(r.first_event_time, excluded.first_event_time),
           last_event_time = greatest(r.last_event_time, excluded.last_event_time),
           event_count = r.event_count + 1;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_job_run(jsonb, text, timestamptz, text, text, text) IS
    'Applies one stored event to metastore.jobs and metastore.runs (the event''s header as stored in '
    'metastore.events, and its payload for the sql, jobType, errorMessage and trino_query_context facets). '
    'Order-independent: the rows depend on the set of events only (see the comments of runs.state). '
    'Called by store_event for each newly stored event and by backfill; not for applications.';

REVOKE ALL ON FUNCTION metastore.derive_job_run(jsonb, text, timestamptz, text, text, text) FROM PUBLIC;
