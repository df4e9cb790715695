-- Jobs and runs from a set of events: the one rule, used by store_events for the events it
-- stores and by backfill for every stored one, in sets. Each value it keeps is a minimum, a
-- maximum, or comes from the event with the greatest key, so the rows are a function of the set of
-- events, whatever order they came in (COMPLETE before START, retries, duplicates) and however
-- they are split into calls.
-- The signature of the previous release took one event; a database deployed by it still has it.
DROP FUNCTION IF EXISTS metastore.derive_job_run(jsonb, text, timestamptz, text, text, text);

CREATE OR REPLACE FUNCTION metastore.derive_job_run(
    p_payloads jsonb[],
    p_events   metastore.valid_event[]
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    -- A row of an older generation is replaced, not merged into (metastore.backfill rebuilds).
    v_generation integer := metastore.derive_generation();
BEGIN
    -- Aligned by position: a payload without its header (or the other way round) is a caller's bug.
    IF coalesce(cardinality(p_payloads), 0) <> coalesce(cardinality(p_events), 0) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'p_payloads and p_events must be of equal length';
    END IF;
    -- Callers (store_events, backfill) call this only where change 7 is deployed.
    --
    -- One statement: the set is first reduced to one row per job and one per run by the rule the
    -- upserts apply to a stored row and a new one (an ON CONFLICT DO UPDATE may not reach a row
    -- twice in one statement). Jobs go in (namespace, name) order and runs in (job, run id) order,
    -- so that concurrent calls wait on each other's rows in one order.
    WITH ev AS (
        -- Per event. Facet values count only as non-empty JSON strings (metastore.facet_text: an
        -- empty one is as good as none, so that null and '' never tie in a comparison below). #>
        -- walks the payload without copying the objects on the way.
        SELECT u.job_namespace COLLATE "C" AS namespace, u.job_name COLLATE "C" AS name,
               u.run_id COLLATE "C" AS run_id, u.event_time AS t,
               f.sql,
               CASE WHEN f.sql IS NOT NULL THEN metastore.facet_text(u.payload #> '{job,facets,sql,dialect}') END AS sql_dialect,
               CASE WHEN f.sql IS NOT NULL THEN u.event_time END AS sql_time,
               metastore.facet_text(u.payload #> '{job,facets,jobType,processingType}') AS processing_type,
               metastore.facet_text(u.payload #> '{job,facets,jobType,integration}') AS integration,
               metastore.facet_text(u.payload #> '{job,facets,jobType,jobType}') AS job_type,
               CASE WHEN jsonb_typeof(u.payload #> '{job,facets,jobType}') = 'object' THEN u.event_time END AS type_time,
               -- The state's key: (class, eventTime, rank, error message). Class: terminal (COMPLETE,
               -- FAIL, ABORT) 2 over START and RUNNING 1 over OTHER or no eventType 0. Rank, at an
               -- equal time: FAIL > ABORT > COMPLETE, RUNNING > START.
               f.state,
               CASE WHEN f.state IN ('COMPLETE', 'FAIL', 'ABORT') THEN 2 WHEN f.state = 'OTHER' THEN 0 ELSE 1 END AS state_class,
               CASE f.state WHEN 'FAIL' THEN 3 WHEN 'ABORT' THEN 2 WHEN 'COMPLETE' THEN 1 WHEN 'RUNNING' THEN 1
                            ELSE 0 END AS state_rank,
               metastore.facet_text(u.payload #> '{run,facets,errorMessage,message}') AS error_message,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,user}') AS trino_user,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,source}') AS trino_source,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,catalog}') AS trino_catalog,
               metastore.facet_text(u.payload #> '{run,facets,trino_query_context,schema}') AS trino_schema,
               CASE WHEN jsonb_typeof(u.payload #> '{run,facets,trino_query_context}') = 'object'
                    THEN u.event_time END AS context_time
          FROM unnest(p_payloads, p_events)
               AS u (payload)
         CROSS JOIN LATERAL (
                SELECT metastore.facet_text(u.payload #> '{job,facets,sql,query}'),
                       CASE WHEN u.event_type IN ('START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT') THEN u.event_type
                            ELSE 'OTHER' END) AS f (sql, state)
         WHERE u.job_name IS NOT NULL AND u.job_namespace IS NOT NULL  -- a DatasetEvent: no job
    ), job AS (
        INSERT INTO metastore.jobs AS j (
            namespace, name, first_seen, last_seen, latest_sql, sql_dialect, sql_time,
            processing_type, integration, job_type, type_time, generation)
        -- The sql facet of the latest eventTime; at an equal time the greater text, then dialect.
        -- The jobType facet the same way. Equal keys are equal values, so any of them may win; the
        -- values of a winner are picked as one array (one sort per group, not one per column).
        SELECT g.namespace, g.name, g.first_seen, g.last_seen, g.sql[1][1], g.sql[1][2], g.sql_time,
               g.type[1][1], g.type[1][2], g.type[1][3], g.type_time, v_generation
          FROM (SELECT ev.namespace, ev.name, min(ev.t) AS first_seen, max(ev.t) AS last_seen,
                       array_agg(ARRAY[ev.sql, ev.sql_dialect]
                                 ORDER BY ev.sql_time DESC, ev.sql COLLATE "C" DESC,
                                          coalesce(ev.sql_dialect, '') COLLATE "C" DESC)
                           FILTER (WHERE ev.sql IS NOT NULL) AS sql,
                       max(ev.sql_time) AS sql_time,
                       array_agg(ARRAY[ev.processing_type, ev.integration, ev.job_type]
                                 ORDER BY ev.type_time DESC, coalesce(ev.processing_type, '') COLLATE "C" DESC,
                                          coalesce(ev.integration, '') COLLATE "C" DESC,
                                          coalesce(ev.job_type, '') COLLATE "C" DESC)
                           FILTER (WHERE ev.type_time IS NOT NULL) AS type,
                       max(ev.type_time) AS type_time
                  FROM ev
                 GROUP BY ev.namespace, ev.name) AS g
         ORDER BY g.namespace, g.name
        ON CONFLICT (name_key) DO UPDATE
           -- A row of an older generation: the set's values replace it.
           SET first_seen = metastore.generation_least(j.generation, excluded.generation, j.first_seen, excluded.first_seen),
               last_seen = metastore.generation_greatest(j.generation, excluded.generation, j.last_seen, excluded.last_seen),
               -- A side without a facet has a null time: the comparison is null, the old values stay.
               (latest_sql, sql_dialect, sql_time) = ROW(
                   CASE WHEN j.generation <> excluded.generation THEN excluded.latest_sql
                        WHEN (excluded.sql_time, excluded.latest_sql COLLATE "C", coalesce(excluded.sql_dialect, '') COLLATE "C")
                             > (coalesce(j.sql_time, '-infinity'), coalesce(j.latest_sql, '') COLLATE "C",
                                coalesce(j.sql_dialect, '') COLLATE "C")
                        THEN excluded.latest_sql ELSE j.latest_sql END,
                   CASE WHEN j.generation <> excluded.generation THEN excluded.sql_dialect
                        WHEN (excluded.sql_time, excluded.latest_sql COLLATE "C", coalesce(excluded.sql_dialect, '') COLLATE "C")
                             > (coalesce(j.sql_time, '-infinity'), coalesce(j.latest_sql, '') COLLATE "C",
                                coalesce(j.sql_dialect, '') COLLATE "C")
                        THEN excluded.sql_dialect ELSE j.sql_dialect END,
                   metastore.generation_greatest(j.generation, excluded.generation, j.sql_time, excluded.sql_time)),
               (processing_type, integration, job_type, type_time) = ROW(
                   CASE WHEN j.generation <> excluded.generation THEN excluded.processing_type
                        WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                              coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                             > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                                coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                        THEN excluded.processing_type ELSE j.processing_type END,
                   CASE WHEN j.generation <> excluded.generation THEN excluded.integration
                        WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                              coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                             > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                                coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                        THEN excluded.integration ELSE j.integration END,
                   CASE WHEN j.generation <> excluded.generation THEN excluded.job_type
                        WHEN (excluded.type_time, coalesce(excluded.processing_type, '') COLLATE "C",
                              coalesce(excluded.integration, '') COLLATE "C", coalesce(excluded.job_type, '') COLLATE "C")
                             > (coalesce(j.type_time, '-infinity'), coalesce(j.processing_type, '') COLLATE "C",
                                coalesce(j.integration, '') COLLATE "C", coalesce(j.job_type, '') COLLATE "C")
                        THEN excluded.job_type ELSE j.job_type END,
                   metastore.generation_greatest(j.generation, excluded.generation, j.type_time, excluded.type_time)),
               generation = excluded.generation
        -- Every job of the set comes back (an update without WHERE): its runs find their job_id here.
        RETURNING j.id, j.namespace, j.name)
    INSERT INTO metastore.runs AS r (
        job_id, run_id, state, state_class, state_rank, state_time, started_at, ended_at, error_message,
        trino_user, trino_source, trino_catalog, trino_schema, context_time,
        first_event_time, last_event_time, event_count, generation)
    -- The state and its error message from the event with the greatest state key (equal keys are
    -- equal values), ended_at with it; its time is the latest of the highest class there is.
    -- trino_query_context of the latest eventTime; at an equal time the greater values. A JobEvent
    -- (no run id) has no run.
    SELECT w.job_id, w.run_id, w.state[1][1],
           CASE WHEN w.state[1][1] IN ('COMPLETE', 'FAIL', 'ABORT') THEN 2 WHEN w.state[1][1] = 'OTHER' THEN 0 ELSE 1 END,
           CASE w.state[1][1] WHEN 'FAIL' THEN 3 WHEN 'ABORT' THEN 2 WHEN 'COMPLETE' THEN 1 WHEN 'RUNNING' THEN 1
                              ELSE 0 END,
           w.state_time, w.started_at,
           CASE WHEN w.state[1][1] IN ('COMPLETE', 'FAIL', 'ABORT') THEN w.state_time END,
           w.state[1][2], w.ctx[1][1], w.ctx[1][2], w.ctx[1][3], w.ctx[1][4], w.context_time,
           w.first_event_time, w.last_event_time, w.event_count, v_generation
      FROM (SELECT job.id AS job_id, ev.run_id,
                   array_agg(ARRAY[ev.state, ev.error_message]
                             ORDER BY ev.state_class DESC, ev.t DESC, ev.state_rank DESC,
                                      coalesce(ev.error_message, '') COLLATE "C" DESC) AS state,
                   coalesce(max(ev.t) FILTER (WHERE ev.state_class = 2), max(ev.t) FILTER (WHERE ev.state_class = 1),
                            max(ev.t)) AS state_time,
                   min(ev.t) FILTER (WHERE ev.state = 'START') AS started_at,
                   array_agg(ARRAY[ev.trino_user, ev.trino_source, ev.trino_catalog, ev.trino_schema]
                             ORDER BY coalesce(ev.context_time, '-infinity') DESC,
                                      coalesce(ev.trino_user, '') COLLATE "C" DESC,
                                      coalesce(ev.trino_source, '') COLLATE "C" DESC,
                                      coalesce(ev.trino_catalog, '') COLLATE "C" DESC,
                                      coalesce(ev.trino_schema, '') COLLATE "C" DESC) AS ctx,
                   max(ev.context_time) AS context_time,
                   min(ev.t) AS first_event_time, max(ev.t) AS last_event_time, count(*) AS event_count
              FROM ev
              JOIN job ON job.namespace = ev.namespace AND job.name = ev.name
             WHERE ev.run_id IS NOT NULL
             GROUP BY job.id, ev.run_id) AS w
     ORDER BY w.job_id, w.run_id
    ON CONFLICT (job_id, run_id) DO UPDATE
       SET -- Everything of the state from the side with the greater key; ended_at and the error
           -- message come with the event that decided it. A row of an older generation is no side:
           -- the set's values replace it.
           (state, state_class, state_rank, state_time, ended_at, error_message) = (
               SELECT w.state, w.state_class, w.state_rank, w.state_time, w.ended_at, w.error_message
                 FROM (VALUES (0, r.state, r.state_class, r.state_rank, r.state_time, r.ended_at, r.error_message),
                              (1, excluded.state, excluded.state_class, excluded.state_rank, excluded.state_time,
                               excluded.ended_at, excluded.error_message))
                      AS w (side, state, state_class, state_rank, state_time, ended_at, error_message)
                WHERE w.side = 1 OR r.generation = excluded.generation
                ORDER BY w.state_class DESC, w.state_time DESC, w.state_rank DESC,
                         coalesce(w.error_message, '') COLLATE "C" DESC, w.side  -- a tie keeps the stored side
                LIMIT 1),
           started_at = metastore.generation_least(r.generation, excluded.generation, r.started_at, excluded.started_at),
           (trino_user, trino_source, trino_catalog, trino_schema) = (
               SELECT w.trino_user, w.trino_source, w.trino_catalog, w.trino_schema
                 FROM (VALUES (0, r.context_time, r.trino_user, r.trino_source, r.trino_catalog, r.trino_schema),
                              (1, excluded.context_time, excluded.trino_user, excluded.trino_source,
                               excluded.trino_catalog, excluded.trino_schema))
                      AS w (side, context_time, trino_user, trino_source, trino_catalog, trino_schema)
                WHERE w.side = 1 OR r.generation = excluded.generation
                ORDER BY coalesce(w.context_time, '-infinity') DESC, coalesce(w.trino_user, '') COLLATE "C" DESC,
                         coalesce(w.trino_source, '') COLLATE "C" DESC, coalesce(w.trino_catalog, '') COLLATE "C" DESC,
                         coalesce(w.trino_schema, '') COLLATE "C" DESC, w.side
                LIMIT 1),
           context_time = metastore.generation_greatest(r.generation, excluded.generation, r.context_time, excluded.context_time),
           first_event_time = metastore.generation_least(r.generation, excluded.generation, r.first_event_time, excluded.first_event_time),
           last_event_time = metastore.generation_greatest(r.generation, excluded.generation, r.last_event_time, excluded.last_event_time),
           event_count = CASE WHEN r.generation <> excluded.generation THEN excluded.event_count
                              ELSE r.event_count + excluded.event_count END,
           generation = excluded.generation;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_job_run(jsonb[], metastore.valid_event[]) IS
    'Applies a set of stored events to metastore.jobs and metastore.runs: p_payloads[i] is event i''s payload '
    '(for the sql, jobType, errorMessage and trino_query_context facets), p_events[i] its header as stored in '
    'metastore.events (mentions unused). Order-independent: the rows depend on the set of events only (see the '
    'comment of runs.state), whatever order they come in and however they are split into calls; a run''s '
    'event_count grows by its events in the set. A row of an older generation than the current one '
    '(metastore.derive_generation) is replaced, not merged into. Empty or null arrays do nothing. Called by store_events for '
    'each newly stored event and by backfill in batches; not for applications. '
    'Error codes: 22023 arrays of different lengths.';

REVOKE ALL ON FUNCTION metastore.derive_job_run(jsonb[], metastore.valid_event[]) FROM PUBLIC;
