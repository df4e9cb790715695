-- The datasets among p_ids whose current fields (the version no later one replaced) have a top-level
-- field named p_field, first p_limit in (namespace, name) byte order: the order of
-- metastore.dataset_key, which COLLATE "C" compares alike without calling it per row.
CREATE OR REPLACE FUNCTION metastore.datasets_with_field_among(p_ids bigint[], p_field text, p_limit integer)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_hide record := metastore.hidden_names();
BEGIN
    -- PL/pgSQL, not SQL: db/functions are applied at every version, also before change 6 made these tables.
    RETURN (SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.namespace COLLATE "C", d.name COLLATE "C"), '[]')
      FROM (SELECT d.*
              FROM metastore.datasets_view AS d
             WHERE d.id = ANY (p_ids)
               -- What the owner hid (metastore.hide) is not listed.
               AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
               AND EXISTS (SELECT FROM metastore.dataset_schema_versions AS v
                            WHERE v.dataset_id = d.id
                              AND jsonb_path_query_array(v.fields, '$[*].name') @> jsonb_build_array(p_field)
                              AND NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                               WHERE n.dataset_id = v.dataset_id
                                                 AND (n.last_seen, n.first_seen, v.fields_sha256)
                                                     > (v.last_seen, v.first_seen, n.fields_sha256)))
             ORDER BY d.namespace COLLATE "C", d.name COLLATE "C"
             LIMIT p_limit) AS d);
END
$fn$;

COMMENT ON FUNCTION metastore.datasets_with_field_among(bigint[], text, integer) IS
    'metastore.datasets_with_field''s page among the datasets p_ids: those whose current fields have a '
    'top-level field named p_field, at most p_limit, in (namespace, name) byte order, without the hidden ones '
    '(metastore.hide). Owner only.';

REVOKE ALL ON FUNCTION metastore.datasets_with_field_among(bigint[], text, integer) FROM PUBLIC;

-- Datasets by field name, through the GIN index on the field names of schema versions.
CREATE OR REPLACE FUNCTION metastore.datasets_with_field(p_field text, p_limit integer DEFAULT 100)
RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    -- A field few datasets have is found through the GIN index and its datasets sorted; one many
    -- have (an "id") is found by walking datasets in order until the page is full. Neither way
    -- alone is bounded: sorting every dataset with an "id" took 0.4 to 2 s at a million datasets,
    -- and a walk to the end for a rare field reads all of them. The planner cannot choose, as it
    -- has no estimate for a jsonb containment, so the count of datasets whose current version has
    -- the field decides (bench.lineage --field-search).
    c_few   constant integer := 5000;
    v_few   bigint[];
    v_rows  jsonb := '[]';
    v_chunk bigint[];
    v_after bytea;
    v_size  integer := p_limit * 4;
BEGIN
    IF p_field IS NULL OR p_field = '' OR octet_length(p_field) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'field must be a name of 1 to 1000 bytes';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    -- Current versions only: a field many datasets had and dropped would otherwise send a search
    -- that finds few on a walk through every dataset (2 s at 200 000 datasets).
    v_few := ARRAY(SELECT v.dataset_id FROM metastore.dataset_schema_versions AS v
                    WHERE jsonb_path_query_array(v.fields, '$[*].name') @> jsonb_build_array(p_field)
                      AND NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS n
                                       WHERE n.dataset_id = v.dataset_id
                                         AND (n.last_seen, n.first_seen, v.fields_sha256)
                                             > (v.last_seen, v.first_seen, n.fields_sha256))
                    LIMIT c_few + 1);
    IF cardinality(v_few) <= c_few THEN
        v_rows := metastore.datasets_with_field_among(v_few, p_field, p_limit);
    ELSE
        -- Chunks of datasets in (namespace, name) order, the order of datasets_order_idx (as
        -- metastore.list_datasets pages), each checked in one statement, until the page is full.
        LOOP
            v_chunk := ARRAY(SELECT d.id FROM metastore.datasets AS d
                              WHERE v_after IS NULL
                                 OR (substr(metastore.dataset_key(d.namespace, d.name), 1, 1024) >= substr(v_after, 1, 1024)
                                     AND metastore.dataset_key(d.namespace, d.name) > v_after)
                              ORDER BY substr(metastore.dataset_key(d.namespace, d.name), 1, 1024),
                                       metastore.dataset_key(d.namespace, d.name)
                              LIMIT v_size);
            EXIT WHEN cardinality(v_chunk) = 0;
            v_rows := v_rows || metastore.datasets_with_field_among(v_chunk, p_field, p_limit - jsonb_array_length(v_rows));
            EXIT WHEN jsonb_array_length(v_rows) >= p_limit OR cardinality(v_chunk) < v_size;
            SELECT metastore.dataset_key(d.namespace, d.name) INTO v_after
              FROM metastore.datasets AS d WHERE d.id = v_chunk[cardinality(v_chunk)];
            v_size := least(v_size * 2, 20000);
        END LOOP;
    END IF;
    RETURN jsonb_build_object('field', p_field, 'datasets', v_rows);
END
$fn$;

COMMENT ON FUNCTION metastore.datasets_with_field(text, integer) IS
    'Datasets whose current fields (metastore.get_dataset''s "fields") have a top-level field named exactly '
    'p_field: {field, datasets}, in (namespace, name) byte order as metastore.list_datasets, at most p_limit; '
    'hidden datasets (metastore.hide) are left out. '
    'Error codes: 22023 field empty or over 1000 bytes, limit outside 1..1000.';

REVOKE ALL ON FUNCTION metastore.datasets_with_field(text, integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.datasets_with_field(text, integer) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
