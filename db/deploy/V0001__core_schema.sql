-- Core storage model: raw events (append-only) and the datasets derived from them.
-- Tables are for DBAs; the service and Cockpit use the functions and views only.

DO $roles$
BEGIN
    -- Group roles (NOLOGIN). A DBA may create them beforehand, in which case
    -- the deploying role needs no CREATEROLE. Login roles are granted membership.
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'metastore_app') THEN
        CREATE ROLE metastore_app NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'metastore_reader') THEN
        CREATE ROLE metastore_reader NOLOGIN;
    END IF;
END
$roles$;

CREATE SCHEMA metastore;
COMMENT ON SCHEMA metastore IS
    'Metadata Store: raw OpenLineage events and the datasets derived from them. '
    'Tables are for DBAs; applications use the functions and the *_view views.';

REVOKE ALL ON SCHEMA metastore FROM PUBLIC;
GRANT USAGE ON SCHEMA metastore TO metastore_app, metastore_reader;

-- Routines this role creates are not executable by PUBLIC unless granted. (Only the
-- global form can revoke; IN SCHEMA can only add.) Each function file revokes too.
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON ROUTINES FROM PUBLIC;

-- Partitioned by eventTime, one partition per UTC day (events_pYYYYMMDD, made by
-- metastore.create_partitions), so that retention drops whole days (metastore.apply_retention).
-- Rows outside the days created land in events_default until their day is created.
CREATE TABLE metastore.events (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    payload          jsonb       NOT NULL,
    payload_sha256   bytea       NOT NULL,
    event_kind       text        NOT NULL CHECK (event_kind IN ('run', 'job', 'dataset')),
    event_type       text,
    event_time       timestamptz NOT NULL,
    run_id           text,
    job_namespace    text,
    job_name         text,
    producer         text,
    schema_url       text,
    received_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    source_kind      text        NOT NULL DEFAULT 'unauthenticated'
                     CHECK (source_kind IN ('unauthenticated', 'inferred', 'authenticated')),
    source_principal text,
    -- A unique key of a partitioned table must hold the partition key. The identity keeps id
    -- unique across partitions; events equal as JSON have the same eventTime, hence the same
    -- partition, so (payload_sha256, event_time) de-duplicates across all of them.
    CONSTRAINT events_pkey PRIMARY KEY (id, event_time),
    CONSTRAINT events_payload_sha256_key UNIQUE (payload_sha256, event_time),
    CONSTRAINT events_principal_needs_kind
        CHECK (source_principal IS NULL OR source_kind <> 'unauthenticated')
) PARTITION BY RANGE (event_time);
CREATE TABLE metastore.events_default PARTITION OF metastore.events DEFAULT;
CREATE INDEX events_event_time_idx ON metastore.events (event_time);
CREATE INDEX events_run_id_idx ON metastore.events (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX events_job_idx ON metastore.events (job_namespace, job_name) WHERE job_name IS NOT NULL;

COMMENT ON TABLE metastore.events IS
    'Every accepted OpenLineage event, verbatim as JSONB, append-only. '
    'One row per distinct event: a resent event equal as JSON is stored once. '
    'Partitioned by event_time, one partition per UTC day (metastore.create_partitions); '
    'whole days are dropped by metastore.apply_retention.';
COMMENT ON TABLE metastore.events_default IS
    'Events whose eventTime falls on a day without a partition; metastore.create_partitions moves them '
    'into the day''s partition when it creates it.';
COMMENT ON COLUMN metastore.events.payload IS 'The event as received (JSONB: key order and whitespace are not kept).';
COMMENT ON COLUMN metastore.events.payload_sha256 IS
    'sha256 of payload::text; with event_time (equal for equal payloads) the de-duplication key.';
COMMENT ON COLUMN metastore.events.event_kind IS 'run (run+job), job (job only) or dataset (dataset only): the OpenLineage event kind.';
COMMENT ON COLUMN metastore.events.event_type IS 'eventType (START, RUNNING, COMPLETE, ABORT, FAIL, OTHER); null when the producer sent none.';
COMMENT ON COLUMN metastore.events.event_time IS 'eventTime; a time without a zone is read as UTC.';
COMMENT ON COLUMN metastore.events.run_id IS 'run.runId (text: producers do not all send UUIDs).';
COMMENT ON COLUMN metastore.events.received_at IS 'When this store committed the event.';
COMMENT ON COLUMN metastore.events.source_kind IS
    'How the sender is known: unauthenticated (no authentication, the only kind today), '
    'inferred (derived from network facts such as a client certificate or address), '
    'authenticated (a verified principal). Reserved for when authentication exists.';
COMMENT ON COLUMN metastore.events.source_principal IS
    'Who sent the event when known (e.g. a user or service account); null when unauthenticated.';

CREATE FUNCTION metastore.forbid_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '55000',
        MESSAGE = pg_catalog.format('%s.%s is append-only', TG_TABLE_SCHEMA, TG_TABLE_NAME),
        HINT = 'Raw events are history: they are never updated or deleted row by row.';
END
$fn$;
COMMENT ON FUNCTION metastore.forbid_change() IS 'Trigger: keeps a table append-only (SQLSTATE 55000).';

-- A row trigger of a partitioned table is cloned onto every partition, present and future.
CREATE TRIGGER events_append_only
    BEFORE UPDATE OR DELETE ON metastore.events
    FOR EACH ROW EXECUTE FUNCTION metastore.forbid_change();

CREATE TABLE metastore.rejected_events (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload          jsonb       NOT NULL,
    sqlstate         text        NOT NULL,
    reason           text        NOT NULL,
    received_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    source_kind      text        NOT NULL DEFAULT 'unauthenticated',
    source_principal text
);
CREATE INDEX rejected_events_received_at_idx ON metastore.rejected_events (received_at);

DO $lz4$
BEGIN
    -- lz4 compresses large events several times faster than the default pglz; servers built
    -- without it keep pglz.
    PERFORM pg_catalog.set_config('default_toast_compression', 'lz4', true);
    -- The parent's setting is what new partitions copy; an existing partition needs its own.
    ALTER TABLE metastore.events ALTER COLUMN payload SET COMPRESSION lz4;
    ALTER TABLE metastore.events_default ALTER COLUMN payload SET COMPRESSION lz4;
    ALTER TABLE metastore.rejected_events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN invalid_parameter_value OR feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server: events are compressed with pglz';
END
$lz4$;
COMMENT ON TABLE metastore.rejected_events IS
    'Well-formed JSON that was refused as an OpenLineage event, kept for inspection with the reason. '
    'Bodies that are not JSON at all are refused without being kept.';

CREATE TABLE metastore.datasets (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace  text        NOT NULL,
    name       text        NOT NULL,
    scheme     text GENERATED ALWAYS AS (
                   CASE WHEN pg_catalog.strpos(namespace, '://') > 1
                        THEN pg_catalog.lower(pg_catalog.split_part(namespace, '://', 1)) END
               ) STORED,
    authority  text GENERATED ALWAYS AS (
                   CASE WHEN pg_catalog.strpos(namespace, '://') > 1
                        THEN pg_catalog.split_part(
                                 pg_catalog.substr(namespace, pg_catalog.strpos(namespace, '://') + 3), '/', 1) END
               ) STORED,
    kind       text        NOT NULL CHECK (kind IN ('dataset', 'symlink')),
    first_seen timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL,
    input_events  bigint   NOT NULL DEFAULT 0 CHECK (input_events >= 0),
    output_events bigint   NOT NULL DEFAULT 0 CHECK (output_events >= 0),
    CONSTRAINT datasets_namespace_name_key UNIQUE (namespace, name)
);
CREATE INDEX datasets_scheme_idx ON metastore.datasets (scheme, namespace, name);
COMMENT ON TABLE metastore.datasets IS 'Every dataset any stored event mentions, once per (namespace, name).';
COMMENT ON COLUMN metastore.datasets.scheme IS 'The namespace''s scheme: the text before "://", lower-cased; null when there is none.';
COMMENT ON COLUMN metastore.datasets.authority IS 'The namespace after "://" up to the first "/" (host[:port], bucket, ...); null without a scheme.';
COMMENT ON COLUMN metastore.datasets.kind IS
    'dataset once it appeared as an input, output or DatasetEvent dataset; symlink while it is known only as a symlink identifier.';
COMMENT ON COLUMN metastore.datasets.first_seen IS 'Earliest eventTime of the events that mention it.';
COMMENT ON COLUMN metastore.datasets.last_seen IS 'Latest eventTime of the events that mention it.';
COMMENT ON COLUMN metastore.datasets.input_events IS 'How many events read it (links with direction input).';
COMMENT ON COLUMN metastore.datasets.output_events IS 'How many events wrote it (links with direction output).';

-- Partitioned like metastore.events (same days, event_datasets_pYYYYMMDD), so that retention
-- drops a day's links with the day's events.
CREATE TABLE metastore.event_datasets (
    event_id   bigint      NOT NULL,
    dataset_id bigint      NOT NULL REFERENCES metastore.datasets (id),
    direction  text        NOT NULL CHECK (direction IN ('input', 'output', 'none')),
    event_time timestamptz NOT NULL,
    CONSTRAINT event_datasets_pkey PRIMARY KEY (event_id, dataset_id, direction, event_time)
) PARTITION BY RANGE (event_time);
CREATE TABLE metastore.event_datasets_default PARTITION OF metastore.event_datasets DEFAULT;
-- A dataset's recent events: newest eventTime first within each day's partition.
CREATE INDEX event_datasets_dataset_idx ON metastore.event_datasets (dataset_id, event_time, event_id);
COMMENT ON TABLE metastore.event_datasets IS
    'Which event mentions which dataset: input (read), output (written), or none (the dataset of a DatasetEvent). '
    'Symlink identifiers are linked with the direction of the dataset that carries them. '
    'Partitioned by event_time like metastore.events, with the same daily partitions.';
COMMENT ON TABLE metastore.event_datasets_default IS
    'Links of the events in metastore.events_default.';
COMMENT ON COLUMN metastore.event_datasets.event_id IS
    'metastore.events.id of the event (with event_time, its primary key). No foreign key: one into a '
    'partitioned table would forbid dropping its partitions, and retention drops a day of events and '
    'of links together. store_event and backfill write links only for stored events.';
COMMENT ON COLUMN metastore.event_datasets.event_time IS
    'The event''s event_time: the partition key, the same as the event''s.';

CREATE TABLE metastore.dataset_symlinks (
    dataset_id bigint NOT NULL REFERENCES metastore.datasets (id),
    symlink_id bigint NOT NULL REFERENCES metastore.datasets (id),
    type       text   NOT NULL,
    PRIMARY KEY (dataset_id, symlink_id, type),
    CHECK (dataset_id <> symlink_id)
);
CREATE INDEX dataset_symlinks_symlink_idx ON metastore.dataset_symlinks (symlink_id);
COMMENT ON TABLE metastore.dataset_symlinks IS
    'symlinks facet: dataset_id carries an identifier naming symlink_id (type as sent, e.g. TABLE; empty when absent).';

CREATE TYPE metastore.dataset_mention AS (
    namespace            text,
    name                 text,
    direction            text,
    symlink_of_namespace text,
    symlink_of_name      text,
    symlink_type         text
);
COMMENT ON TYPE metastore.dataset_mention IS
    'One dataset an event mentions (metastore.extract_datasets); symlink_of_* name the dataset whose '
    'symlinks facet gave it, null for an input, output or DatasetEvent dataset itself.';

CREATE TYPE metastore.valid_event AS (
    event_kind    text,
    event_type    text,
    event_time    timestamptz,
    run_id        text,
    job_namespace text,
    job_name      text,
    producer      text,
    schema_url    text,
    mentions      metastore.dataset_mention[]
);
COMMENT ON TYPE metastore.valid_event IS
    'What metastore.validate_event read from an event that passed validation: the columns of '
    'metastore.events and the datasets it mentions.';

CREATE TYPE metastore.checked_event AS (
    valid         metastore.valid_event,
    error_code    text,
    error_message text
);
COMMENT ON TYPE metastore.checked_event IS
    'metastore.check_event''s answer: what a valid event says, or why it was refused (SQLSTATE, message).';

CREATE VIEW metastore.datasets_view AS
SELECT d.id, d.namespace, d.name, d.scheme, d.authority, d.kind, d.first_seen, d.last_seen,
       d.input_events, d.output_events
  FROM metastore.datasets AS d;
COMMENT ON VIEW metastore.datasets_view IS 'Datasets as applications may read them.';

-- events before event_datasets, the order in which ingest and retention lock them.
CREATE VIEW metastore.dataset_events_view AS
SELECT l.dataset_id, l.event_id, l.direction, e.event_kind, e.event_type, e.event_time,
       e.run_id, e.job_namespace, e.job_name, e.received_at
  FROM metastore.events AS e
  JOIN metastore.event_datasets AS l ON l.event_id = e.id AND l.event_time = e.event_time;
COMMENT ON VIEW metastore.dataset_events_view IS 'Which events mention which dataset, with the event''s header.';

CREATE VIEW metastore.dataset_symlinks_view AS
SELECT s.dataset_id, s.symlink_id, s.type
  FROM metastore.dataset_symlinks AS s;
COMMENT ON VIEW metastore.dataset_symlinks_view IS 'dataset_id carries a symlinks-facet identifier naming symlink_id.';

GRANT SELECT ON metastore.datasets_view, metastore.dataset_events_view, metastore.dataset_symlinks_view
    TO metastore_app, metastore_reader;
