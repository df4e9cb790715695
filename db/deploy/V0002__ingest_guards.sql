-- Guards on ingest: a settings table for the DBA (the eventTime window, the batch maximum),
-- rejected_events bounded to what a person needs to diagnose, and a trigram index for name search.

-- One row, owner-only: the service reads it through the ingest functions only.
CREATE TABLE metastore.settings (
    event_time_past   interval NOT NULL DEFAULT '10 years'
                      CHECK (event_time_past >= interval '0' AND event_time_past <= interval '1000 years'),
    event_time_future interval NOT NULL DEFAULT '1 day'
                      CHECK (event_time_future >= interval '0' AND event_time_future <= interval '1000 years'),
    max_batch_events  integer  NOT NULL DEFAULT 100
                      CHECK (max_batch_events BETWEEN 1 AND 100000)
);
-- At most one row (a unique index on a constant), and the trigger below keeps it from going.
CREATE UNIQUE INDEX settings_one_row ON metastore.settings ((true));
INSERT INTO metastore.settings DEFAULT VALUES;

COMMENT ON TABLE metastore.settings IS
    'Ingest settings, one row: change them with UPDATE metastore.settings SET ... as the owner; '
    'they apply to the next statement. The row cannot be deleted, nor a second one added.';
COMMENT ON COLUMN metastore.settings.event_time_past IS
    'An event whose eventTime is before now() - event_time_past is refused (SQLSTATE 22008) and kept in '
    'rejected_events. Default 10 years.';
COMMENT ON COLUMN metastore.settings.event_time_future IS
    'An event whose eventTime is after now() + event_time_future is refused (SQLSTATE 22008) and kept in '
    'rejected_events. Default 1 day.';
COMMENT ON COLUMN metastore.settings.max_batch_events IS
    'Most events one metastore.ingest_batch call takes; a larger batch is refused whole (SQLSTATE 54000, '
    'HTTP 413). Default 100: a batch of 100 Trino COMPLETE events (about 18 KB each) is stored well within '
    'the service''s ingest deadline of 1.5 s.';

CREATE FUNCTION metastore.settings_keep_row() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '55000',
        MESSAGE = 'metastore.settings keeps exactly one row',
        HINT = 'Change a setting with UPDATE metastore.settings SET ...';
END
$fn$;
COMMENT ON FUNCTION metastore.settings_keep_row() IS 'Trigger: metastore.settings keeps its one row (SQLSTATE 55000).';

CREATE TRIGGER settings_keep_row BEFORE DELETE ON metastore.settings
    FOR EACH ROW EXECUTE FUNCTION metastore.settings_keep_row();
CREATE TRIGGER settings_keep_row_truncate BEFORE TRUNCATE ON metastore.settings
    FOR EACH STATEMENT EXECUTE FUNCTION metastore.settings_keep_row();

-- rejected_events: a bounded prefix, the size and hash of the body instead of the whole body, and
-- the provenance rules of metastore.events.
ALTER TABLE metastore.rejected_events
    ADD COLUMN body_prefix text,
    ADD COLUMN body_bytes  integer CHECK (body_bytes >= 0),
    ADD COLUMN body_sha256 bytea;

-- Existing rows kept the parsed event, not the bytes received: its JSON text stands in for the body.
UPDATE metastore.rejected_events AS r
   SET body_bytes = pg_catalog.octet_length(b.body),
       body_sha256 = pg_catalog.sha256(b.body),
       body_prefix = pg_catalog.left(r.payload::text, 4096)
  FROM (SELECT i.id, pg_catalog.convert_to(i.payload::text, 'UTF8') AS body FROM metastore.rejected_events AS i) AS b
 WHERE b.id = r.id;

