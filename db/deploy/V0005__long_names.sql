-- Names of any length (issue 12). A namespace or name was refused over 1000 bytes, because the
-- (namespace, name) unique index, like any btree, holds at most about 2700 bytes per entry
-- (PostgreSQL's limit, after compression, which random text does not get). Object-store keys
-- reach 1024 bytes plus the bucket, HDFS paths are longer: no index now holds a whole name.
--
-- * Uniqueness: name_key, the sha256 of metastore.dataset_key(namespace, name), unique. Writers
--   say ON CONFLICT (name_key) and look datasets up by it.
-- * Order (metastore.list_datasets pages by it): dataset_key is the namespace's bytes, a zero
--   byte, the name's bytes, so its byte order is (namespace, name) in code point order (the
--   order of a C or C.UTF-8 collation), and its first 1024 bytes sort as the whole key does
--   wherever they differ. datasets_order_idx holds those; a page walks it and sorts only
--   keys that tie on all 1024 bytes.
-- * The scheme filter and the job filter of metastore.read_events get indexes on prefixes too.

-- Frozen: an index and a generated column hold its results, so it is defined here, not in
-- db/functions, and a change to it needs a new migration that rebuilds them (db/CONVENTIONS.md).
CREATE FUNCTION metastore.dataset_key(p_namespace text, p_name text) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- The text's bytes in the database encoding: decode of the text with its backslashes
    -- doubled, which is immutable (convert_to is only stable, so no index could use it). Text
    -- never holds a zero byte: the separator makes the key injective and keeps the order.
    RETURN pg_catalog.decode(pg_catalog.replace(p_namespace, '\', '\\'), 'escape') || '\x00'::bytea
        || pg_catalog.decode(pg_catalog.replace(p_name, '\', '\\'), 'escape');
END
$fn$;
COMMENT ON FUNCTION metastore.dataset_key(text, text) IS
    'The bytes of namespace, a zero byte, the bytes of name: one key per (namespace, name) whose byte order is '
    'theirs. metastore.datasets.name_key is its sha256; datasets_order_idx indexes its first 1024 bytes. Frozen '
    '(defined by change 5): indexes hold its results.';
REVOKE ALL ON FUNCTION metastore.dataset_key(text, text) FROM PUBLIC;

ALTER TABLE metastore.datasets
    ADD COLUMN name_key bytea GENERATED ALWAYS AS (pg_catalog.sha256(metastore.dataset_key(namespace, name))) STORED;
ALTER TABLE metastore.datasets ADD CONSTRAINT datasets_name_key_key UNIQUE (name_key);
ALTER TABLE metastore.datasets DROP CONSTRAINT datasets_namespace_name_key;
COMMENT ON COLUMN metastore.datasets.name_key IS
    'sha256 of metastore.dataset_key(namespace, name): the unique key of a dataset, for names of any length.';

CREATE INDEX datasets_order_idx ON metastore.datasets
    (pg_catalog.substr(metastore.dataset_key(namespace, name), 1, 1024));
COMMENT ON INDEX metastore.datasets_order_idx IS
    'The first 1024 bytes of metastore.dataset_key: (namespace, name) order for metastore.list_datasets.';

-- left() counts characters (up to 4 bytes each): 200 of the scheme and 1024 bytes of key fit.
DROP INDEX metastore.datasets_scheme_idx;
CREATE INDEX datasets_scheme_idx ON metastore.datasets
    (pg_catalog.left(scheme, 200), pg_catalog.substr(metastore.dataset_key(namespace, name), 1, 1024));

-- read_events filters on job_namespace and job_name: 200 + 400 characters, at most 2400 bytes.
DROP INDEX metastore.events_job_idx;
CREATE INDEX events_job_idx ON metastore.events (pg_catalog.left(job_namespace, 200), pg_catalog.left(job_name, 400))
    WHERE job_name IS NOT NULL;

-- Dataset counters off the hot path. store_event (now store_events) updated input_events, output_events and
-- last_seen of every dataset an event mentions, which row-locks it until commit: events that share
-- a dataset committed one after the other. 8 clients, one dataset, one durable commit per event
-- (python -m tests.db.bench_dedupe --old <checkout without this>, medians of 4 rounds, two runs):
-- 454 and 533 events/s before, 689 and 798 after. An event now
-- appends its part here instead, and metastore.roll_up_datasets folds it into the dataset from time
-- to time; datasets_view adds what is not folded yet, so readers see the same numbers.
CREATE TABLE metastore.dataset_activity (
    dataset_id    bigint      NOT NULL,
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    input_events  bigint      NOT NULL,
    output_events bigint      NOT NULL
);
CREATE INDEX dataset_activity_dataset_idx ON metastore.dataset_activity (dataset_id);
COMMENT ON TABLE metastore.dataset_activity IS
    'What events added to existing datasets (counts, eventTimes) and metastore.roll_up_datasets has not folded '
    'into metastore.datasets yet; metastore.datasets_view adds it. No foreign key: its check would lock the '
    'dataset row, which this table is here to avoid.';

CREATE OR REPLACE VIEW metastore.datasets_view AS
SELECT d.id, d.namespace, d.name, d.scheme, d.authority, d.kind,
       least(d.first_seen, a.first_seen) AS first_seen, greatest(d.last_seen, a.last_seen) AS last_seen,
       d.input_events + coalesce(a.input_events, 0) AS input_events,
       d.output_events + coalesce(a.output_events, 0) AS output_events
  FROM metastore.datasets AS d
  LEFT JOIN LATERAL (SELECT pg_catalog.min(x.first_seen) AS first_seen, pg_catalog.max(x.last_seen) AS last_seen,
                            pg_catalog.sum(x.input_events)::bigint AS input_events,
                            pg_catalog.sum(x.output_events)::bigint AS output_events
                       FROM metastore.dataset_activity AS x
                      WHERE x.dataset_id = d.id) AS a ON true;
