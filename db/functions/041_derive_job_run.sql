-- Jobs and runs from one event: the one rule, used by store_event for every newly stored event
-- and by backfill for every stored one. Each value it keeps is a minimum, a maximum, or comes
-- from the event with the greatest key (a ROW comparison below), so the rows are a function of
-- the set of events, whatever order they came in (COMPLETE before START, retries, duplicates).
-- Plain CASE expressions, not sub-selects: this runs for every event, and a sub-select costs a
-- plan node set up on every call.
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
    v_job      jsonb := p_payload -> 'job' -> 'facets';
    v_run      jsonb := p_payload -> 'run' -> 'facets';
    v_ctx      jsonb;
    v_type     jsonb;
    v_sql      text;
    v_dialect  text;
    v_state    text;
    v_class    smallint;
    v_rank     smallint;
    v_error    text;
    v_job_id   bigint;
BEGIN
    IF p_job_name IS NULL OR p_job_namespace IS NULL THEN
        RETURN;  -- a DatasetEvent: no job
    END IF;
    -- Callers (store_event, backfill) call this only where change 7 is deployed.
    -- Facet values count only as non-empty JSON strings (an empty one is as good as none, so that
    -- null and '' never tie in a comparison below).
    IF jsonb_typeof(v_job -> 'sql' -> 'query') = 'string' THEN
        v_sql := nullif(v_job -> 'sql' ->> 'query', '');
        IF v_sql IS NOT NULL AND jsonb_typeof(v_job -> 'sql' -> 'dialect') = 'string' THEN
            v_dialect := nullif(v_job -> 'sql' ->> 'dialect', '');
        END IF;
    END IF;
    IF jsonb_typeof(v_job -> 'jobType') = 'object' THEN
        v_type := v_job -> 'jobType';
    END IF;

    INSERT INTO metastore.jobs AS j (
        namespace, name, first_seen, last_seen, latest_sql, sql_dialect, sql_time,
        processing_type, integration, job_type, type_time)
    VALUES (
        p_job_namespace, p_job_name, p_event_time, p_event_time,
        v_sql, v_dialect, CASE WHEN v_sql IS NOT NULL THEN p_event_time END,
        CASE WHEN jsonb_typeof(v_type -> 'processingType') = 'string' THEN nullif(v_type ->> 'processingType', '') END,
        CASE WHEN jsonb_typeof(v_type -> 'integration') = 'string' THEN nullif(v_type ->> 'integration', '') END,
        CASE WHEN jsonb_typeof(v_type -> 'jobType') = 'string' THEN nullif(v_type ->> 'jobType', '') END,
        CASE WHEN v_type IS NOT NULL THEN p_event_time END)
    ON CONFLICT (name_key) DO UPDATE
       SET first_seen = least(j.first_seen, excluded.first_seen),
           last_seen = greatest(j.last_seen, excluded.last_seen),
           -- The sql facet of the latest eventTime; at an equal time the greater text, then dialect.
           -- A side without one has a null time: the comparison is null, the old values stay.
           (latest_sql, sql_dialect, sql_time) = ROW(
               CASE WHEN (excluded.sql_time, excluded.latest_sql COLLATE "C", coalesce(excluded.sql_dialect, '') COLLATE "C")
                         > (coalesce(j.sql_time, '-infinity'), coalesce(j.latest_sql, '') COLLATE "C",
                            coalesce(j.sql_dialect, '') COLLATE "C")
                    THEN excluded.latest_sql ELSE j.latest_sql END,
               CASE WHEN (excluded.sql_time, excluded.latest_sql COLLATE "C", coalesce(excluded.sql_dialect, '') COLLATE "C")
                         > (coalesce(j.sql_time, '-infinity'), coalesce(j.latest_sql, '') COLLATE "C",
                            coalesce(j.sql_dialect, '') COLLATE "C")
                    THEN excluded.sql_dialect ELSE j.sql_dialect END,
               greatest(j.sql_time, excluded.sql_time)),
           -- The jobType facet the same way.
           (processing_type, integration, job_type, type_time) = ROW(
               CASE WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                          coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                         > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                            coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                    THEN excluded.processing_type ELSE j.processing_type END,
               CASE WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                          coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                         > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                            coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                    THEN excluded.integration ELSE j.integration END,
               CASE WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                          coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                         > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                            coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                    THEN excluded.job_type ELSE j.job_type END,
               greatest(j.type_time, excluded.type_time))
    RETURNING j.id INTO v_job_id;

    IF p_run_id IS NULL THEN
        RETURN;  -- a JobEvent: the job only
    END IF;
    -- The state's key: (class, eventTime, rank, error message). Class: terminal (COMPLETE, FAIL,
    -- ABORT) 2 over START and RUNNING 1 over OTHER or no eventType 0. Rank, at an equal time:
    -- FAIL > ABORT > COMPLETE, RUNNING > START.
    v_state := CASE WHEN p_event_type IN ('START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT') THEN p_event_type
                    ELSE 'OTHER' END;
    v_class := CASE WHEN v_state IN ('COMPLETE', 'FAIL', 'ABORT') THEN 2 WHEN v_state = 'OTHER' THEN 0 ELSE 1 END;
    v_rank := CASE v_state WHEN 'FAIL' THEN 3 WHEN 'ABORT' THEN 2 WHEN 'COMPLETE' THEN 1 WHEN 'RUNNING' THEN 1
                           ELSE 0 END;
    IF jsonb_typeof(v_run -> 'errorMessage' -> 'message') = 'string' THEN
        v_error := nullif(v_run -> 'errorMessage' ->> 'message', '');
    END IF;
    IF jsonb_typeof(v_run -> 'trino_query_context') = 'object' THEN
        v_ctx := v_run -> 'trino_query_context';
    END IF;

    INSERT INTO metastore.runs AS r (
        job_id, run_id, state, state_class, state_rank, state_time, started_at, ended_at, error_message,
        trino_user, trino_source, trino_catalog, trino_schema, context_time,
        first_event_time, last_event_time, event_count)
    VALUES (
        v_job_id, p_run_id, v_state, v_class, v_rank, p_event_time,
        CASE WHEN v_state = 'START' THEN p_event_time END,
        CASE WHEN v_class = 2 THEN p_event_time END,
        v_error,
        CASE WHEN jsonb_typeof(v_ctx -> 'user') = 'string' THEN nullif(v_ctx ->> 'user', '') END,
        CASE WHEN jsonb_typeof(v_ctx -> 'source') = 'string' THEN nullif(v_ctx ->> 'source', '') END,
        CASE WHEN jsonb_typeof(v_ctx -> 'catalog') = 'string' THEN nullif(v_ctx ->> 'catalog', '') END,
        CASE WHEN jsonb_typeof(v_ctx -> 'schema') = 'string' THEN nullif(v_ctx ->> 'schema', '') END,
        CASE WHEN v_ctx IS NOT NULL THEN p_event_time END,
        p_event_time, p_event_time, 1)
    ON CONFLICT (job_id, run_id) DO UPDATE
       SET -- Everything of the state from the side with the greater key; ended_at and the error
           -- message come with the event that decided it.
           (state, state_class, state_rank, state_time, ended_at, error_message) = (
               SELECT w.state, w.state_class, w.state_rank, w.state_time, w.ended_at, w.error_message
                 FROM (VALUES (0, r.state, r.state_class, r.state_rank, r.state_time, r.ended_at, r.error_message),
                              (1, excluded.state, excluded.state_class, excluded.state_rank, excluded.state_time,
                               excluded.ended_at, excluded.error_message))
                      AS w (side, state, state_class, state_rank, state_time, ended_at, error_message)
                ORDER BY w.state_class DESC, w.state_time DESC, w.state_rank DESC,
                         coalesce(w.error_message, '') COLLATE "C" DESC, w.side  -- a tie keeps the stored side
                LIMIT 1),
           started_at = least(r.started_at, excluded.started_at),
           -- trino_query_context of the latest eventTime; at an equal time the greater values.
           (trino_user, trino_source, trino_catalog, trino_schema) = (
               SELECT w.trino_user, w.trino_source, w.trino_catalog, w.trino_schema
                 FROM (VALUES (0, r.context_time, r.trino_user, r.trino_source, r.trino_catalog, r.trino_schema),
                              (1, excluded.context_time, excluded.trino_user, excluded.trino_source,
                               excluded.trino_catalog, excluded.trino_schema))
                      AS w (side, context_time, trino_user, trino_source, trino_catalog, trino_schema)
                ORDER BY coalesce(w.context_time, '-infinity') DESC, coalesce(w.trino_user, '') COLLATE "C" DESC,
                         coalesce(w.trino_source, '') COLLATE "C" DESC, coalesce(w.trino_catalog, '') COLLATE "C" DESC,
                         coalesce(w.trino_schema, '') COLLATE "C" DESC, w.side
                LIMIT 1),
           context_time = greatest(r.context_time, excluded.context_time),
           first_event_time = least(r.first_event_time, excluded.first_event_time),
           last_event_time = greatest(r.last_event_time, excluded.last_event_time),
           event_count = r.event_count + 1;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_job_run(jsonb, text, timestamptz, text, text, text) IS
    'Applies one stored event to metastore.jobs and metastore.runs (the event''s header as stored in '
    'metastore.events, and its payload for the sql, jobType, errorMessage and trino_query_context facets). '
    'Order-independent: the rows depend on the set of events only (see the comment of runs.state). '
    'Called by store_event for each newly stored event and by backfill; not for applications.';

REVOKE ALL ON FUNCTION metastore.derive_job_run(jsonb, text, timestamptz, text, text, text) FROM PUBLIC;

-- TEMPORARY (until the set-based version lands): the set signature over the per-event one.
CREATE OR REPLACE FUNCTION metastore.derive_job_run(p_payloads jsonb[], p_events metastore.valid_event[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    PERFORM metastore.derive_job_run(u.payload, u.event_type, u.event_time, u.run_id, u.job_namespace, u.job_name)
       FROM ROWS FROM (unnest(p_payloads), unnest(p_events))
            AS u (payload, event_kind, event_type, event_time, run_id, job_namespace, job_name, producer, schema_url, mentions);
END
$fn$;
