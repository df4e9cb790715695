-- Reverts V0007: the functions that name the tables first, then the views and the tables.
-- derive_job_run goes too (the older release's verify lists the functions exactly): store_events
-- calls it only where metastore.runs exists, so ingest goes on (db/CONVENTIONS.md).
DROP FUNCTION IF EXISTS metastore.derive_job_run(jsonb[], metastore.valid_event[]);
-- The one-event signature of earlier builds of this change.
DROP FUNCTION IF EXISTS metastore.derive_job_run(jsonb, text, timestamptz, text, text, text);
DROP FUNCTION IF EXISTS metastore.derive_job_run(jsonb[], metastore.valid_event[]);
DROP FUNCTION IF EXISTS metastore.dataset_runs(bigint, integer);
DROP FUNCTION IF EXISTS metastore.get_run(bigint);
DROP FUNCTION IF EXISTS metastore.get_job(bigint, integer);
DROP FUNCTION IF EXISTS metastore.list_jobs(integer, text, text, text);
DROP VIEW metastore.runs_view;
DROP VIEW metastore.jobs_view;
DROP TABLE metastore.runs;
DROP TABLE metastore.jobs;
