CREATE OR REPLACE FUNCTION metastore.schema_version() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT coalesce(max(version), 0) FROM metastore_migrations.schema_version
$fn$;

COMMENT ON FUNCTION metastore.schema_version() IS
    'The newest applied change of db/deploy; the service compares it with the version it was built for.';

REVOKE ALL ON FUNCTION metastore.schema_version() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.schema_version() TO %I, %I',
                              metastore.group_role('app'),
                              metastore.group_role('reader'));
END
$grant$;
