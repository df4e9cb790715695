-- Verifies V0010: with the citus extension, metastore.events and metastore.event_datasets are
-- distributed by event_time, co-located, every partition too, and every other table of the schema
-- is local to the coordinator; without it, nothing is distributed.
DO $verify$
DECLARE
    v_table text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus') THEN
        RETURN;
    END IF;
    FOREACH v_table IN ARRAY ARRAY['metastore.events', 'metastore.event_datasets'] LOOP
        ASSERT (SELECT p.partmethod = 'h'
                       AND pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) = 'event_time'
                  FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = v_table::regclass),
            pg_catalog.format('%s must be distributed by event_time: the citus extension is present (to distribute '
                              'a store deployed before it: revert the citus_layout change, then deploy, which '
                              'copies the events to the workers; docs/operations.md)', v_table);
    END LOOP;
    ASSERT (SELECT pg_catalog.count(DISTINCT p.colocationid) = 1 FROM pg_catalog.pg_dist_partition AS p
             WHERE p.logicalrelid IN ('metastore.events'::regclass, 'metastore.event_datasets'::regclass)),
        'metastore.events and metastore.event_datasets must be co-located';
    ASSERT NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_inherits AS i
         WHERE i.inhparent IN ('metastore.events'::regclass, 'metastore.event_datasets'::regclass)
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p
                            WHERE p.logicalrelid = i.inhrelid
                              AND p.colocationid = (SELECT q.colocationid FROM pg_catalog.pg_dist_partition AS q
                                                     WHERE q.logicalrelid = i.inhparent))),
        'every partition of metastore.events and metastore.event_datasets must be distributed with its parent';
    -- Derived tables stay on the coordinator: as reference tables every event would write every node.
    ASSERT NOT EXISTS (
        SELECT 1 FROM pg_catalog.pg_dist_partition AS p
          JOIN pg_catalog.pg_class AS c ON c.oid = p.logicalrelid
         WHERE c.relnamespace = 'metastore'::regnamespace
           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_inherits AS i
                            WHERE i.inhrelid = c.oid
                              AND i.inhparent IN ('metastore.events'::regclass, 'metastore.event_datasets'::regclass))
           AND c.oid NOT IN ('metastore.events'::regclass, 'metastore.event_datasets'::regclass)),
        'only metastore.events and metastore.event_datasets may be Citus tables: the others stay on the coordinator';
END
$verify$;
