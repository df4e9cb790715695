-- Verifies V0007: the jobs and runs tables, their keys and the views applications read.
SELECT id, namespace, name, first_seen, last_seen, latest_sql, sql_dialect, sql_time, processing_type,
       integration, job_type, type_time, name_key, generation
  FROM metastore.jobs WHERE false;
SELECT id, job_id, run_id, state, state_class, state_rank, state_time, started_at, ended_at, duration, error_message, trino_user,
       trino_source, trino_catalog, trino_schema, context_time, first_event_time, last_event_time, event_count,
       generation
  FROM metastore.runs WHERE false;
SELECT id, namespace, name, first_seen, last_seen, latest_sql FROM metastore.jobs_view WHERE false;
SELECT id, job_id, run_id, state, duration, error_message, trino_user FROM metastore.runs_view WHERE false;

DO $verify$
BEGIN
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint
                    WHERE conrelid = 'metastore.jobs'::regclass AND conname = 'jobs_name_key_key'),
        'metastore.jobs lacks its name_key key';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint
                    WHERE conrelid = 'metastore.runs'::regclass AND conname = 'runs_job_run_key'),
        'metastore.runs lacks its (job_id, run_id) key';
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_constraint
                        WHERE contype = 'f' AND confrelid = 'metastore.jobs'::regclass),
        'a foreign key points at metastore.jobs (a run''s check would lock its job''s row)';
    ASSERT pg_catalog.has_table_privilege(
               (SELECT r.reader_role FROM metastore.group_roles AS r), 'metastore.jobs_view', 'SELECT'),
        'the reader role must read metastore.jobs_view';
END
$verify$;