-- Only the defined kinds, and a principal only with a kind that can vouch for it. Rows recorded
-- otherwise keep what they claimed in their reason.
UPDATE metastore.rejected_events AS r
   SET reason = r.reason || pg_catalog.format(' [recorded with source_kind %L, source_principal %L]',
                                              r.source_kind, r.source_principal),
       source_kind = 'unauthenticated',
       source_principal = NULL
 WHERE r.source_kind NOT IN ('unauthenticated', 'inferred', 'authenticated')
    OR (r.source_kind = 'unauthenticated' AND r.source_principal IS NOT NULL);

ALTER TABLE metastore.rejected_events
    DROP COLUMN payload,
    ADD CONSTRAINT rejected_events_source_kind_check
        CHECK (source_kind IN ('unauthenticated', 'inferred', 'authenticated')),
    ADD CONSTRAINT rejected_events_principal_needs_kind
        CHECK (source_principal IS NULL OR source_kind <> 'unauthenticated');

COMMENT ON TABLE metastore.rejected_events IS
    'Well-formed JSON that was refused as an OpenLineage event, and accepted events the service could not '
    'store (metastore.reject_event), with the reason: what a person needs to diagnose it, not the whole body. '
    'Bodies that are not JSON at all are refused without being kept. metastore.apply_retention removes '
    'rows received before its cutoff.';
COMMENT ON COLUMN metastore.rejected_events.body_prefix IS
    'The first 4096 bytes of the body as text (a character cut at the end is dropped; bytes that are not '
    'UTF-8 become U+FFFD). For an event of a batch: its JSON text as PostgreSQL prints it, and null when it '
    'holds numbers outside the double range (22003), whose text would be unbounded.';
COMMENT ON COLUMN metastore.rejected_events.body_bytes IS 'Size of the whole body in bytes (see body_prefix).';
COMMENT ON COLUMN metastore.rejected_events.body_sha256 IS 'sha256 of the whole body (see body_prefix).';
COMMENT ON COLUMN metastore.rejected_events.sqlstate IS 'Why, as a SQLSTATE (the code the client was answered).';
COMMENT ON COLUMN metastore.rejected_events.reason IS 'Why, in words.';
COMMENT ON COLUMN metastore.rejected_events.source_kind IS 'As metastore.events.source_kind.';
COMMENT ON COLUMN metastore.rejected_events.source_principal IS
    'As metastore.events.source_principal: null when unauthenticated.';

-- Statistics of lower(name), with or without the trigram index below: how common a q is decides
-- between that index and walking the (namespace, name) index (metastore.list_datasets).
CREATE STATISTICS metastore.datasets_lower_name ON (pg_catalog.lower(name)) FROM metastore.datasets;
COMMENT ON STATISTICS metastore.datasets_lower_name IS
    'How common a substring of lower(name) is, for the plan of metastore.list_datasets with q.';

-- Name search: a trigram index serves lower(name) LIKE '%q%' (metastore.list_datasets). pg_trgm
-- is in PostgreSQL's contrib and trusted (a database owner may create it); where it is missing
-- or not allowed, search still works, by walking the (namespace, name) index.
DO $trgm$
DECLARE
    v_schema name;
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    SELECT n.nspname INTO v_schema
      FROM pg_catalog.pg_extension AS x JOIN pg_catalog.pg_namespace AS n ON n.oid = x.extnamespace
     WHERE x.extname = 'pg_trgm';
    EXECUTE pg_catalog.format(
        'CREATE INDEX datasets_name_trgm_idx ON metastore.datasets USING gin (pg_catalog.lower(name) %I.gin_trgm_ops)',
        v_schema);
    COMMENT ON INDEX metastore.datasets_name_trgm_idx IS
        'Trigram index of lower(name): serves the q filter of metastore.list_datasets (a substring of the name).';
EXCEPTION WHEN insufficient_privilege OR undefined_file OR feature_not_supported OR undefined_object THEN
    RAISE NOTICE 'pg_trgm is not available (%): name search walks the (namespace, name) index instead', SQLERRM;
END
$trgm$;
