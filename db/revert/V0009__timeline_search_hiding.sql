-- Reverts V0009: the functions that name its tables or that only it needs first (the older
-- release's verify lists the functions exactly), then the trigger, the tables and the indexes.
-- store_events and backfill call derive_run_datasets only where metastore.run_datasets exists, so
-- ingest goes on until the older release's deploy replaces them (db/CONVENTIONS.md).
DROP FUNCTION IF EXISTS metastore.derive_run_datasets(metastore.valid_event[], jsonb);
DROP FUNCTION IF EXISTS metastore.hidden_names();
DROP FUNCTION IF EXISTS metastore.lineage_graph(bigint, text, integer, integer, text);
DROP FUNCTION IF EXISTS metastore.field_lineage(bigint, text, text, integer, integer);
DROP FUNCTION IF EXISTS metastore.list_runs(integer, text, text, text, text, text, bigint, text, text);
DROP FUNCTION IF EXISTS metastore.list_jobs(integer, text, text, text, text, text, text);
DROP FUNCTION IF EXISTS metastore.list_namespaces(integer);
DROP FUNCTION IF EXISTS metastore.search(text, integer);
DROP FUNCTION IF EXISTS metastore.search_substrings(text, text, integer, integer, integer, bigint[], bigint[], text[]);
DROP FUNCTION IF EXISTS metastore.hide(text, text, text, text);
DROP FUNCTION IF EXISTS metastore.unhide(text, text, text);
DROP FUNCTION IF EXISTS metastore.hidden_list(boolean);
DROP TRIGGER dataset_schema_versions_field_names ON metastore.dataset_schema_versions;
DROP FUNCTION metastore.note_field_names();
DROP TABLE metastore.hidden;
DROP TABLE metastore.field_names;
DROP TABLE metastore.run_datasets;
DROP INDEX metastore.jobs_search_tail_idx;
DROP INDEX metastore.jobs_search_idx;
DROP INDEX metastore.datasets_search_tail_idx;
DROP INDEX metastore.datasets_search_idx;
DROP FUNCTION metastore.name_tail(text);
DROP FUNCTION metastore.search_key(text);
DROP INDEX metastore.runs_user_idx;
DROP INDEX metastore.runs_state_idx;
DROP INDEX metastore.runs_time_idx;
