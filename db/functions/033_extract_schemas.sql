-- The schema rule, in one place: metastore.derive_lineage calls it for live ingest and backfill.
CREATE OR REPLACE FUNCTION metastore.extract_schemas(p_payload jsonb)
RETURNS TABLE (namespace text, name text, fields jsonb)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT DISTINCT d ->> 'namespace', d ->> 'name', d #> '{facets,schema,fields}'
      FROM (SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(p_payload -> 'inputs') = 'array'
                                             THEN p_payload -> 'inputs' ELSE '[]' END)
            UNION ALL
            SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(p_payload -> 'outputs') = 'array'
                                             THEN p_payload -> 'outputs' ELSE '[]' END)
            UNION ALL
            SELECT p_payload -> 'dataset' WHERE metastore.event_kind(p_payload) = 'dataset') AS t (d)
     WHERE jsonb_typeof(d) = 'object'
       AND jsonb_typeof(d -> 'namespace') = 'string' AND jsonb_typeof(d -> 'name') = 'string'
       -- An empty list says nothing about the fields (some producers send it when they do not know).
       AND jsonb_typeof(d #> '{facets,schema,fields}') = 'array'
       AND jsonb_array_length(d #> '{facets,schema,fields}') > 0
$fn$;

COMMENT ON FUNCTION metastore.extract_schemas(jsonb) IS
    'The field lists an event''s inputs, outputs and DatasetEvent dataset carry in their schema facet, '
    'one row per distinct (namespace, name, fields); fields is the facet''s non-empty "fields" array as sent.';

REVOKE ALL ON FUNCTION metastore.extract_schemas(jsonb) FROM PUBLIC;
