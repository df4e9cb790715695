-- Reverts V0007: the functions that read the tables first, then the views and the tables.
-- metastore.derive_job_run stays: store_event calls it for every event, and it does nothing where
-- metastore.runs does not exist, so ingest goes on until the older release's deploy replaces it.
DROP FUNCTION IF EXISTS metastore.dataset_runs(bigint, integer);
DROP FUNCTION IF EXISTS metastore.get_run(bigint);
DROP FUNCTION IF EXISTS metastore.get_job(bigint, integer);
DROP FUNCTION IF EXISTS metastore.list_jobs(integer, text, text, text);
DROP VIEW metastore.runs_view;
DROP VIEW metastore.jobs_view;
DROP TABLE metastore.runs;
DROP TABLE metastore.jobs;
