-- Verifies V0001: the tables and views have their columns, and the roles only what they need.
-- Run in a transaction that is rolled back.
SELECT id, payload, payload_sha256, event_kind, event_type, event_time, run_id, job_namespace, job_name,
       producer, schema_url, received_at, source_kind, source_principal
  FROM metastore.events WHERE false;
SELECT id, payload, sqlstate, reason, received_at, source_kind, source_principal
  FROM metastore.rejected_events WHERE false;
SELECT id, namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events
  FROM metastore.datasets WHERE false;
SELECT event_id, dataset_id, direction FROM metastore.event_datasets WHERE false;
SELECT dataset_id, symlink_id, type FROM metastore.dataset_symlinks WHERE false;
SELECT id, namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events
  FROM metastore.datasets_view WHERE false;
SELECT dataset_id, event_id, direction, event_kind, event_type, event_time, run_id, job_namespace, job_name,
       received_at
  FROM metastore.dataset_events_view WHERE false;
SELECT dataset_id, symlink_id, type FROM metastore.dataset_symlinks_view WHERE false;

DO $verify$
DECLARE
    v_role  text;
    v_table text;
    v_priv  text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['metastore_app', 'metastore_reader', 'public'] LOOP
        FOREACH v_table IN ARRAY ARRAY['metastore.events', 'metastore.rejected_events', 'metastore.datasets',
                                       'metastore.event_datasets', 'metastore.dataset_symlinks'] LOOP
            FOREACH v_priv IN ARRAY ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'] LOOP
                ASSERT NOT pg_catalog.has_table_privilege(v_role, v_table, v_priv),
                    pg_catalog.format('%s must not have %s on %s', v_role, v_priv, v_table);
            END LOOP;
        END LOOP;
    END LOOP;
    FOREACH v_role IN ARRAY ARRAY['metastore_app', 'metastore_reader'] LOOP
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
END
$verify$;
