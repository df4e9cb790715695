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

-- name: use_group_roles
-- The installation's group roles (null: keep the recorded one); moves their privileges.
SELECT metastore.use_group_roles(%(app_role)s::text, %(reader_role)s::text);

-- name: group_roles_chosen
-- False on a new installation: its group roles are still change 1's placeholders.
SELECT r.chosen FROM metastore.group_roles AS r;
