-- Statements of `metastore db ...` (migrations), loaded by name like queries.sql.

-- name: advisory_lock
-- Serialises concurrent deploys and reverts (the same key is in db/migrations.yml).
SELECT pg_catalog.pg_advisory_xact_lock(7262001);

-- name: migrations_table
SELECT pg_catalog.to_regclass('metastore_migrations.schema_version') IS NOT NULL;

-- name: applied_versions
SELECT version FROM metastore_migrations.schema_version ORDER BY version;

-- name: forget_version
DELETE FROM metastore_migrations.schema_version WHERE version = %(version)s::bigint;
