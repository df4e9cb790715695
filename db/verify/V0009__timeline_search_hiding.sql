-- Verifies V0009: the runs timeline's indexes, the runs' datasets, the search indexes and field names,
-- and the hide list, none of them open to the application roles.
SELECT run_id, dataset_id, direction, run_time, generation FROM metastore.run_datasets WHERE false;
SELECT name, name_key FROM metastore.field_names WHERE false;
SELECT id, kind, namespace, name, name_key, reason, hidden_by, hidden_at, unhidden_by, unhidden_at
  FROM metastore.hidden WHERE false;

DO $verify$
DECLARE
    v_role text;
BEGIN
    ASSERT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_indexes
             WHERE schemaname = 'metastore'
               AND indexname IN ('runs_time_idx', 'runs_state_idx', 'runs_user_idx',
                                 'run_datasets_pkey', 'run_datasets_dataset_idx', 'datasets_search_idx',
                                 'datasets_search_tail_idx', 'jobs_search_idx', 'jobs_search_tail_idx',
                                 'field_names_key_idx', 'field_names_search_idx', 'hidden_active_key')) = 12,
        'an index of change 9 is missing';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_trigger
                    WHERE tgrelid = 'metastore.dataset_schema_versions'::regclass
                      AND tgname = 'dataset_schema_versions_field_names' AND tgenabled <> 'D'),
        'metastore.dataset_schema_versions lacks the trigger that keeps metastore.field_names';
    -- The hide list is the owner's: the application roles read it only through the read functions.
    FOREACH v_role IN ARRAY ARRAY[(SELECT r.app_role FROM metastore.group_roles AS r),
                                  (SELECT r.reader_role FROM metastore.group_roles AS r), 'public'] LOOP
        ASSERT NOT pg_catalog.has_table_privilege(v_role, 'metastore.hidden', 'SELECT, INSERT, UPDATE, DELETE'),
            pg_catalog.format('%s must not read or write metastore.hidden', v_role);
        ASSERT NOT pg_catalog.has_table_privilege(v_role, 'metastore.run_datasets', 'SELECT, INSERT, UPDATE, DELETE'),
            pg_catalog.format('%s must not read or write metastore.run_datasets', v_role);
        ASSERT NOT pg_catalog.has_table_privilege(v_role, 'metastore.field_names', 'SELECT, INSERT, UPDATE, DELETE'),
            pg_catalog.format('%s must not read or write metastore.field_names', v_role);
    END LOOP;
END
$verify$;
