-- What a Trino user works with: runs as a timeline, the datasets each run read and wrote, one
-- search over dataset, job and field names, and a hide list the owner keeps.

-- Runs as a timeline, newest first: metastore.list_runs pages by (first_event_time, id), through
-- one of these for a filter that can be rare: a user's runs, the runs that did not complete (failed,
-- aborted, still running). A filter on the source, or on COMPLETE (most runs), walks the timeline.
-- first_event_time moves only when an earlier event of the run arrives; a run's START and then its
-- end change its state, an update that is not HOT (the state index's predicate reads it).
-- Ascending, walked backwards: new runs come last, where a btree fills its pages (in descending
-- order each new run would split a page in the middle: half-empty pages).
CREATE INDEX runs_time_idx ON metastore.runs (first_event_time, id);
CREATE INDEX runs_state_idx ON metastore.runs (state, first_event_time, id) WHERE state <> 'COMPLETE';
-- A user is text of any length (a btree entry holds at most about 2700 bytes): the first 200
-- characters, the whole value compared after.
CREATE INDEX runs_user_idx ON metastore.runs (pg_catalog.left(trino_user, 200), first_event_time, id)
    WHERE trino_user IS NOT NULL;
COMMENT ON INDEX metastore.runs_time_idx IS 'The runs timeline (metastore.list_runs), newest first.';

-- The datasets a run read and wrote, once per (run, dataset, direction): its events' inputs and
-- outputs (not their symlink identifiers), derived by metastore.derive_run_datasets from the same
-- sets of events as jobs and runs. run_time is the run's first_event_time, kept equal to it, so
-- that the runs of one dataset page in the timeline's order.
CREATE TABLE metastore.run_datasets (
    run_id     bigint      NOT NULL,
    dataset_id bigint      NOT NULL,
    direction  text        NOT NULL CHECK (direction IN ('input', 'output')),
    run_time   timestamptz NOT NULL,
    generation integer     NOT NULL DEFAULT 1,
    CONSTRAINT run_datasets_pkey PRIMARY KEY (run_id, dataset_id, direction)
);
CREATE INDEX run_datasets_dataset_idx ON metastore.run_datasets (dataset_id, run_time, run_id);
COMMENT ON TABLE metastore.run_datasets IS
    'run_id (metastore.runs.id) read (input) or wrote (output) dataset_id in one of its events. Derived by '
    'metastore.derive_run_datasets; rebuilt by metastore.backfill. No foreign keys (db/CONVENTIONS.md).';
COMMENT ON COLUMN metastore.run_datasets.run_time IS
    'The run''s first_event_time (updated when it moves): the order of the runs timeline.';
COMMENT ON COLUMN metastore.run_datasets.generation IS
    'The generation (metastore.derive_state) of the events the row was derived from.';

-- Search (metastore.search). Names in code point order of their lower case, as bytes (the first
-- 400), so that an exact name and a prefix are a range of an index, with no extension and whatever
-- the database's collation; and the last part of a dataset or job name (a table of
-- catalog.schema.table, a file of a path), which is what a user types. A substring is found
-- through the trigram indexes where pg_trgm exists.
--
-- Frozen with this change: indexes hold their results (db/CONVENTIONS.md). SQL functions PostgreSQL
-- inlines (no SET clause): every function and operator qualified.
CREATE FUNCTION metastore.search_key(p_text text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    -- metastore.dataset_key('', x) is a zero byte and the bytes of x.
    SELECT pg_catalog.substr(metastore.dataset_key(''::pg_catalog.text, pg_catalog.lower(p_text)), 2, 400)
$fn$;
COMMENT ON FUNCTION metastore.search_key(text) IS
    'The first 400 bytes of lower(p_text): the key of the search indexes, in code point order. Frozen '
    '(defined by change 9): indexes hold its results.';
REVOKE ALL ON FUNCTION metastore.search_key(text) FROM PUBLIC;

CREATE FUNCTION metastore.name_tail(p_name text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN pg_catalog.strpos(p_name, '/'::pg_catalog.text) OPERATOR(pg_catalog.>) 0
                THEN pg_catalog.split_part(p_name, '/'::pg_catalog.text, -1)
                ELSE pg_catalog.split_part(p_name, '.'::pg_catalog.text, -1) END
$fn$;
COMMENT ON FUNCTION metastore.name_tail(text) IS
    'The last part of a name: after its last / if it has one, else after its last . (the table of '
    'catalog.schema.table). Frozen (defined by change 9): indexes hold its results.';
REVOKE ALL ON FUNCTION metastore.name_tail(text) FROM PUBLIC;

CREATE INDEX datasets_search_idx ON metastore.datasets (metastore.search_key(name));
-- Only names with a part to search by: a name of one part is found by the index above.
CREATE INDEX datasets_search_tail_idx ON metastore.datasets (metastore.search_key(metastore.name_tail(name)))
    WHERE pg_catalog.strpos(name, '/') > 0 OR pg_catalog.strpos(name, '.') > 0;
CREATE INDEX jobs_search_idx ON metastore.jobs (metastore.search_key(name));
CREATE INDEX jobs_search_tail_idx ON metastore.jobs (metastore.search_key(metastore.name_tail(name)))
    WHERE pg_catalog.strpos(name, '/') > 0 OR pg_catalog.strpos(name, '.') > 0;
COMMENT ON INDEX metastore.datasets_search_idx IS 'Exact and prefix name search (metastore.search).';
COMMENT ON INDEX metastore.datasets_search_tail_idx IS 'Exact and prefix search of a name''s last part (metastore.search).';
COMMENT ON INDEX metastore.jobs_search_idx IS 'Exact and prefix name search (metastore.search).';
COMMENT ON INDEX metastore.jobs_search_tail_idx IS 'Exact and prefix search of a name''s last part (metastore.search).';

-- Every top-level field name a schema version ever had, for searching them: the trigger below adds
-- the names of each new version. Not unique: two transactions that add a new name at once would
-- otherwise wait for each other (in any order: a deadlock); a name seen twice is listed once.
CREATE TABLE metastore.field_names (
    name     text  NOT NULL,
    name_key bytea GENERATED ALWAYS AS (pg_catalog.sha256(metastore.dataset_key('', name))) STORED
);
CREATE INDEX field_names_key_idx ON metastore.field_names (name_key);
CREATE INDEX field_names_search_idx ON metastore.field_names (metastore.search_key(name));
COMMENT ON TABLE metastore.field_names IS
    'Top-level field names of metastore.dataset_schema_versions, for metastore.search (which datasets have '
    'one now: the versions themselves). Added by the trigger metastore.note_field_names; never removed.';

-- Frozen with this change: a trigger runs it (db/CONVENTIONS.md).
CREATE FUNCTION metastore.note_field_names() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    INSERT INTO metastore.field_names (name)
    SELECT DISTINCT f.value ->> 'name'
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(NEW.fields) = 'array' THEN NEW.fields ELSE '[]' END) AS f
     WHERE jsonb_typeof(f.value) = 'object' AND jsonb_typeof(f.value -> 'name') = 'string'
       AND NOT EXISTS (SELECT FROM metastore.field_names AS n
                        WHERE n.name_key = sha256(metastore.dataset_key('', f.value ->> 'name')));
    RETURN NULL;
END
$fn$;
COMMENT ON FUNCTION metastore.note_field_names() IS
    'Trigger: adds the top-level field names of a new schema version to metastore.field_names.';
REVOKE ALL ON FUNCTION metastore.note_field_names() FROM PUBLIC;
-- Only rows inserted: a version seen again updates its row and names nothing new.
CREATE TRIGGER dataset_schema_versions_field_names
    AFTER INSERT ON metastore.dataset_schema_versions
    FOR EACH ROW EXECUTE FUNCTION metastore.note_field_names();

INSERT INTO metastore.field_names (name)
SELECT DISTINCT f.value ->> 'name'
  FROM metastore.dataset_schema_versions AS v
 CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(v.fields) = 'array' THEN v.fields ELSE '[]' END) AS f
 WHERE jsonb_typeof(f.value) = 'object' AND jsonb_typeof(f.value -> 'name') = 'string';

