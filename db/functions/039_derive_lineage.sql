-- Derives an event's schema versions, lineage edges and column lineage: called by
-- metastore.store_event for each newly stored event and by metastore.backfill for every event.
-- Upserts keyed by what they describe, so rows grow with distinct facts, not with events; an
-- event that moves no first_seen or last_seen writes nothing.
CREATE OR REPLACE FUNCTION metastore.derive_lineage(
    p_event_id      bigint,
    p_event_time    timestamptz,
    p_payload       jsonb,
    p_job_namespace text,
    p_job_name      text,
    p_mentions      metastore.dataset_mention[]
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
-- Its statements read parameters only through equality lookups on keys, which a generic plan does
-- as well as a custom one, and a custom plan is planned anew on each call. The planner guesses 100
-- rows per jsonb set function, so nested ones look like millions: a hash aggregate sized for that
-- costs more than sorting the few rows there are (measured: 0.58 against 0.47 ms per Trino CTAS
-- event, track_functions, one run on a shared machine).
SET plan_cache_mode = force_generic_plan
SET enable_hashagg = off
AS $fn$
DECLARE
    v_ids   bigint[];
    v_ns    text[];
    v_names text[];
    v_in    bigint[];
    v_out   bigint[];
    v_job   bytea;
    -- Edges and column lineage keep first_seen and last_seen to the hour (UTC): an event that
    -- repeats them within the hour writes nothing (a query that runs every minute would otherwise
    -- rewrite each of its rows every minute). Schema versions keep exact times, so that the current
    -- fields are those of the newest event. Either way a function of the set of events, whatever
    -- their order: backfill gives what live ingest gave.
    v_hour  timestamptz := date_trunc('hour', p_event_time, 'UTC');
BEGIN
    -- Callers (store_event, backfill) call this only where change 6 is deployed.
    -- The datasets this event mentions (metastore.extract_datasets), looked up by name_key as
    -- store_event does (one index probe per distinct mention), with the inputs and outputs that get
    -- lineage edges. Only these are resolved: a column-lineage input the event does not mention is
    -- skipped, so what an event derives never depends on which other events came first. The
    -- statements below join to these arrays on (namespace, name) (a hash join on the text, cheaper
    -- than a key per row: metastore.dataset_key is a PL/pgSQL call), never to the table by name.
    SELECT array_agg(d.id), array_agg(d.namespace), array_agg(d.name),
           array_agg(d.id) FILTER (WHERE m.is_input), array_agg(d.id) FILTER (WHERE m.is_output)
      INTO v_ids, v_ns, v_names, v_in, v_out
      FROM (SELECT sha256(metastore.dataset_key(x.namespace, x.name)) AS name_key,
                   bool_or(x.direction = 'input' AND x.symlink_of_namespace IS NULL) AS is_input,
                   bool_or(x.direction = 'output' AND x.symlink_of_namespace IS NULL) AS is_output
              FROM unnest(p_mentions) AS x
             GROUP BY 1) AS m
      JOIN metastore.datasets AS d ON d.name_key = m.name_key;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    -- Each derivation only when its facet is there (a jsonpath test costs microseconds, a statement
    -- a tenth of a millisecond or more).
    IF p_payload @? '$.inputs[*].facets.schema' OR p_payload @? '$.outputs[*].facets.schema'
       OR p_payload @? '$.dataset.facets.schema' THEN
        INSERT INTO metastore.dataset_schema_versions AS v
               (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen)
        SELECT k.id, s.h, s.fields, p_event_id, p_event_time, p_event_time
          -- Schema facets of inputs, outputs and a DatasetEvent's dataset. An empty list says nothing
          -- about the fields (some producers send it when they do not know them).
          FROM (SELECT DISTINCT ds ->> 'namespace' AS namespace, ds ->> 'name' AS name,
                       ds #> '{facets,schema,fields}' AS fields,
                       sha256(convert_to((ds #> '{facets,schema,fields}')::text, 'UTF8')) AS h
                  FROM (SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(p_payload -> 'inputs') = 'array'
                                                         THEN p_payload -> 'inputs' ELSE '[]' END)
                        UNION ALL
                        SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(p_payload -> 'outputs') = 'array'
                                                         THEN p_payload -> 'outputs' ELSE '[]' END)
                        UNION ALL
                        SELECT p_payload -> 'dataset' WHERE metastore.event_kind(p_payload) = 'dataset') AS t (ds)
                 WHERE jsonb_typeof(ds) = 'object'
                   AND jsonb_typeof(ds -> 'namespace') = 'string' AND jsonb_typeof(ds -> 'name') = 'string'
                   AND jsonb_typeof(ds #> '{facets,schema,fields}') = 'array'
                   AND jsonb_array_length(ds #> '{facets,schema,fields}') > 0) AS s
          JOIN unnest(v_ids, v_ns, v_names) AS k (id, namespace, name) ON k.namespace = s.namespace AND k.name = s.name
         WHERE NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS seen
                            WHERE seen.dataset_id = k.id AND seen.fields_sha256 = s.h
                              AND seen.first_seen <= p_event_time AND seen.last_seen >= p_event_time)
         ORDER BY 1, 2
        ON CONFLICT (dataset_id, fields_sha256) DO UPDATE
           SET first_event_id = CASE WHEN excluded.first_seen < v.first_seen THEN excluded.first_event_id
                                     ELSE v.first_event_id END,
               first_seen = least(v.first_seen, excluded.first_seen),
               last_seen = greatest(v.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < v.first_seen OR excluded.last_seen > v.last_seen;

    END IF;

    IF p_job_name IS NOT NULL AND v_in IS NOT NULL AND v_out IS NOT NULL THEN
        v_job := sha256(convert_to(jsonb_build_array(p_job_namespace, p_job_name)::text, 'UTF8'));
        INSERT INTO metastore.lineage_edges AS e
               (upstream_id, downstream_id, job_sha256, job_namespace, job_name, first_seen, last_seen)
        SELECT i.id, o.id, v_job, coalesce(p_job_namespace, ''), p_job_name, v_hour, v_hour
          FROM unnest(v_in) AS i (id)
         CROSS JOIN unnest(v_out) AS o (id)
         WHERE NOT EXISTS (SELECT FROM metastore.lineage_edges AS seen
                            WHERE seen.upstream_id = i.id AND seen.downstream_id = o.id AND seen.job_sha256 = v_job
                              AND seen.first_seen <= v_hour AND seen.last_seen >= v_hour)
         ORDER BY 1, 2
        ON CONFLICT (upstream_id, downstream_id, job_sha256) DO UPDATE
           SET first_seen = least(e.first_seen, excluded.first_seen),
               last_seen = greatest(e.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < e.first_seen OR excluded.last_seen > e.last_seen;
    END IF;

    IF p_payload @? '$.outputs[*].facets.columnLineage' THEN
        INSERT INTO metastore.column_lineage AS c
               (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
                transformation_subtype, first_seen, last_seen, edge_sha256)
        SELECT o.id, x.output_field, i.id, x.input_field, x.transformation_type, x.transformation_subtype,
               v_hour, v_hour, x.h
          -- columnLineage facets of outputs: per field, and the dataset-level "dataset" list (inputs that
          -- affect the whole output: filters, joins, grouping) with output_field empty. An input field
          -- without transformations is one edge of unknown type ('', '').
          -- Fields and transformations are of any length: the key is the hash of all four (edge_sha256).
          FROM (SELECT x0.*, sha256(convert_to(jsonb_build_array(x0.output_field, x0.input_field, x0.transformation_type,
                                                                 x0.transformation_subtype)::text, 'UTF8')) AS h
          FROM (SELECT DISTINCT od ->> 'namespace' AS namespace, od ->> 'name' AS name, f.field AS output_field,
                       inf ->> 'namespace' AS input_namespace, inf ->> 'name' AS input_name,
                       inf ->> 'field' AS input_field,
                       CASE WHEN jsonb_typeof(tr -> 'type') = 'string' THEN tr ->> 'type' ELSE '' END
                           AS transformation_type,
                       CASE WHEN jsonb_typeof(tr -> 'subtype') = 'string' THEN tr ->> 'subtype' ELSE '' END
                           AS transformation_subtype
                  FROM jsonb_array_elements(CASE WHEN jsonb_typeof(p_payload -> 'outputs') = 'array'
                                                 THEN p_payload -> 'outputs' ELSE '[]' END) AS od
                 CROSS JOIN LATERAL (
                        SELECT fe.key, fe.value -> 'inputFields'
                          FROM jsonb_each(CASE WHEN jsonb_typeof(od #> '{facets,columnLineage,fields}') = 'object'
                                               THEN od #> '{facets,columnLineage,fields}' ELSE '{}' END) AS fe
                        UNION ALL
                        SELECT '', od #> '{facets,columnLineage,dataset}') AS f (field, inputs)
                 CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                              THEN f.inputs ELSE '[]' END) AS inf
                 CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(inf -> 'transformations') = 'array'
                                                                   AND jsonb_array_length(inf -> 'transformations') > 0
                                                              THEN inf -> 'transformations' ELSE '[{}]' END) AS tr
                 WHERE jsonb_typeof(od) = 'object'
                   AND jsonb_typeof(od -> 'namespace') = 'string' AND jsonb_typeof(od -> 'name') = 'string'
                   AND jsonb_typeof(inf) = 'object'
                   AND jsonb_typeof(inf -> 'namespace') = 'string' AND jsonb_typeof(inf -> 'name') = 'string'
                   AND jsonb_typeof(inf -> 'field') = 'string') AS x0) AS x
          JOIN unnest(v_ids, v_ns, v_names) AS o (id, namespace, name) ON o.namespace = x.namespace AND o.name = x.name
          JOIN unnest(v_ids, v_ns, v_names) AS i (id, namespace, name)
            ON i.namespace = x.input_namespace AND i.name = x.input_name
         WHERE NOT EXISTS (SELECT FROM metastore.column_lineage AS seen
                            WHERE seen.output_dataset_id = o.id AND seen.input_dataset_id = i.id
                              AND seen.edge_sha256 = x.h
                              AND seen.first_seen <= v_hour AND seen.last_seen >= v_hour)
         ORDER BY 1, 3, 9
        ON CONFLICT (output_dataset_id, input_dataset_id, edge_sha256) DO UPDATE
           SET first_seen = least(c.first_seen, excluded.first_seen),
               last_seen = greatest(c.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < c.first_seen OR excluded.last_seen > c.last_seen;
    END IF;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[]) IS
    'Derives one stored event''s schema versions (the non-empty "fields" of schema facets of inputs, outputs '
    'and a DatasetEvent''s dataset), dataset lineage edges (each input to each output, through the job) and '
    'column lineage (columnLineage facets of outputs: one row per distinct output field, empty for the '
    'dataset-level list, input dataset and field, transformation type and subtype, both empty when not '
    'given; keyed by the sha256 of the four, so of any length) into '
    'dataset_schema_versions, lineage_edges and column_lineage. p_mentions: the event''s '
    'metastore.extract_datasets rows; only those datasets are resolved. The rules live here only: live '
    'ingest (store_event) and backfill both call it.';

REVOKE ALL ON FUNCTION metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[])
    FROM PUBLIC;
