-- Jobs and runs, derived from the stored events (metastore.derive_job_run, called by store_events
-- for every newly stored event and by backfill for all of them). One row per job and per run:
-- rows grow with jobs and runs, never with events or their facets.
--
-- Every derived value is a function of the set of a run's (or job's) events, whatever order they
-- arrived in: each is the minimum, the maximum, or the value of the event with the greatest key,
-- so applying the events one by one in any order, or again after a reset, gives the same row.
CREATE TABLE metastore.jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace        text        NOT NULL,
    name             text        NOT NULL,
    first_seen       timestamptz NOT NULL,
    last_seen        timestamptz NOT NULL,
    latest_sql       text,
    sql_dialect      text,
    sql_time         timestamptz,
    processing_type  text,
    integration      text,
    job_type         text,
    type_time        timestamptz,
    -- Job names are of any length, like dataset names (change 5): no btree holds them whole.
    name_key         bytea GENERATED ALWAYS AS (pg_catalog.sha256(metastore.dataset_key(namespace, name))) STORED,
    generation       integer     NOT NULL DEFAULT 1,
    CONSTRAINT jobs_name_key_key UNIQUE (name_key)
) WITH (fillfactor = 80);
-- (namespace, name) order for metastore.list_jobs, as datasets_order_idx for datasets.
CREATE INDEX jobs_order_idx ON metastore.jobs (pg_catalog.substr(metastore.dataset_key(namespace, name), 1, 1024));
COMMENT ON TABLE metastore.jobs IS
    'Every job any stored run or job event names, once per (namespace, name). Derived by '
    'metastore.derive_job_run; rebuilt by metastore.backfill.';
COMMENT ON COLUMN metastore.jobs.name_key IS
    'sha256 of metastore.dataset_key(namespace, name): the unique key of a job, for names of any length.';
COMMENT ON COLUMN metastore.jobs.first_seen IS 'Earliest eventTime of the events that name the job.';
COMMENT ON COLUMN metastore.jobs.last_seen IS 'Latest eventTime of the events that name the job.';
COMMENT ON COLUMN metastore.jobs.latest_sql IS
    'sql job facet (query) of the event with the latest eventTime that carries one (ties: the greater text).';
COMMENT ON COLUMN metastore.jobs.sql_time IS 'eventTime of the event latest_sql comes from.';
COMMENT ON COLUMN metastore.jobs.job_type IS
    'jobType job facet (processingType, integration, jobType) of the latest event that carries one.';

CREATE TABLE metastore.runs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- No foreign key, as on the other derived tables (change 6): runs are written only by
    -- metastore.derive_job_run with the ids its job upsert returned, and a job is deleted only by a
    -- rebuild, after its runs.
    job_id           bigint      NOT NULL,
    -- At most 256 characters (metastore.validate_event): the btree key below holds it whole.
    run_id           text        NOT NULL,
    state            text        NOT NULL CHECK (state IN ('START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER')),
    state_class      smallint    NOT NULL,
    state_rank       smallint    NOT NULL,
    state_time       timestamptz NOT NULL,
    started_at       timestamptz,
    ended_at         timestamptz,
    duration         interval GENERATED ALWAYS AS (ended_at - started_at) STORED,
    error_message    text,
    trino_user       text,
    trino_source     text,
    trino_catalog    text,
    trino_schema     text,
    context_time     timestamptz,
    first_event_time timestamptz NOT NULL,
    last_event_time  timestamptz NOT NULL,
    event_count      bigint      NOT NULL DEFAULT 0 CHECK (event_count >= 0),
    generation       integer     NOT NULL DEFAULT 1,
    CONSTRAINT runs_job_run_key UNIQUE (job_id, run_id)
) WITH (fillfactor = 80);
-- Room on each page (fillfactor) for the next event of a run or job: its update stays on the
-- page (HOT) and adds no index entries, as long as first_event_time does not move.
-- A job's latest runs (get_job, list_jobs).
CREATE INDEX runs_job_latest_idx ON metastore.runs (job_id, first_event_time DESC, id DESC);
COMMENT ON TABLE metastore.runs IS
    'Every run of a job, once per (job, run.runId), derived from its events by metastore.derive_job_run. '
    'Its datasets are those of its events (metastore.event_datasets, through metastore.events.run_id).';
COMMENT ON COLUMN metastore.runs.state IS
    'Decided by the run''s events, whatever their order: a terminal event (COMPLETE, FAIL, ABORT) wins over '
    'START and RUNNING, which win over OTHER (or no eventType); within a class the latest eventTime wins; '
    'at an equal eventTime FAIL > ABORT > COMPLETE and RUNNING > START, then the greater error message.';
COMMENT ON COLUMN metastore.runs.state_class IS
    'The class of state, the first part of its key: 2 COMPLETE, FAIL or ABORT; 1 START or RUNNING; 0 OTHER.';
COMMENT ON COLUMN metastore.runs.state_rank IS
    'The order of state at an equal eventTime, the third part of its key: FAIL 3, ABORT 2, COMPLETE and '
    'RUNNING 1, START and OTHER 0.';
COMMENT ON COLUMN metastore.runs.state_time IS 'eventTime of the event that decided the state.';
COMMENT ON COLUMN metastore.runs.started_at IS 'Earliest eventTime of the run''s START events; null without one.';
COMMENT ON COLUMN metastore.runs.ended_at IS 'eventTime of the terminal event that decided the state; null while not ended.';
COMMENT ON COLUMN metastore.runs.error_message IS 'errorMessage run facet (message) of the event that decided the state.';
COMMENT ON COLUMN metastore.runs.trino_user IS
    'trino_query_context run facet (user, source, catalog, schema) of the latest event that carries it; '
    'null where the facet lacks the key (Trino sends user and source from 477 on, catalog and schema not at all).';
COMMENT ON COLUMN metastore.runs.event_count IS 'How many stored events belong to the run.';

CREATE VIEW metastore.jobs_view AS
SELECT j.id, j.namespace, j.name, j.first_seen, j.last_seen, j.latest_sql, j.sql_dialect, j.processing_type,
       j.integration, j.job_type
  FROM metastore.jobs AS j;
COMMENT ON VIEW metastore.jobs_view IS 'Jobs as applications may read them.';

CREATE VIEW metastore.runs_view AS
SELECT r.id, r.job_id, r.run_id, r.state, r.started_at, r.ended_at, r.duration, r.error_message, r.trino_user,
       r.trino_source, r.trino_catalog, r.trino_schema, r.first_event_time, r.last_event_time, r.event_count
  FROM metastore.runs AS r;
COMMENT ON VIEW metastore.runs_view IS 'Runs as applications may read them.';

DO $grant$
BEGIN
    EXECUTE (SELECT pg_catalog.format('GRANT SELECT ON metastore.jobs_view, metastore.runs_view TO %I, %I',
                                      r.app_role, r.reader_role)
               FROM metastore.group_roles AS r);
END
$grant$;
