-- The async writers ask this before blaming one event for a failure: when the tables can be
-- locked for writing at once, the database is writable and the event itself is the problem;
-- when not (LOCK TABLE by a DBA, a backfill's SHARE lock, a frozen server), nobody is to blame.
CREATE OR REPLACE FUNCTION metastore.write_probe() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '200ms'
AS $fn$
BEGIN
    -- The mode every insert takes; conflicts only with SHARE and stronger locks. ONLY: one lock
    -- per parent, not one per daily partition (a lock on a partition's parent conflicts too).
    LOCK TABLE ONLY metastore.events, metastore.datasets, ONLY metastore.event_datasets, metastore.dataset_symlinks,
        metastore.rejected_events
        IN ROW EXCLUSIVE MODE;
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$fn$;

COMMENT ON FUNCTION metastore.write_probe() IS
    'true when the tables ingest writes can be locked for writing within 200 ms (nothing holds a lock '
    'against writers), false otherwise. The service''s async writers use it to tell an event that cannot '
    'be stored from a database that cannot store anything right now.';

REVOKE ALL ON FUNCTION metastore.write_probe() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.write_probe() TO %I', metastore.group_role('app'));
END
$grant$;
