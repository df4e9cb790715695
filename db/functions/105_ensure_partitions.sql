-- What the service may ask for: the fixed window of daily partitions, nothing else (any other
-- range is the owner's, metastore.create_partitions).
CREATE OR REPLACE FUNCTION metastore.ensure_partitions() RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'  -- current_date is the UTC day
AS $fn$
    SELECT metastore.create_partitions(CURRENT_DATE - 1, 14)
$fn$;

COMMENT ON FUNCTION metastore.ensure_partitions() IS
    'Creates the missing daily partitions from yesterday through 14 days ahead (UTC), nothing else; returns '
    'how many it created (0 when none were missing). For the service, at start and every hour. Error codes: '
    '55P03 the tables stayed locked by another transaction for about 4 s, try again later.';

REVOKE ALL ON FUNCTION metastore.ensure_partitions() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ensure_partitions() TO %I',
                              metastore.group_role('app'));
END
$grant$;
