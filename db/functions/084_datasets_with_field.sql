-- Datasets by field name, through the GIN index on the field names of schema versions.
CREATE OR REPLACE FUNCTION metastore.datasets_with_field(p_field text, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
BEGIN
    IF p_field IS NULL OR p_field = '' OR octet_length(p_field) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'field must be a name of 1 to 1000 bytes';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    -- Versions with the name (the index), kept when current: no later version of their dataset.
    RETURN jsonb_build_object('field', p_field, 'datasets', (
        SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.namespace, d.name), '[]')
          FROM (SELECT d.*
                  FROM metastore.dataset_schema_versions AS v
                  JOIN metastore.datasets_view AS d ON d.id = v.dataset_id
                 WHERE jsonb_path_query_array(v.fields, '$[*].name') @> jsonb_build_array(p_field)
                   AND NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                    WHERE n.dataset_id = v.dataset_id
                                      AND (n.last_seen, n.first_seen, v.fields_sha256)
                                          > (v.last_seen, v.first_seen, n.fields_sha256))
                 ORDER BY d.namespace, d.name
                 LIMIT p_limit) AS d));
END
$fn$;

COMMENT ON FUNCTION metastore.datasets_with_field(text, integer) IS
    'Datasets whose current fields (metastore.get_dataset''s "fields") have a top-level field named exactly '
    'p_field: {field, datasets}, ordered by namespace and name, at most p_limit. '
    'Error codes: 22023 field empty or over 1000 bytes, limit outside 1..1000.';

REVOKE ALL ON FUNCTION metastore.datasets_with_field(text, integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.datasets_with_field(text, integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
