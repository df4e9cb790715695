-- Statements of `metastore db ...` (migrations), loaded by name like queries.sql.

-- name: session_limits
-- The command's statement deadline; lock_timeout keeps a deploy from queueing behind a long
-- transaction for longer than that (the advisory lock below is taken first and waits).
SELECT pg_catalog.set_config('statement_timeout', %(statement_timeout)s, false),
       pg_catalog.set_config('lock_timeout', '30s', false);

-- name: advisory_lock
-- Serialises concurrent deploys and reverts (until the transaction ends).
SELECT pg_catalog.pg_advisory_xact_lock(7262001);

-- name: citus_deploy_settings
-- On Citus, roles are the DBA's, created on every node before the first deploy
-- (docs/operations.md). A grant to a role that this database's Citus metadata does not know yet
-- (one created before the extension, e.g. for another installation) would make Citus re-create it
-- on the workers, which takes a superuser (42501); the deploy, run by the owner, leaves roles alone.
SELECT pg_catalog.set_config('citus.enable_create_role_propagation', 'off', true),
       pg_catalog.set_config('citus.enable_alter_role_propagation', 'off', true)
 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus');

-- name: ledger_schema
CREATE SCHEMA IF NOT EXISTS metastore_migrations;

-- name: ledger_type
-- The ledger's layout is the one yandex-pgmigrate created, so earlier databases keep working.
DO $$
BEGIN
    IF pg_catalog.to_regtype('metastore_migrations.schema_version_type') IS NULL THEN
        CREATE TYPE metastore_migrations.schema_version_type AS ENUM ('auto', 'manual');
    END IF;
END
$$;

-- name: ledger_table
CREATE TABLE IF NOT EXISTS metastore_migrations.schema_version (
    version BIGINT NOT NULL PRIMARY KEY,
    description TEXT NOT NULL,
    type metastore_migrations.schema_version_type NOT NULL DEFAULT 'auto',
    installed_by TEXT NOT NULL,
    installed_on TIMESTAMP WITHOUT TIME ZONE DEFAULT now() NOT NULL
);

-- name: migrations_table
SELECT pg_catalog.to_regclass('metastore_migrations.schema_version') IS NOT NULL;

-- name: applied_versions
SELECT version FROM metastore_migrations.schema_version ORDER BY version;

-- name: record_version
INSERT INTO metastore_migrations.schema_version (version, description, installed_by)
VALUES (%(version)s::bigint, %(description)s, CURRENT_USER);

-- name: forget_version
DELETE FROM metastore_migrations.schema_version WHERE version = %(version)s::bigint;

-- name: use_group_roles
-- The installation's group roles (null: keep the recorded one); moves their privileges.
SELECT metastore.use_group_roles(%(app_role)s::text, %(reader_role)s::text);

-- name: group_roles_chosen
-- False on a new installation: its group roles are still change 1's placeholders.
SELECT r.chosen FROM metastore.group_roles AS r;

-- name: apply_retention
SELECT metastore.apply_retention(%(keep)s::interval);

-- name: no_statement_timeout
-- For a backfill: its CALL is one statement that runs as long as the rebuild takes.
SELECT pg_catalog.set_config('statement_timeout', '0', false);

-- name: backfill
CALL metastore.backfill(%(batch_size)s);

-- name: allowed_connect_roles
-- The roles the operator lets hold CONNECT on the database (METASTORE_ALLOWED_CONNECT_ROLES:
-- backup, CDC or audit agents), for hide_allowed_connect, in the verify's transaction.
SELECT pg_catalog.set_config('metastore.allowed_connect_roles', %(roles)s, true);

-- name: hide_allowed_connect
-- Revokes those roles' CONNECT, in a verify transaction that is rolled back: the checks then see
-- the database as the deploy leaves it and still report any other privilege, theirs included.
-- The installation's own group roles keep theirs. Only run once change 3 is applied.
DO $$
DECLARE
    v_role text;
BEGIN
    FOR v_role IN
        SELECT r.rolname
          FROM pg_catalog.pg_roles AS r
         WHERE r.rolname = ANY (pg_catalog.string_to_array(
                   pg_catalog.current_setting('metastore.allowed_connect_roles'), ','))
           AND r.rolname NOT IN (SELECT g.app_role FROM metastore.group_roles AS g
                                 UNION ALL SELECT g.reader_role FROM metastore.group_roles AS g)
    LOOP
        EXECUTE pg_catalog.format('REVOKE CONNECT ON DATABASE %I FROM %I', pg_catalog.current_database(), v_role);
    END LOOP;
END
$$;

-- name: hide
SELECT metastore.hide(%(kind)s::text, %(namespace)s::text, %(name)s::text, %(reason)s::text);

-- name: unhide
SELECT metastore.unhide(%(kind)s::text, %(namespace)s::text, %(name)s::text);

-- name: hidden_list
SELECT metastore.hidden_list(%(all)s::boolean);

-- name: archive_session
-- `metastore db retention --archive`: times in the archive are UTC, as the event feed renders them.
SELECT pg_catalog.set_config('TimeZone', 'UTC', true);

-- name: archive_stamp
-- Names the run's files: the transaction's start, unique per run (runs take turns on a lock).
SELECT pg_catalog.to_char(pg_catalog.now() AT TIME ZONE 'UTC', 'YYYYMMDD"T"HH24MISSUS"Z"');

-- name: expiring_days
SELECT d.day, d.time_from, d.time_to FROM metastore.expiring_days(%(keep)s::interval) AS d;

-- name: archive_page
-- A page of one day's events in id order, each the line `metastore export` writes (the event
-- feed's JSON, built as metastore.read_events builds it). Built from the page's rows on the node
-- that runs this session, in its UTC, not on the workers that hold the rows under Citus.
WITH page AS MATERIALIZED (
    SELECT e.id, e.xact_id, e.received_at, e.source_kind, e.source_principal, e.payload
      FROM metastore.events AS e
     WHERE e.event_time >= %(time_from)s AND e.event_time < %(time_to)s AND e.id > %(after)s
     ORDER BY e.id
     LIMIT %(limit)s
)
SELECT p.id,
       pg_catalog.jsonb_build_object(
           'id', p.id,
           'cursor', pg_catalog.translate(
                         pg_catalog.encode(pg_catalog.convert_to(p.xact_id::text || ':' || p.id::text, 'UTF8'), 'base64'),
                         E'+/\n', '-_'),
           'received_at', p.received_at,
           'source_kind', p.source_kind,
           'source_principal', p.source_principal,
           'event', p.payload)::text
  FROM page AS p
 ORDER BY p.id;
