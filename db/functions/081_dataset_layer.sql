-- What the derived tables say about one dataset, for metastore.get_dataset.
CREATE OR REPLACE FUNCTION metastore.dataset_layer(p_id bigint)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    -- Bounds of the lists: a dataset page, not an export.
    c_versions constant integer := 20;
    c_hop      constant integer := 100;
    c_columns  constant integer := 1000;
    v_aliases  bigint[] := metastore.dataset_aliases(ARRAY[p_id], c_hop);
    v_hide     record := metastore.hidden_names();
BEGIN
    -- db/functions is applied whatever the deploy's target: before change 6 the page stays as it was.
    IF to_regclass('metastore.column_lineage') IS NULL THEN
        RETURN jsonb_build_object('fields', '[]'::jsonb, 'schema_versions', '[]'::jsonb,
                                  'column_lineage', '[]'::jsonb, 'upstream', '[]'::jsonb, 'downstream', '[]'::jsonb);
    END IF;
    RETURN jsonb_build_object(
        -- The newest version by eventTime is the current schema.
        'fields', coalesce((SELECT v.fields FROM metastore.dataset_schema_versions AS v
                             WHERE v.dataset_id = p_id
                             ORDER BY v.last_seen DESC, v.first_seen DESC, v.fields_sha256 LIMIT 1), '[]'),
        'schema_versions', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'fields_sha256', encode(v.fields_sha256, 'hex'), 'field_count', jsonb_array_length(v.fields),
                       'first_event_id', v.first_event_id, 'first_seen', v.first_seen, 'last_seen', v.last_seen,
                       'fields', v.fields)
                       ORDER BY v.last_seen DESC, v.first_seen DESC, v.fields_sha256), '[]')
              FROM (SELECT * FROM metastore.dataset_schema_versions AS v WHERE v.dataset_id = p_id
                     ORDER BY v.last_seen DESC, v.first_seen DESC, v.fields_sha256 LIMIT c_versions) AS v),
        'column_lineage', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'field', nullif(c.output_field, ''),
                       'input', jsonb_build_object('id', d.id, 'namespace', d.namespace, 'name', d.name),
                       'input_field', c.input_field, 'transformation_type', c.transformation_type,
                       'transformation_subtype', c.transformation_subtype,
                       'first_seen', c.first_seen, 'last_seen', c.last_seen)
                       ORDER BY c.output_field, d.namespace, d.name, c.input_field,
                                c.transformation_type, c.transformation_subtype), '[]')
              FROM (SELECT * FROM metastore.column_lineage AS c WHERE c.output_dataset_id = p_id
                       AND c.input_dataset_id <> ALL (v_hide.dataset_ids)
                     ORDER BY c.output_field, c.input_dataset_id, c.input_field,
                              c.transformation_type, c.transformation_subtype
                     LIMIT c_columns) AS c
              JOIN metastore.datasets_view AS d ON d.id = c.input_dataset_id
             WHERE d.namespace <> ALL (v_hide.namespaces)),
        -- One hop, from the dataset and its symlink aliases.
        'upstream', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind,
                       'jobs', n.jobs, 'last_seen', n.last_seen) ORDER BY d.namespace, d.name), '[]')
              FROM (SELECT e.upstream_id AS id, count(DISTINCT e.job_sha256) AS jobs, max(e.last_seen) AS last_seen
                      FROM metastore.lineage_edges AS e
                      JOIN metastore.datasets AS u ON u.id = e.upstream_id
                     WHERE e.downstream_id = ANY (v_aliases)
                       AND u.id <> ALL (v_hide.dataset_ids) AND u.namespace <> ALL (v_hide.namespaces)
                       AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                     GROUP BY e.upstream_id ORDER BY e.upstream_id LIMIT c_hop) AS n
              JOIN metastore.datasets_view AS d ON d.id = n.id),
        'downstream', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind,
                       'jobs', n.jobs, 'last_seen', n.last_seen) ORDER BY d.namespace, d.name), '[]')
              FROM (SELECT e.downstream_id AS id, count(DISTINCT e.job_sha256) AS jobs, max(e.last_seen) AS last_seen
                      FROM metastore.lineage_edges AS e
                      JOIN metastore.datasets AS w ON w.id = e.downstream_id
                     WHERE e.upstream_id = ANY (v_aliases)
                       AND w.id <> ALL (v_hide.dataset_ids) AND w.namespace <> ALL (v_hide.namespaces)
                       AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                     GROUP BY e.downstream_id ORDER BY e.downstream_id LIMIT c_hop) AS n
              JOIN metastore.datasets_view AS d ON d.id = n.id));
END
$fn$;

COMMENT ON FUNCTION metastore.dataset_layer(bigint) IS
    'For metastore.get_dataset: a dataset''s current fields (its newest schema version by eventTime), its '
    'schema_versions (newest 20), column_lineage (output field <- input dataset and field, at most 1000; '
    'field null: the dataset-level list), and one hop of upstream and downstream datasets (at most 100 each, '
    'with the number of jobs), crossing symlinks. Hidden datasets and jobs (metastore.hide) are left out.';

REVOKE ALL ON FUNCTION metastore.dataset_layer(bigint) FROM PUBLIC;
