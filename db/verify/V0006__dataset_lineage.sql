-- Verifies V0006: the derived tables with their keys, and no privileges on them for anyone.
SELECT dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen, generation
  FROM metastore.dataset_schema_versions WHERE false;
SELECT upstream_id, downstream_id, job_sha256, job_namespace, job_name, first_seen, last_seen, generation
  FROM metastore.lineage_edges WHERE false;
SELECT output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
       transformation_subtype, first_seen, last_seen, edge_sha256, generation
  FROM metastore.column_lineage WHERE false;

DO $verify$
BEGIN
    ASSERT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_index AS x
             WHERE x.indrelid = 'metastore.column_lineage'::regclass AND x.indisunique) = 1,
        'metastore.column_lineage needs its unique key';
    ASSERT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_indexes AS i
             WHERE i.schemaname = 'metastore'
               AND i.indexname IN ('lineage_edges_pkey', 'lineage_edges_downstream_idx',
                                   'dataset_schema_versions_pkey', 'column_lineage_input_idx',
                                   'dataset_schema_versions_names_idx')) = 5,
        'an index of the lineage tables is missing';
    ASSERT (SELECT x.indnatts FROM pg_catalog.pg_index AS x
             WHERE x.indexrelid = 'metastore.lineage_edges_downstream_idx'::regclass) = 3,
        'metastore.lineage_edges_downstream_idx must hold the whole key (downstream, upstream, job)';
END
$verify$;
