-- Citus: where the citus extension is present (a DBA creates it, with the workers added, before
-- the first deploy: docs/operations.md), the raw events and their links are spread over the
-- workers; on plain PostgreSQL this change does nothing.
--
-- Both are distributed by event_time, co-located: it is the partition key and part of both unique
-- keys (a unique key of a distributed table must hold the distribution column), so an event and
-- its duplicates meet on one shard, where (payload_sha256, event_time) de-duplicates them as on one
-- server, and an event's links lie on its event's shard. Each daily partition is distributed the
-- same way (create_partitions attaches new ones, which Citus distributes). Everything derived
-- (datasets, lineage, jobs, runs, ...) stays on the coordinator: as reference tables, every event
-- would write to every node in a two-phase commit.
--
-- The append-only trigger stays, on every shard: Citus creates it there only when told that such
-- triggers are wanted (citus.enable_unsafe_triggers, for this transaction). It only raises, so
-- none of the visibility or deadlock hazards that setting warns of apply.
DO $citus$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_node AS n
                    WHERE n.isactive AND n.shouldhaveshards AND n.noderole = 'primary' AND n.groupid <> 0) THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000',
            MESSAGE = 'the citus extension is present but no worker is: the events would stay on the coordinator',
            HINT = 'Add the workers first (SELECT citus_add_node(host, port) as a superuser), then deploy.';
    END IF;
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.create_distributed_table('metastore.events', 'event_time');
    PERFORM pg_catalog.create_distributed_table('metastore.event_datasets', 'event_time',
                                                colocate_with => 'metastore.events');
END
$citus$;
