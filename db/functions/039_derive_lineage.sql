-- Derives stored events' schema versions, lineage edges and column lineage: called by
-- metastore.store_events for the events it stores and by metastore.backfill for every event, a
-- set at a time. Upserts keyed by what they describe, so rows grow with distinct facts, not with
-- events; a set first reduces to one row per key with the rule the upsert applies, so any split of
-- the events into sets, in any order, gives the same rows. An event that moves no first_seen or
-- last_seen writes nothing.
DROP FUNCTION IF EXISTS metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[]);
DROP FUNCTION IF EXISTS metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[]);
DROP FUNCTION IF EXISTS metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], bigint[], text[], text[]);
CREATE OR REPLACE FUNCTION metastore.derive_lineage(
    p_event_ids   bigint[],
    p_payloads    jsonb[],
    p_events      metastore.valid_event[],
    p_dataset_ids jsonb DEFAULT NULL
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
-- Its statements read parameters only through equality lookups on keys, which a generic plan does
-- as well as a custom one, and a custom plan is planned anew on each call. The planner guesses 100
-- rows per jsonb set function, so nested ones look like millions: a hash aggregate sized for that
-- costs more than sorting the few rows there are.
SET plan_cache_mode = force_generic_plan
SET enable_hashagg = off
-- Every read of a table here is a lookup by key. On a young store (a few hundred rows, analyzed)
-- the generic plan took a sequential scan of lineage_edges for each new edge instead, which also
-- reads the rows the statement has just inserted: quadratic in an event's inputs and outputs.
SET enable_seqscan = off
AS $fn$
DECLARE
    v_id_of      jsonb;
    -- A row of an older generation is replaced, not merged into (metastore.backfill rebuilds).
    v_generation integer := metastore.derive_generation();
BEGIN
    -- Callers (store_events, backfill) call this only where change 6 is deployed.
    -- p_events[i] is what metastore.validate_event read from p_payloads[i], stored as p_event_ids[i].
    -- The datasets these events mention (their mentions), by id in a jsonb object keyed by
    -- [namespace, name]: the statements below look each one up there (a lookup each), never by a
    -- join to arrays (the planner, which guesses ten rows for each side, joined every event to all
    -- of the set's datasets: most of a backfill's time), nor in the table by name (metastore.dataset_key per row). Every dataset a
    -- statement below resolves is a mention of its own event (the input fields of columnLineage
    -- facets included, metastore.extract_datasets), so what an event derives never depends on which
    -- other events came first. metastore.derive_datasets returns them (store_events and backfill
    -- pass that on); without them they are looked up by name_key, a probe per distinct mention.
    v_id_of := p_dataset_ids;
    IF v_id_of IS NULL THEN
        SELECT jsonb_object_agg(metastore.mention_key(d.namespace, d.name), d.id) INTO v_id_of
          FROM (SELECT DISTINCT x.namespace, x.name
                  FROM unnest(p_events) AS e
                 CROSS JOIN LATERAL unnest(e.mentions) AS x) AS m
          JOIN metastore.datasets AS d ON d.name_key = sha256(metastore.dataset_key(m.namespace, m.name));
    END IF;
    IF v_id_of IS NULL OR v_id_of = '{}' THEN
        RETURN;
    END IF;

    -- Schema facets of inputs, outputs and a DatasetEvent's dataset. An empty list says nothing
    -- about the fields (some producers send it when they do not know them). The version's first
    -- event is the one of the earliest eventTime, at a tie the first stored (the smaller id, so
    -- that sets applied in any order agree).
    INSERT INTO metastore.dataset_schema_versions AS v
           (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen, generation)
    SELECT s.id, s.h, (array_agg(s.fields ORDER BY s.event_time, s.event_id))[1],
           (array_agg(s.event_id ORDER BY s.event_time, s.event_id))[1],
           min(s.event_time), max(s.event_time), v_generation
      FROM (SELECT s0.*, (v_id_of ->> metastore.mention_key(s0.namespace, s0.name))::bigint AS id
      FROM (SELECT DISTINCT u.event_id, u.event_time, ds ->> 'namespace' AS namespace, ds ->> 'name' AS name,
                   ds #> '{facets,schema,fields}' AS fields,
                   sha256(convert_to((ds #> '{facets,schema,fields}')::text, 'UTF8')) AS h
              FROM ROWS FROM (unnest(p_event_ids), unnest(p_payloads), unnest(p_events))
                   AS u (event_id, payload)
              -- A jsonpath test costs microseconds: events without a schema facet go no further.
             CROSS JOIN LATERAL (
                    SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'inputs') = 'array'
                                                     THEN u.payload -> 'inputs' ELSE '[]' END)
                    UNION ALL
                    SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'outputs') = 'array'
                                                     THEN u.payload -> 'outputs' ELSE '[]' END)
                    UNION ALL
                    SELECT u.payload -> 'dataset' WHERE u.event_kind = 'dataset') AS t (ds)
             WHERE (u.payload @? '$.inputs[*].facets.schema' OR u.payload @? '$.outputs[*].facets.schema'
                    OR u.payload @? '$.dataset.facets.schema')
               AND jsonb_typeof(ds) = 'object'
               AND jsonb_typeof(ds -> 'namespace') = 'string' AND jsonb_typeof(ds -> 'name') = 'string'
               -- CASE, not AND: AND does not stop a length of an object from being asked (an error).
               AND CASE WHEN jsonb_typeof(ds #> '{facets,schema,fields}') = 'array'
                        THEN jsonb_array_length(ds #> '{facets,schema,fields}') > 0 ELSE false END) AS s0) AS s
     WHERE s.id IS NOT NULL
     GROUP BY s.id, s.h
    HAVING NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS seen
                        WHERE seen.dataset_id = s.id AND seen.fields_sha256 = s.h AND seen.generation = v_generation
                          AND (seen.first_seen, seen.first_event_id)
                              <= (min(s.event_time), (array_agg(s.event_id ORDER BY s.event_time, s.event_id))[1])
                          AND seen.last_seen >= max(s.event_time))
     ORDER BY 1, 2
    ON CONFLICT (dataset_id, fields_sha256) DO UPDATE
       SET first_event_id = CASE WHEN v.generation <> excluded.generation
                                   OR (excluded.first_seen, excluded.first_event_id) < (v.first_seen, v.first_event_id)
                                 THEN excluded.first_event_id ELSE v.first_event_id END,
           first_seen = metastore.generation_least(v.generation, excluded.generation, v.first_seen, excluded.first_seen),
           last_seen = metastore.generation_greatest(v.generation, excluded.generation, v.last_seen, excluded.last_seen),
           generation = excluded.generation
     WHERE v.generation <> excluded.generation
        OR (excluded.first_seen, excluded.first_event_id) < (v.first_seen, v.first_event_id)
        OR excluded.last_seen > v.last_seen;

    -- Edges and column lineage keep first_seen and last_seen to the hour (UTC): an event that
    -- repeats them within the hour writes nothing (a query that runs every minute would otherwise
    -- rewrite each of its rows every minute). Schema versions keep exact times, so that the current
    -- fields are those of the newest event. Either way a function of the set of events, whatever
    -- their order: backfill gives what live ingest gave.
    -- Each input the event lists to each of its outputs, and each input dataset of a columnLineage
    -- facet to the output that carries it, through the event's job; symlinks do not make edges.
    INSERT INTO metastore.lineage_edges AS e
           (upstream_id, downstream_id, job_sha256, job_namespace, job_name, first_seen, last_seen, generation)
    -- Each event's input and output ids and the facets' (input, output) pairs are arrays made in one
    -- pass each (OFFSET 0 keeps the subquery whole: flattened, the outputs were looked up again for
    -- every input).
    SELECT p.up, p.down, j.h, min(j.job_namespace), min(j.job_name), min(j.hour), max(j.hour), v_generation
      FROM (SELECT coalesce(u.job_namespace, '') AS job_namespace, u.job_name,
                   date_trunc('hour', u.event_time, 'UTC') AS hour,
                   sha256(convert_to(metastore.mention_key(u.job_namespace, u.job_name), 'UTF8')) AS h,
                   CASE WHEN cl.ups IS NULL THEN io.inputs ELSE li.listed END AS inputs, io.outputs, cl.ups, cl.downs
              FROM ROWS FROM (unnest(p_payloads), unnest(p_events))
                   AS u (payload)
             CROSS JOIN LATERAL (
                    SELECT array_agg(DISTINCT m.id) FILTER (WHERE m.direction = 'input') AS inputs,
                           array_agg(DISTINCT m.id) FILTER (WHERE m.direction = 'output') AS outputs
                      FROM (SELECT x.direction,
                                   (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint AS id
                              FROM unnest(u.mentions) AS x
                             WHERE x.symlink_of_namespace IS NULL) AS m
                     WHERE m.id IS NOT NULL) AS io
             -- The input mentions hold the datasets the facets name, listed or not. An event with
             -- one it does not list (Spark's COMPLETE) has its facets read: such an input reaches
             -- only the output whose facet names it, and its listed inputs, read from the payload,
             -- reach every output. The others' pairs are among their inputs times outputs, and an
             -- event without the facet (a test of microseconds) reads neither.
             CROSS JOIN LATERAL (SELECT u.payload @? '$.outputs[*].facets.columnLineage') AS k (lineage)
             CROSS JOIN LATERAL (
                    SELECT array_agg(DISTINCT (v_id_of ->> metastore.mention_key(i ->> 'namespace', i ->> 'name'))::bigint)
                      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'inputs') = 'array'
                                                     THEN u.payload -> 'inputs' ELSE '[]' END) AS i
                     WHERE k.lineage) AS li (listed)
             CROSS JOIN LATERAL (
                    SELECT array_agg(c.up), array_agg(c.down)
                      FROM (SELECT DISTINCT
                                   (v_id_of ->> metastore.mention_key(inf ->> 'namespace', inf ->> 'name'))::bigint AS up,
                                   (v_id_of ->> metastore.mention_key(od ->> 'namespace', od ->> 'name'))::bigint AS down
                              FROM jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'outputs') = 'array'
                                                             THEN u.payload -> 'outputs' ELSE '[]' END) AS od
                             CROSS JOIN LATERAL (
                                    SELECT fe.value -> 'inputFields'
                                      FROM jsonb_each(CASE WHEN jsonb_typeof(od #> '{facets,columnLineage,fields}') = 'object'
                                                           THEN od #> '{facets,columnLineage,fields}' ELSE '{}' END) AS fe
                                    UNION ALL
                                    SELECT od #> '{facets,columnLineage,dataset}') AS f (inputs)
                             CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                                          THEN f.inputs ELSE '[]' END) AS inf
                             WHERE k.lineage
                               AND EXISTS (SELECT FROM unnest(io.inputs) AS n (id) WHERE n.id <> ALL (coalesce(li.listed, '{}')))
                               AND jsonb_typeof(inf -> 'namespace') = 'string' AND jsonb_typeof(inf -> 'name') = 'string'
                               AND jsonb_typeof(inf -> 'field') = 'string') AS c
                     WHERE c.up IS NOT NULL AND c.down IS NOT NULL) AS cl (ups, downs)
             WHERE u.job_name IS NOT NULL
            OFFSET 0) AS j
     CROSS JOIN LATERAL (
            SELECT im.id, om.id FROM unnest(j.inputs) AS im (id) CROSS JOIN unnest(j.outputs) AS om (id)
            UNION ALL
            SELECT c.up, c.down FROM unnest(j.ups, j.downs) AS c (up, down)) AS p (up, down)
     WHERE p.up IS NOT NULL AND p.down IS NOT NULL
     GROUP BY p.up, p.down, j.h
    HAVING NOT EXISTS (SELECT FROM metastore.lineage_edges AS seen
                        WHERE seen.upstream_id = p.up AND seen.downstream_id = p.down AND seen.job_sha256 = j.h
                          AND seen.generation = v_generation
                          AND seen.first_seen <= min(j.hour) AND seen.last_seen >= max(j.hour))
     ORDER BY 1, 2, 3
    ON CONFLICT (upstream_id, downstream_id, job_sha256) DO UPDATE
       SET first_seen = metastore.generation_least(e.generation, excluded.generation, e.first_seen, excluded.first_seen),
           last_seen = metastore.generation_greatest(e.generation, excluded.generation, e.last_seen, excluded.last_seen),
           generation = excluded.generation
     WHERE e.generation <> excluded.generation OR excluded.first_seen < e.first_seen OR excluded.last_seen > e.last_seen;

    INSERT INTO metastore.column_lineage AS c
           (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
            transformation_subtype, first_seen, last_seen, edge_sha256, generation)
    SELECT x.output_id, min(x.output_field), x.input_id, min(x.input_field), min(x.transformation_type),
           min(x.transformation_subtype), min(x.hour), max(x.hour), x.h, v_generation
      -- columnLineage facets of outputs: per field, and the dataset-level "dataset" list (inputs that
      -- affect the whole output: filters, joins, grouping) with output_field empty. An input field
      -- without transformations is one edge of unknown type ('', '').
      -- Fields and transformations are of any length: the key is the hash of all four (edge_sha256).
      FROM (SELECT x0.*, sha256(convert_to(jsonb_build_array(x0.output_field, x0.input_field, x0.transformation_type,
                                                             x0.transformation_subtype)::text, 'UTF8')) AS h,
                   (v_id_of ->> metastore.mention_key(x0.namespace, x0.name))::bigint AS output_id,
                   (v_id_of ->> metastore.mention_key(x0.input_namespace, x0.input_name))::bigint AS input_id
      FROM (SELECT DISTINCT date_trunc('hour', u.event_time, 'UTC') AS hour,
                   od ->> 'namespace' AS namespace, od ->> 'name' AS name, f.field AS output_field,
                   inf ->> 'namespace' AS input_namespace, inf ->> 'name' AS input_name,
                   inf ->> 'field' AS input_field,
                   coalesce(metastore.facet_text(tr -> 'type'), '')
                       AS transformation_type,
                   coalesce(metastore.facet_text(tr -> 'subtype'), '')
                       AS transformation_subtype
              FROM ROWS FROM (unnest(p_payloads), unnest(p_events))
                   AS u (payload)
             CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(u.payload -> 'outputs') = 'array'
                                                          THEN u.payload -> 'outputs' ELSE '[]' END) AS od
             CROSS JOIN LATERAL (
                    SELECT fe.key, fe.value -> 'inputFields'
                      FROM jsonb_each(CASE WHEN jsonb_typeof(od #> '{facets,columnLineage,fields}') = 'object'
                                           THEN od #> '{facets,columnLineage,fields}' ELSE '{}' END) AS fe
                    UNION ALL
                    SELECT '', od #> '{facets,columnLineage,dataset}') AS f (field, inputs)
             CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                          THEN f.inputs ELSE '[]' END) AS inf
             CROSS JOIN LATERAL jsonb_array_elements(
                    CASE WHEN jsonb_typeof(inf -> 'transformations') IS DISTINCT FROM 'array' THEN '[{}]'
                         WHEN jsonb_array_length(inf -> 'transformations') > 0 THEN inf -> 'transformations'
                         ELSE '[{}]' END) AS tr
             WHERE u.payload @? '$.outputs[*].facets.columnLineage'
               AND jsonb_typeof(od) = 'object'
               AND jsonb_typeof(od -> 'namespace') = 'string' AND jsonb_typeof(od -> 'name') = 'string'
               AND jsonb_typeof(inf) = 'object'
               AND jsonb_typeof(inf -> 'namespace') = 'string' AND jsonb_typeof(inf -> 'name') = 'string'
               AND jsonb_typeof(inf -> 'field') = 'string') AS x0) AS x
     WHERE x.output_id IS NOT NULL AND x.input_id IS NOT NULL
     GROUP BY x.output_id, x.input_id, x.h
    HAVING NOT EXISTS (SELECT FROM metastore.column_lineage AS seen
                        WHERE seen.output_dataset_id = x.output_id AND seen.input_dataset_id = x.input_id
                          AND seen.edge_sha256 = x.h AND seen.generation = v_generation
                          AND seen.first_seen <= min(x.hour) AND seen.last_seen >= max(x.hour))
     ORDER BY 1, 3, 9
    ON CONFLICT (output_dataset_id, input_dataset_id, edge_sha256) DO UPDATE
       SET first_seen = metastore.generation_least(c.generation, excluded.generation, c.first_seen, excluded.first_seen),
           last_seen = metastore.generation_greatest(c.generation, excluded.generation, c.last_seen, excluded.last_seen),
           generation = excluded.generation
     WHERE c.generation <> excluded.generation OR excluded.first_seen < c.first_seen OR excluded.last_seen > c.last_seen;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], jsonb) IS
    'Derives stored events'' schema versions (the non-empty "fields" of schema facets of inputs, outputs '
    'and a DatasetEvent''s dataset), dataset lineage edges (each input the event lists to each of its outputs, '
    'and each input dataset of an output''s columnLineage facet to that output, through the job) and '
    'column lineage (columnLineage facets of outputs: one row per distinct output field, empty for the '
    'dataset-level list, input dataset and field, transformation type and subtype, both empty when not '
    'given; keyed by the sha256 of the four, so of any length) into '
    'dataset_schema_versions, lineage_edges and column_lineage. Arrays aligned by position: p_events[i] is '
    'what metastore.validate_event read from p_payloads[i] (its mentions: metastore.extract_datasets), '
    'stored as p_event_ids[i]; only the datasets of those mentions are resolved (or given, already resolved: '
    'p_dataset_ids, as metastore.derive_datasets returns them). Any split of the events '
    'into calls, applied in any order, gives the same rows; a row of an older generation than the current '
    'one (metastore.derive_generation) is replaced, not merged into. The rules live here only: live '
    'ingest (store_events) and backfill both call it.';

REVOKE ALL ON FUNCTION metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], jsonb) FROM PUBLIC;
