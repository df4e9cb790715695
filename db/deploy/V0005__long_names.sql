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
-- A SQL function that PostgreSQL inlines into the statements, index expressions and generated
-- column that use it (as PL/pgSQL it cost a call per dataset and job written or looked up), so no
-- SET clause: every function, operator and type is qualified (db/CONVENTIONS.md).
CREATE FUNCTION metastore.dataset_key(p_namespace text, p_name text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    -- The text's bytes in the database encoding: decode of the text with its backslashes
    -- doubled, which is immutable (convert_to is only stable, so no index could use it). Text
    -- never holds a zero byte: the separator makes the key injective and keeps the order.
    SELECT pg_catalog.decode(pg_catalog.replace(p_namespace, '\'::pg_catalog.text, '\\'::pg_catalog.text),
                             'escape'::pg_catalog.text)
           OPERATOR(pg_catalog.||) '\x00'::pg_catalog.bytea
           OPERATOR(pg_catalog.||) pg_catalog.decode(pg_catalog.replace(p_name, '\'::pg_catalog.text,
                                                                        '\\'::pg_catalog.text),
                                                     'escape'::pg_catalog.text)
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
    output_events bigint      NOT NULL,
    generation    integer     NOT NULL DEFAULT 1,
    direct        boolean     NOT NULL DEFAULT false
);
CREATE INDEX dataset_activity_dataset_idx ON metastore.dataset_activity (dataset_id);
COMMENT ON TABLE metastore.dataset_activity IS
    'What events added to existing datasets (counts, eventTimes) and metastore.roll_up_datasets has not folded '
    'into metastore.datasets yet; metastore.datasets_view adds it. No foreign key: its check would lock the '
    'dataset row, which this table is here to avoid.';

-- Generations of derived data: metastore.backfill rebuilds every derived table while ingest goes
-- on, in committed sets of events, from several sessions at once. A derived row carries the
-- generation of what it was derived from; the first contribution of a newer generation replaces
-- the row's values instead of merging into them, and what no event of the new generation reached
-- is removed when the rebuild ends. Live ingest derives with the current generation, so that what
-- it adds during a rebuild is part of the new one.
ALTER TABLE metastore.datasets ADD COLUMN generation integer NOT NULL DEFAULT 1;
ALTER TABLE metastore.dataset_symlinks ADD COLUMN generation integer NOT NULL DEFAULT 1;
COMMENT ON COLUMN metastore.datasets.generation IS
    'The generation (metastore.derive_state) whose events kind, first_seen, last_seen and the counts come '
    'from; dataset_activity of another generation is not part of them.';
COMMENT ON COLUMN metastore.dataset_symlinks.generation IS
    'The latest generation (metastore.derive_state) of an event that names the symlink.';
COMMENT ON COLUMN metastore.dataset_activity.generation IS
    'The generation (metastore.derive_state) of the events counted: datasets_view adds only the rows of the '
    'dataset''s own generation; a rebuild folds the newer ones in when it ends.';
COMMENT ON COLUMN metastore.dataset_activity.direct IS
    'Some of the events counted name the dataset as an input, output or dataset, not only as a symlink.';

-- No foreign keys from links and symlinks to datasets either, as on the tables change 6 adds: the
-- check of each row locks its dataset FOR KEY SHARE, a row lock taken (and WAL-logged) anew by every
-- transaction that links a popular table, and a MultiXact when several do at once; it cost 6 to 10
-- microseconds per link, more than the link's own insert. Links and symlinks are written only by
-- metastore.derive_datasets with the ids it looked up or inserted, and a dataset is deleted only
-- by a rebuild (metastore.backfill), and only when no link or symlink points at it. Attaching a
-- link partition no longer locks metastore.datasets.
ALTER TABLE metastore.event_datasets DROP CONSTRAINT event_datasets_dataset_id_fkey;
ALTER TABLE metastore.dataset_symlinks
    DROP CONSTRAINT dataset_symlinks_dataset_id_fkey,
    DROP CONSTRAINT dataset_symlinks_symlink_id_fkey;

CREATE TABLE metastore.derive_state (
    singleton           boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    generation          integer     NOT NULL DEFAULT 1 CHECK (generation >= 1),
    rebuild             text        NOT NULL DEFAULT 'none' CHECK (rebuild IN ('none', 'starting', 'deriving', 'finishing')),
    rebuild_rules       text,
    rebuild_high_id     bigint,
    rebuild_started_at  timestamptz,
    rebuild_finished_at timestamptz
);
INSERT INTO metastore.derive_state DEFAULT VALUES;
COMMENT ON TABLE metastore.derive_state IS
    'One row: the generation live ingest derives with, and the rebuild metastore.backfill runs, if any.';
COMMENT ON COLUMN metastore.derive_state.rebuild IS
    'none; starting (the cut is taken, its ranges are not written yet); deriving (sessions of '
    'metastore.backfill derive the ranges of metastore.rebuild_ranges); '
    'finishing (every range is derived: the rows of older generations are being removed).';
COMMENT ON COLUMN metastore.derive_state.rebuild_rules IS
    'md5 of the rule functions'' definitions when the rebuild started: a backfill that finds other rules '
    'deployed since starts the rebuild again.';
COMMENT ON COLUMN metastore.derive_state.rebuild_high_id IS
    'The greatest event id when the rebuild started: events up to it are derived by the rebuild, later '
    'ones were derived by ingest in the new generation already.';

CREATE TABLE metastore.rebuild_ranges (
    low  bigint PRIMARY KEY,
    high bigint NOT NULL,
    CHECK (high > low)
);
COMMENT ON TABLE metastore.rebuild_ranges IS
    'The events the running rebuild has still to derive, as id ranges low < id <= high; a range''s row is '
    'deleted in the transaction that derived it, so a rebuild stopped at any point resumes where it was.';

-- A dataset named directly by an event whose activity waits is a dataset already: derive_datasets
-- updates the kind of one known as a symlink, but only of one it read as such, and a rebuild's fold
-- may have just made it one.
CREATE OR REPLACE VIEW metastore.datasets_view AS
SELECT d.id, d.namespace, d.name, d.scheme, d.authority,
       CASE WHEN a.direct THEN 'dataset' ELSE d.kind END AS kind,
       least(d.first_seen, a.first_seen) AS first_seen, greatest(d.last_seen, a.last_seen) AS last_seen,
       d.input_events + coalesce(a.input_events, 0) AS input_events,
       d.output_events + coalesce(a.output_events, 0) AS output_events
  FROM metastore.datasets AS d
  LEFT JOIN LATERAL (SELECT pg_catalog.min(x.first_seen) AS first_seen, pg_catalog.max(x.last_seen) AS last_seen,
                            pg_catalog.sum(x.input_events)::bigint AS input_events,
                            pg_catalog.sum(x.output_events)::bigint AS output_events,
                            pg_catalog.bool_or(x.direct) AS direct
                       FROM metastore.dataset_activity AS x
                      WHERE x.dataset_id = d.id AND x.generation = d.generation) AS a ON true;
