-- Brings the events and their links back onto the coordinator (a copy of every row: as long as
-- distributing took). Nothing to do on plain PostgreSQL.
DO $citus$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = 'metastore.events'::regclass) THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.undistribute_table('metastore.event_datasets');
    PERFORM pg_catalog.undistribute_table('metastore.events');
END
$citus$;
