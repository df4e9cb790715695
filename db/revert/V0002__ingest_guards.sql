-- Reverts V0002, as well as it can:
-- * rejected_events gets its payload column back (last, not in its old place): the body itself
--   where body_prefix holds all of it and it is JSON; otherwise what V0002 kept of it, as
--   {"body_prefix", "body_bytes", "body_sha256"} (the rest of the body was never stored). The
--   source CHECKs go; source kinds and principals stay as they are.
-- * The functions V0002 introduced are dropped and the app role may call create_partitions again.
--   The other functions stay as this release made them until the previous release's deploy
--   re-applies its own db/functions (it does so on every deploy): deploy it right after.
-- * pg_trgm stays installed (other schemas may use it); only the index goes.
-- * The settings go: the eventTime window and the batch maximum no longer apply.

DROP INDEX IF EXISTS metastore.datasets_name_trgm_idx;
DROP STATISTICS metastore.datasets_lower_name;

DROP FUNCTION IF EXISTS metastore.reject_event(bytea, text, text, text, text);
DROP FUNCTION IF EXISTS metastore.ensure_partitions();
DROP FUNCTION IF EXISTS metastore.record_rejection(bytea, text, text, text, text);
DROP FUNCTION IF EXISTS metastore.read_event(bytea);
DROP FUNCTION IF EXISTS metastore.check_source(text, text);
DO $grant$
BEGIN
    IF pg_catalog.to_regprocedure('metastore.create_partitions(date, integer)') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION metastore.create_partitions(date, integer) TO metastore_app;
    END IF;
END
$grant$;

DROP TABLE metastore.settings;
DROP FUNCTION metastore.settings_keep_row();

ALTER TABLE metastore.rejected_events
    ADD COLUMN payload jsonb,
    DROP CONSTRAINT rejected_events_source_kind_check,
    DROP CONSTRAINT rejected_events_principal_needs_kind;

DO $payload$
DECLARE
    v_row record;
BEGIN
    FOR v_row IN SELECT r.id, r.body_prefix FROM metastore.rejected_events AS r
                  WHERE r.body_bytes <= 4096 AND r.body_prefix IS NOT NULL LOOP
        BEGIN
            UPDATE metastore.rejected_events AS r SET payload = v_row.body_prefix::jsonb WHERE r.id = v_row.id;
        EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
            NULL;  -- not JSON: kept as the object below
        END;
    END LOOP;
END
$payload$;
UPDATE metastore.rejected_events AS r
   SET payload = pg_catalog.jsonb_build_object('body_prefix', r.body_prefix, 'body_bytes', r.body_bytes,
                                               'body_sha256', pg_catalog.encode(r.body_sha256, 'hex'))
 WHERE r.payload IS NULL;

ALTER TABLE metastore.rejected_events
    ALTER COLUMN payload SET NOT NULL,
    DROP COLUMN body_prefix,
    DROP COLUMN body_bytes,
    DROP COLUMN body_sha256;

DO $lz4$
BEGIN
    ALTER TABLE metastore.rejected_events ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN invalid_parameter_value OR feature_not_supported THEN
    NULL;  -- a server without lz4: pglz, as V0001 made it there
END
$lz4$;

COMMENT ON TABLE metastore.rejected_events IS
    'Well-formed JSON that was refused as an OpenLineage event, kept for inspection with the reason. '
    'Bodies that are not JSON at all are refused without being kept.';
COMMENT ON COLUMN metastore.rejected_events.sqlstate IS NULL;
COMMENT ON COLUMN metastore.rejected_events.reason IS NULL;
COMMENT ON COLUMN metastore.rejected_events.source_kind IS NULL;
COMMENT ON COLUMN metastore.rejected_events.source_principal IS NULL;
