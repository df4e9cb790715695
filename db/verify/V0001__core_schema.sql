-- Verifies V0001: the tables and views have their columns, and the roles only what they need.
-- Run in a transaction that is rolled back.
SELECT id, payload, payload_sha256, event_kind, event_type, event_time, run_id, job_namespace, job_name,
       producer, schema_url, received_at, source_kind, source_principal
  FROM metastore.events WHERE false;
-- rejected_events.payload went in V0002 (bodies are not kept whole): its verify checks the columns.
SELECT id, sqlstate, reason, received_at, source_kind, source_principal
  FROM metastore.rejected_events WHERE false;
SELECT id, namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events
  FROM metastore.datasets WHERE false;
SELECT event_id, dataset_id, direction, event_time FROM metastore.event_datasets WHERE false;
SELECT dataset_id, symlink_id, type FROM metastore.dataset_symlinks WHERE false;
SELECT id, namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events
  FROM metastore.datasets_view WHERE false;
SELECT dataset_id, event_id, direction, event_kind, event_type, event_time, run_id, job_namespace, job_name,
       received_at
  FROM metastore.dataset_events_view WHERE false;
SELECT dataset_id, symlink_id, type FROM metastore.dataset_symlinks_view WHERE false;

DO $verify$
DECLARE
    v_role   text;
    v_table  text;
    v_priv   text;
    -- The group roles of change 1, or this installation's own since change 3.
    v_app    text := 'metastore_app';
    v_reader text := 'metastore_reader';
BEGIN
    IF pg_catalog.to_regclass('metastore.group_roles') IS NOT NULL THEN
        SELECT r.app_role, r.reader_role INTO STRICT v_app, v_reader FROM metastore.group_roles AS r;
    END IF;
    FOREACH v_role IN ARRAY ARRAY[v_app, v_reader, 'public'] LOOP
        -- Every table, partitions included.
        FOR v_table IN SELECT c.oid::regclass::text FROM pg_catalog.pg_class AS c
                        WHERE c.relnamespace = 'metastore'::regnamespace AND c.relkind IN ('r', 'p') LOOP
            FOREACH v_priv IN ARRAY ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'] LOOP
                ASSERT NOT pg_catalog.has_table_privilege(v_role, v_table, v_priv),
                    pg_catalog.format('%s must not have %s on %s', v_role, v_priv, v_table);
            END LOOP;
        END LOOP;
    END LOOP;
    FOREACH v_role IN ARRAY ARRAY[v_app, v_reader] LOOP
        ASSERT pg_catalog.has_schema_privilege(v_role, 'metastore', 'USAGE');
        ASSERT NOT pg_catalog.has_schema_privilege(v_role, 'metastore', 'CREATE');
        FOREACH v_table IN ARRAY ARRAY['metastore.datasets_view', 'metastore.dataset_events_view',
                                       'metastore.dataset_symlinks_view'] LOOP
            ASSERT pg_catalog.has_table_privilege(v_role, v_table, 'SELECT');
            ASSERT NOT pg_catalog.has_table_privilege(v_role, v_table, 'INSERT');
        END LOOP;
    END LOOP;
    ASSERT NOT pg_catalog.has_schema_privilege('public', 'metastore', 'USAGE');
    ASSERT (SELECT count(*) FROM pg_catalog.pg_trigger
             WHERE tgrelid = 'metastore.events'::regclass AND tgname = 'events_append_only') = 1;

    -- Partitioned by eventTime, each with a default partition; the append-only trigger on every
    -- partition of events; links keep no foreign key into events (it would forbid dropping partitions).
    FOREACH v_table IN ARRAY ARRAY['metastore.events', 'metastore.event_datasets'] LOOP
        ASSERT (SELECT p.partstrat = 'r' AND p.partnatts = 1
                       AND (SELECT a.attname FROM pg_catalog.pg_attribute AS a
                             WHERE a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]) = 'event_time'
                  FROM pg_catalog.pg_partitioned_table AS p WHERE p.partrelid = v_table::regclass),
            pg_catalog.format('%s must be partitioned by range of event_time', v_table);
        ASSERT EXISTS (SELECT FROM pg_catalog.pg_partitioned_table AS p
                        WHERE p.partrelid = v_table::regclass AND p.partdefid = (v_table || '_default')::regclass),
            pg_catalog.format('%s must have its default partition', v_table);
    END LOOP;
    ASSERT NOT EXISTS (
        SELECT FROM pg_catalog.pg_inherits AS i
         WHERE i.inhparent = 'metastore.events'::regclass
           AND NOT EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                            WHERE t.tgrelid = i.inhrelid AND t.tgname = 'events_append_only' AND t.tgenabled = 'O')),
        'a partition of metastore.events lacks the append-only trigger';
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                        WHERE c.conrelid = 'metastore.event_datasets'::regclass AND c.contype = 'f'
                          AND c.confrelid = 'metastore.events'::regclass),
        'metastore.event_datasets must not reference metastore.events';
END
$verify$;