-- Substrings of field names: a trigram index of lower(name), where pg_trgm exists (change 2 made
-- the datasets' one). Job names have none: Trino names a job per query, and an index of their
-- trigrams cost about 600 bytes per job, more than the job's row; search looks through the newest
-- jobs' names instead, a bounded number, and says so.
DO $trgm$
DECLARE
    v_schema name;
BEGIN
    SELECT n.nspname INTO v_schema
      FROM pg_catalog.pg_extension AS x JOIN pg_catalog.pg_namespace AS n ON n.oid = x.extnamespace
     WHERE x.extname = 'pg_trgm';
    IF v_schema IS NULL THEN
        RAISE NOTICE 'pg_trgm is not available: search finds substrings of field names by looking through a '
                     'bounded number of them';
        RETURN;
    END IF;
    EXECUTE pg_catalog.format(
        'CREATE INDEX field_names_name_trgm_idx ON metastore.field_names USING gin (pg_catalog.lower(name) %I.gin_trgm_ops)',
        v_schema);
    COMMENT ON INDEX metastore.field_names_name_trgm_idx IS
        'Trigram index of lower(name): substring search (metastore.search).';
END
$trgm$;

-- The hide list: datasets, jobs and namespaces the owner hid from the read API (metastore.hide,
-- metastore.unhide), by name, so that a dataset hidden stays hidden when a rebuild or a new event
-- makes its row again. Not derived from events: metastore.backfill never touches it. An entry is
-- kept when it is unhidden (who and when), so the table is the record of both.
CREATE TABLE metastore.hidden (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('dataset', 'job', 'namespace')),
    namespace   text        NOT NULL,
    name        text,
    -- The key of the dataset or job (as metastore.datasets.name_key, metastore.jobs.name_key); of
    -- the namespace with an empty name.
    name_key    bytea GENERATED ALWAYS AS (pg_catalog.sha256(metastore.dataset_key(namespace, coalesce(name, ''))))
                STORED,
    reason      text,
    hidden_by   text        NOT NULL,
    hidden_at   timestamptz NOT NULL,
    unhidden_by text,
    unhidden_at timestamptz,
    CHECK ((kind = 'namespace') = (name IS NULL)),
    CHECK ((unhidden_by IS NULL) = (unhidden_at IS NULL))
);
CREATE UNIQUE INDEX hidden_active_key ON metastore.hidden (kind, name_key) WHERE unhidden_at IS NULL;
COMMENT ON TABLE metastore.hidden IS
    'Datasets, jobs and namespaces (every dataset and job of one) left out of every read function''s answer, '
    'by name: written by metastore.hide and metastore.unhide (owner only), with who and when. The events '
    'stay, and the event feed serves them.';
COMMENT ON COLUMN metastore.hidden.hidden_by IS 'session_user of the metastore.hide call.';
COMMENT ON COLUMN metastore.hidden.unhidden_at IS 'When metastore.unhide showed it again; null while hidden.';
-- No grants: the owner's functions write it, the read functions read it.
