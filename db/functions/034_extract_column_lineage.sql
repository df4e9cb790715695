-- The column-lineage rule, in one place: metastore.derive_lineage calls it for live ingest and backfill.
CREATE OR REPLACE FUNCTION metastore.extract_column_lineage(p_payload jsonb)
RETURNS TABLE (namespace text, name text, output_field text, input_namespace text, input_name text,
               input_field text, transformation_type text, transformation_subtype text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT DISTINCT o ->> 'namespace', o ->> 'name', f.field, i ->> 'namespace', i ->> 'name', i ->> 'field',
           CASE WHEN jsonb_typeof(t -> 'type') = 'string' THEN t ->> 'type' ELSE '' END,
           CASE WHEN jsonb_typeof(t -> 'subtype') = 'string' THEN t ->> 'subtype' ELSE '' END
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_payload -> 'outputs') = 'array'
                                     THEN p_payload -> 'outputs' ELSE '[]' END) AS o
     CROSS JOIN LATERAL (
            SELECT c.key, c.value -> 'inputFields'
              FROM jsonb_each(CASE WHEN jsonb_typeof(o #> '{facets,columnLineage,fields}') = 'object'
                                   THEN o #> '{facets,columnLineage,fields}' ELSE '{}' END) AS c
            UNION ALL
            -- The dataset-level list: inputs that affect the whole output (filters, joins, grouping).
            SELECT NULL, o #> '{facets,columnLineage,dataset}') AS f (field, inputs)
     CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                  THEN f.inputs ELSE '[]' END) AS i
     -- An input field without transformations is one edge of unknown type ('', '').
     CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(i -> 'transformations') = 'array'
                                                       AND jsonb_array_length(i -> 'transformations') > 0
                                                  THEN i -> 'transformations' ELSE '[{}]' END) AS t
     WHERE jsonb_typeof(o) = 'object'
       AND jsonb_typeof(o -> 'namespace') = 'string' AND jsonb_typeof(o -> 'name') = 'string'
       AND jsonb_typeof(i) = 'object'
       AND jsonb_typeof(i -> 'namespace') = 'string' AND jsonb_typeof(i -> 'name') = 'string'
       AND jsonb_typeof(i -> 'field') = 'string'
       -- Bounded so that a key of column_lineage stays under the btree's entry limit (about 2700 bytes).
       AND octet_length(i ->> 'field') <= 1000 AND coalesce(octet_length(f.field), 0) <= 1000
       AND (jsonb_typeof(t -> 'type') IS DISTINCT FROM 'string' OR octet_length(t ->> 'type') <= 200)
       AND (jsonb_typeof(t -> 'subtype') IS DISTINCT FROM 'string' OR octet_length(t ->> 'subtype') <= 200)
$fn$;

COMMENT ON FUNCTION metastore.extract_column_lineage(jsonb) IS
    'The column lineage an event''s outputs carry in their columnLineage facet: one row per distinct '
    '(output, output field, input dataset, input field, transformation type, subtype). output_field is null '
    'for the facet''s dataset-level "dataset" list; type and subtype are empty when not given (an input field '
    'without transformations gives one row). Entries with a field over 1000 bytes or a type or subtype over '
    '200 bytes are skipped.';

REVOKE ALL ON FUNCTION metastore.extract_column_lineage(jsonb) FROM PUBLIC;
