-- Reverts V0006: the functions that name the tables first, then the tables. store_events calls
-- derive_lineage only where metastore.column_lineage exists, so ingest goes on (db/CONVENTIONS.md).
DROP FUNCTION IF EXISTS metastore.datasets_with_field(text, integer);
DROP FUNCTION IF EXISTS metastore.datasets_with_field_among(bigint[], text, integer);
DROP FUNCTION IF EXISTS metastore.dataset_lineage(bigint, text, integer, integer);
DROP FUNCTION IF EXISTS metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[]);
DROP FUNCTION IF EXISTS metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], bigint[], text[], text[]);
DROP FUNCTION IF EXISTS metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], jsonb);
DROP FUNCTION IF EXISTS metastore.dataset_layer(bigint);
DROP FUNCTION IF EXISTS metastore.dataset_aliases(bigint[], integer);
DROP TABLE metastore.column_lineage;
DROP TABLE metastore.lineage_edges;
DROP TABLE metastore.dataset_schema_versions;
