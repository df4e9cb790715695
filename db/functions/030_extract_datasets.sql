-- The extraction rules, in one place: live ingest and backfill both call this.
-- A SQL function without a SET clause, so that PostgreSQL inlines it into the statement that
-- calls it (a PL/pgSQL loop cost many times as much per event of a backfill). Inlined or
-- not, its text is parsed under the caller's search_path: every function, operator and type is
-- qualified (db/CONVENTIONS.md). Malformed members are told apart by the checks in the CASEs,
-- whose other branch asks metastore.malformed_datasets to raise what is wrong; a list that is not
-- an array reads as one null item, so that the check of that item asks.
-- The datasets that outputs' columnLineage facets name as input fields come last, as a list of
-- their own: a producer may name a source in the facet and not in the event's inputs (Spark's
-- COMPLETE often lists none, its START did), and the facet does not require it to.
CREATE OR REPLACE FUNCTION metastore.extract_datasets(p_payload jsonb)
RETURNS SETOF metastore.dataset_mention
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
    SELECT x.namespace, x.name, l.direction, x.symlink_of_namespace, x.symlink_of_name, x.symlink_type
      -- inputs, outputs, and the dataset of a DatasetEvent (a "dataset" key elsewhere is ignored);
      -- a member absent or JSON null is no list.
      FROM (SELECT 1, 'input'::pg_catalog.text,
                   CASE WHEN pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                        THEN p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text
                        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text),
                                      'null'::pg_catalog.text) OPERATOR(pg_catalog.=) 'null'::pg_catalog.text
                        THEN '[]'::pg_catalog.jsonb
                        ELSE '[null]'::pg_catalog.jsonb END
            UNION ALL
            SELECT 2, 'output'::pg_catalog.text,
                   CASE WHEN pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'outputs'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                        THEN p_payload OPERATOR(pg_catalog.->) 'outputs'::pg_catalog.text
                        WHEN coalesce(pg_catalog.jsonb_typeof(p_payload OPERATOR(pg_catalog.->) 'outputs'::pg_catalog.text),
                                      'null'::pg_catalog.text) OPERATOR(pg_catalog.=) 'null'::pg_catalog.text
                        THEN '[]'::pg_catalog.jsonb
                        ELSE '[null]'::pg_catalog.jsonb END
            UNION ALL
            -- event_kind 'dataset' means "dataset" is an object.
            SELECT 3, 'none'::pg_catalog.text,
                   pg_catalog.jsonb_build_array(p_payload OPERATOR(pg_catalog.->) 'dataset'::pg_catalog.text)
             WHERE metastore.event_kind(p_payload) OPERATOR(pg_catalog.=) 'dataset'::pg_catalog.text
            UNION ALL
            -- Every dataset an input field of a columnLineage facet of an output names (per output
            -- field, and the dataset-level "dataset" list), as an input, once, unless the event lists
            -- it among its inputs; made of namespace and name only, so that the items below find no
            -- facets in them. An entry without string namespace, name and field, or with an empty
            -- namespace or name, is skipped as a malformed symlink identifier is, and so is a member
            -- on the way that is absent or not an object (fields, inputFields and dataset: not an
            -- array): in strict paths, an error in a filter skips its item; silent (true), an event
            -- without outputs gives none. Nothing here raises: a malformed output is told by the
            -- items of list 2. Two path queries under an aggregate: the executor sets up every node
            -- and expression of this plan for each event, facet or not, and the same rule walked with
            -- jsonb operators, hashed and sorted, cost an event without the facet a quarter more
            -- (ingest calls this once per event).
            SELECT 4, 'input'::pg_catalog.text,
                   (SELECT pg_catalog.jsonb_agg(DISTINCT f.dataset)
                      FROM (SELECT e FROM pg_catalog.jsonb_path_query(p_payload,
                                'strict $.outputs[*] ? (@.facets.columnLineage.fields.type() == "object")
                                   .facets.columnLineage.fields.* ? (@.inputFields.type() == "array").inputFields[*]
                                   ? (@.namespace.type() == "string" && @.name.type() == "string"
                                      && @.field.type() == "string" && @.namespace != "" && @.name != "")'::pg_catalog.jsonpath,
                                '{}'::pg_catalog.jsonb, true) AS e
                            UNION ALL
                            SELECT e FROM pg_catalog.jsonb_path_query(p_payload,
                                'strict $.outputs[*] ? (@.facets.columnLineage.dataset.type() == "array")
                                   .facets.columnLineage.dataset[*]
                                   ? (@.namespace.type() == "string" && @.name.type() == "string"
                                      && @.field.type() == "string" && @.namespace != "" && @.name != "")'::pg_catalog.jsonpath,
                                '{}'::pg_catalog.jsonb, true) AS e) AS x (entry)
                     CROSS JOIN LATERAL (
                            SELECT pg_catalog.jsonb_build_object(
                                       'namespace'::pg_catalog.text, x.entry OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text,
                                       'name'::pg_catalog.text, x.entry OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text)
                           ) AS f (dataset)
                     -- Listed: an item of inputs has this namespace and name.
                     WHERE NOT coalesce((p_payload OPERATOR(pg_catalog.->) 'inputs'::pg_catalog.text)
                                            OPERATOR(pg_catalog.@>) pg_catalog.jsonb_build_array(f.dataset),
                                        false))
             -- Most events have no such facet: a test of microseconds spares them the rest.
             WHERE p_payload OPERATOR(pg_catalog.@?) '$.outputs[*].facets.columnLineage'::pg_catalog.jsonpath
            ) AS l (o, direction, list)
     CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(l.list) WITH ORDINALITY AS i (item, io)
     -- Each item's namespace and name: non-empty strings of any length (change 5, dataset_key).
     CROSS JOIN LATERAL (
            SELECT CASE WHEN pg_catalog.jsonb_typeof(i.item OPERATOR(pg_catalog.->) 'namespace'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                         AND (i.item OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
                        THEN i.item OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text
                        ELSE metastore.malformed_datasets(p_payload, i.item) OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text END,
                   CASE WHEN pg_catalog.jsonb_typeof(i.item OPERATOR(pg_catalog.->) 'name'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                         AND (i.item OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
                        THEN i.item OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text
                        ELSE metastore.malformed_datasets(p_payload, i.item) OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text END
            ) AS d (namespace, name)
     -- The item itself, then every identifier of its symlinks facet. Facets are free-form: a
     -- malformed identifier is skipped rather than costing the whole event (the raw event keeps it
     -- for a later backfill), and so is one that names the item itself.
     CROSS JOIN LATERAL (
            SELECT 0::pg_catalog.int8, d.namespace, d.name, NULL::pg_catalog.text, NULL::pg_catalog.text,
                   NULL::pg_catalog.text
            UNION ALL
            SELECT s.so, s.ident OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text,
                   s.ident OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text, d.namespace, d.name,
                   CASE WHEN pg_catalog.jsonb_typeof(s.ident OPERATOR(pg_catalog.->) 'type'::pg_catalog.text)
                             OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                        THEN pg_catalog.left(s.ident OPERATOR(pg_catalog.->>) 'type'::pg_catalog.text, 200)
                        ELSE ''::pg_catalog.text END
              FROM pg_catalog.jsonb_array_elements(
                       CASE WHEN pg_catalog.jsonb_typeof(i.item OPERATOR(pg_catalog.#>) '{facets,symlinks,identifiers}'::pg_catalog.text[])
                                 OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                            THEN i.item OPERATOR(pg_catalog.#>) '{facets,symlinks,identifiers}'::pg_catalog.text[]
                            ELSE '[]'::pg_catalog.jsonb END) WITH ORDINALITY AS s (ident, so)
             WHERE pg_catalog.jsonb_typeof(s.ident OPERATOR(pg_catalog.->) 'namespace'::pg_catalog.text)
                       OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
               AND pg_catalog.jsonb_typeof(s.ident OPERATOR(pg_catalog.->) 'name'::pg_catalog.text)
                       OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
               AND (s.ident OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
               AND (s.ident OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text) OPERATOR(pg_catalog.<>) ''::pg_catalog.text
               AND NOT ((s.ident OPERATOR(pg_catalog.->>) 'namespace'::pg_catalog.text) OPERATOR(pg_catalog.=) d.namespace
                        AND (s.ident OPERATOR(pg_catalog.->>) 'name'::pg_catalog.text) OPERATOR(pg_catalog.=) d.name)
            ) AS x (so, namespace, name, symlink_of_namespace, symlink_of_name, symlink_type)
     ORDER BY l.o, i.io, x.so
$fn$;

COMMENT ON FUNCTION metastore.extract_datasets(jsonb) IS
    'The datasets an OpenLineage event mentions, one row per mention, in the event''s order: its inputs '
    '(direction input), its outputs (output), a DatasetEvent''s dataset (none), each followed by every '
    'symlinks-facet identifier of it (same direction, with symlink_of_* naming the dataset that carries it), '
    'then each dataset that an input field of an output''s columnLineage facet names and the inputs do not list '
    '(input, once each, in no particular order). Nothing else. Namespaces and names may be of any length. A SQL function that PostgreSQL inlines. '
    'Error codes: 22023 malformed inputs/outputs/dataset (raised by metastore.malformed_datasets).';

REVOKE ALL ON FUNCTION metastore.extract_datasets(jsonb) FROM PUBLIC;
