-- How far ahead ingest has partitions: the metric behind the "partitions running out" alert.
CREATE OR REPLACE FUNCTION metastore.partitions_ahead() RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'  -- days are UTC days
AS $fn$
    -- Whole days after today covered by consecutive daily partitions of metastore.events
    -- (events_pYYYYMMDD); -1 when not even today has one.
    SELECT coalesce(pg_catalog.min(d.n) - 1, 15)::integer
      FROM pg_catalog.generate_series(0, 15) AS d (n)
     WHERE pg_catalog.to_regclass(pg_catalog.format('metastore.events_p%s',
                                  pg_catalog.to_char(CURRENT_DATE + d.n, 'YYYYMMDD'))) IS NULL
$fn$;

COMMENT ON FUNCTION metastore.partitions_ahead() IS
    'How many whole days after today (UTC) have their daily partition of metastore.events without a gap: '
    '14 right after metastore.ensure_partitions(), -1 when today has none (events then wait in the default '
    'partition). 15 means at least 15. The service exports it as metastore_partitions_ahead_days.';

REVOKE ALL ON FUNCTION metastore.partitions_ahead() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.partitions_ahead() TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
