-- Reverts V0007: the functions that name the tables first, then the views and the tables.
-- store_event and backfill are re-created from db/functions by the next deploy; until then the
-- old ones would call derive_job_run, so they are dropped with it only if a deploy follows.
DROP FUNCTION IF EXISTS metastore.dataset_runs(bigint, integer);
DROP FUNCTION IF EXISTS metastore.get_run(bigint);
DROP FUNCTION IF EXISTS metastore.get_job(bigint, integer);
DROP FUNCTION IF EXISTS metastore.list_jobs(integer, text, text, text);
DROP FUNCTION IF EXISTS metastore.derive_job_run(jsonb, text, timestamptz, text, text, text);
DROP FUNCTION IF EXISTS metastore.run_state_rank(text);
DROP VIEW metastore.runs_view;
DROP VIEW metastore.jobs_view;
DROP TABLE metastore.runs;
DROP TABLE metastore.jobs;
