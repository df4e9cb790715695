-- Derives events' schema versions, lineage edges and column lineage: called by
-- metastore.store_event for each newly stored event (a batch of one) and by metastore.backfill
-- for every stored event, a batch at a time. The rules live here only.
-- Upserts keyed by what they describe, so rows grow with distinct facts, not with events. Edges
-- and column lineage keep first_seen and last_seen to the hour (UTC): an event that repeats them
-- within the hour writes nothing (a query that runs every minute would otherwise rewrite each of
-- its rows every minute). Schema versions keep exact times, so that the current fields are those
-- of the newest event. Both are functions of the set of events, whatever their order or batching.
CREATE OR REPLACE FUNCTION metastore.derive_lineage(
    p_event_ids      bigint[],
    p_event_times    timestamptz[],
    p_payloads       jsonb[],
    p_job_namespaces text[],
    p_job_names      text[],
    p_mentions       metastore.dataset_mention[],
    p_mention_events integer[]
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
-- Its statements read parameters only through equality lookups on keys, which a generic plan does
-- as well as a custom one; left to choose, the plan cache re-plans these long statements on every
-- call. The planner guesses 100 rows per jsonb set function, so nested ones look like millions:
-- a hash aggregate sized for that costs more than sorting the few rows there are.
SET plan_cache_mode = force_generic_plan
SET enable_hashagg = off
AS $fn$
DECLARE
    -- Each event's datasets: event ordinal (in p_event_ids), dataset id, namespace, name.
    v_n       integer[];
    v_ids     bigint[];
    v_ns      text[];
    v_names   text[];
    v_schema  boolean;
    v_edges   boolean;
    v_columns boolean;
BEGIN
    -- The datasets each event mentions (p_mentions: its metastore.extract_datasets rows, p_mention_events:
    -- the ordinal of the event of each), looked up as store_event does. Only these are resolved: a
    -- column-lineage input its event does not mention is skipped, so what an event derives never
    -- depends on which other events came first.
    SELECT array_agg(m.n), array_agg(d.id), array_agg(d.namespace), array_agg(d.name)
      INTO v_n, v_ids, v_ns, v_names
      FROM (SELECT DISTINCT me.n, mm.namespace, mm.name
              FROM unnest(p_mentions) WITH ORDINALITY AS mm (namespace, name, direction, symlink_of_namespace,
                                                             symlink_of_name, symlink_type, o)
              JOIN unnest(p_mention_events) WITH ORDINALITY AS me (n, o) ON me.o = mm.o) AS m
      JOIN metastore.datasets AS d ON d.namespace = m.namespace AND d.name = m.name;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    -- Each derivation only when some event has its facet (a jsonpath test costs microseconds, a
    -- statement a tenth of a millisecond or more).
    SELECT bool_or(p @? '$.inputs[*].facets.schema' OR p @? '$.outputs[*].facets.schema'
                   OR p @? '$.dataset.facets.schema'),
           bool_or(p @? '$.inputs[*]' AND p @? '$.outputs[*]'),
           bool_or(p @? '$.outputs[*].facets.columnLineage')
      INTO v_schema, v_edges, v_columns
      FROM unnest(p_payloads) AS p;

    IF v_schema THEN
        INSERT INTO metastore.dataset_schema_versions AS v
               (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen)
        SELECT g.dataset_id, g.h, g.fields, g.event_id, g.t, g.last_seen
          FROM (SELECT DISTINCT ON (k.id, s.h) k.id AS dataset_id, s.h, s.fields, s.event_id, s.t,
                       max(s.t) OVER (PARTITION BY k.id, s.h) AS last_seen
                  -- Schema facets of inputs, outputs and a DatasetEvent's dataset. An empty list says
                  -- nothing about the fields (some producers send it when they do not know them).
                  FROM (SELECT DISTINCT ev.n, ev.id AS event_id, ev.t,
                               ds ->> 'namespace' AS namespace, ds ->> 'name' AS name,
                               ds #> '{facets,schema,fields}' AS fields,
                               sha256(convert_to((ds #> '{facets,schema,fields}')::text, 'UTF8')) AS h
                          FROM unnest(p_event_ids, p_event_times, p_payloads) WITH ORDINALITY AS ev (id, t, p, n)
                         CROSS JOIN LATERAL (
                                SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(ev.p -> 'inputs') = 'array'
                                                                 THEN ev.p -> 'inputs' ELSE '[]' END)
                                UNION ALL
                                SELECT jsonb_array_elements(CASE WHEN jsonb_typeof(ev.p -> 'outputs') = 'array'
                                                                 THEN ev.p -> 'outputs' ELSE '[]' END)
                                UNION ALL
                                SELECT ev.p -> 'dataset' WHERE metastore.event_kind(ev.p) = 'dataset') AS t (ds)
                         WHERE jsonb_typeof(ds) = 'object'
                           AND jsonb_typeof(ds -> 'namespace') = 'string' AND jsonb_typeof(ds -> 'name') = 'string'
                           AND jsonb_typeof(ds #> '{facets,schema,fields}') = 'array'
                           AND jsonb_array_length(ds #> '{facets,schema,fields}') > 0) AS s
                  JOIN unnest(v_n, v_ids, v_ns, v_names) AS k (n, id, namespace, name)
                    ON k.n = s.n AND k.namespace = s.namespace AND k.name = s.name
                 ORDER BY k.id, s.h, s.t, s.event_id) AS g
         -- Only what moves a time: an event resent or older than both writes nothing.
         WHERE NOT EXISTS (SELECT FROM metastore.dataset_schema_versions AS seen
                            WHERE seen.dataset_id = g.dataset_id AND seen.fields_sha256 = g.h
                              AND seen.first_seen <= g.t AND seen.last_seen >= g.last_seen)
         ORDER BY 1, 2
        ON CONFLICT (dataset_id, fields_sha256) DO UPDATE
           SET first_event_id = CASE WHEN excluded.first_seen < v.first_seen THEN excluded.first_event_id
                                     ELSE v.first_event_id END,
               first_seen = least(v.first_seen, excluded.first_seen),
               last_seen = greatest(v.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < v.first_seen OR excluded.last_seen > v.last_seen;
    END IF;

    IF v_edges THEN
        -- An event's outputs are downstream of its inputs, through its job (symlink identifiers
        -- get no edges: lineage reads cross metastore.dataset_symlinks).
        INSERT INTO metastore.lineage_edges AS e
               (upstream_id, downstream_id, job_sha256, job_namespace, job_name, first_seen, last_seen)
        SELECT g.upstream_id, g.downstream_id, g.job, g.job_namespace, g.job_name, g.first_seen, g.last_seen
          FROM (SELECT i.id AS upstream_id, o.id AS downstream_id,
                       sha256(convert_to(jsonb_build_array(ev.job_ns, ev.job_name)::text, 'UTF8')) AS job,
                       coalesce(ev.job_ns, '') AS job_namespace, ev.job_name,
                       date_trunc('hour', min(ev.t), 'UTC') AS first_seen,
                       date_trunc('hour', max(ev.t), 'UTC') AS last_seen
                  FROM unnest(p_event_times, p_job_namespaces, p_job_names)
                       WITH ORDINALITY AS ev (t, job_ns, job_name, n)
                  JOIN unnest(p_mentions, p_mention_events) AS mi (namespace, name, direction, symlink_of_namespace,
                                                                  symlink_of_name, symlink_type, n)
                    ON mi.n = ev.n AND mi.direction = 'input' AND mi.symlink_of_namespace IS NULL
                  JOIN unnest(p_mentions, p_mention_events) AS mo (namespace, name, direction, symlink_of_namespace,
                                                                  symlink_of_name, symlink_type, n)
                    ON mo.n = ev.n AND mo.direction = 'output' AND mo.symlink_of_namespace IS NULL
                  JOIN unnest(v_n, v_ids, v_ns, v_names) AS i (n, id, namespace, name)
                    ON i.n = ev.n AND i.namespace = mi.namespace AND i.name = mi.name
                  JOIN unnest(v_n, v_ids, v_ns, v_names) AS o (n, id, namespace, name)
                    ON o.n = ev.n AND o.namespace = mo.namespace AND o.name = mo.name
                 WHERE ev.job_name IS NOT NULL
                 GROUP BY 1, 2, 3, 4, 5) AS g
         WHERE NOT EXISTS (SELECT FROM metastore.lineage_edges AS seen
                            WHERE seen.upstream_id = g.upstream_id AND seen.downstream_id = g.downstream_id
                              AND seen.job_sha256 = g.job
                              AND seen.first_seen <= g.first_seen AND seen.last_seen >= g.last_seen)
         ORDER BY 1, 2, 3
        ON CONFLICT (upstream_id, downstream_id, job_sha256) DO UPDATE
           SET first_seen = least(e.first_seen, excluded.first_seen),
               last_seen = greatest(e.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < e.first_seen OR excluded.last_seen > e.last_seen;
    END IF;

    IF v_columns THEN
        INSERT INTO metastore.column_lineage AS c
               (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
                transformation_subtype, first_seen, last_seen)
        SELECT o.id, x.output_field, i.id, x.input_field, x.transformation_type, x.transformation_subtype,
               date_trunc('hour', min(x.t), 'UTC'), date_trunc('hour', max(x.t), 'UTC')
          -- columnLineage facets of outputs: per field, and the dataset-level "dataset" list (inputs that
          -- affect the whole output: filters, joins, grouping) with output_field empty. An input field
          -- without transformations is one edge of unknown type ('', '').
          FROM (SELECT ev.n, ev.t, od ->> 'namespace' AS namespace, od ->> 'name' AS name, f.field AS output_field,
                       inf ->> 'namespace' AS input_namespace, inf ->> 'name' AS input_name,
                       inf ->> 'field' AS input_field,
                       CASE WHEN jsonb_typeof(tr -> 'type') = 'string' THEN tr ->> 'type' ELSE '' END
                           AS transformation_type,
                       CASE WHEN jsonb_typeof(tr -> 'subtype') = 'string' THEN tr ->> 'subtype' ELSE '' END
                           AS transformation_subtype
                  FROM unnest(p_event_times, p_payloads) WITH ORDINALITY AS ev (t, p, n)
                 CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(ev.p -> 'outputs') = 'array'
                                                              THEN ev.p -> 'outputs' ELSE '[]' END) AS od
                 CROSS JOIN LATERAL (
                        SELECT fe.key, fe.value -> 'inputFields'
                          FROM jsonb_each(CASE WHEN jsonb_typeof(od #> '{facets,columnLineage,fields}') = 'object'
                                               THEN od #> '{facets,columnLineage,fields}' ELSE '{}' END) AS fe
                        UNION ALL
                        SELECT '', od #> '{facets,columnLineage,dataset}') AS f (field, inputs)
                 CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.inputs) = 'array'
                                                              THEN f.inputs ELSE '[]' END) AS inf
                 CROSS JOIN LATERAL jsonb_array_elements(
                            CASE WHEN jsonb_typeof(inf -> 'transformations') = 'array'
                                      AND jsonb_array_length(inf -> 'transformations') > 0
                                 THEN inf -> 'transformations' ELSE '[{}]' END) AS tr
                 WHERE jsonb_typeof(od) = 'object'
                   AND jsonb_typeof(od -> 'namespace') = 'string' AND jsonb_typeof(od -> 'name') = 'string'
                   AND jsonb_typeof(inf) = 'object'
                   AND jsonb_typeof(inf -> 'namespace') = 'string' AND jsonb_typeof(inf -> 'name') = 'string'
                   AND jsonb_typeof(inf -> 'field') = 'string'
                   -- Bounded so that a key of column_lineage stays under the btree's entry limit (~2700 bytes).
                   AND octet_length(inf ->> 'field') <= 1000 AND octet_length(f.field) <= 1000
                   AND (jsonb_typeof(tr -> 'type') IS DISTINCT FROM 'string' OR octet_length(tr ->> 'type') <= 200)
                   AND (jsonb_typeof(tr -> 'subtype') IS DISTINCT FROM 'string'
                        OR octet_length(tr ->> 'subtype') <= 200)) AS x
          JOIN unnest(v_n, v_ids, v_ns, v_names) AS o (n, id, namespace, name)
            ON o.n = x.n AND o.namespace = x.namespace AND o.name = x.name
          JOIN unnest(v_n, v_ids, v_ns, v_names) AS i (n, id, namespace, name)
            ON i.n = x.n AND i.namespace = x.input_namespace AND i.name = x.input_name
         GROUP BY 1, 2, 3, 4, 5, 6
        HAVING NOT EXISTS (SELECT FROM metastore.column_lineage AS seen
                            WHERE seen.output_dataset_id = o.id AND seen.output_field = x.output_field
                              AND seen.input_dataset_id = i.id AND seen.input_field = x.input_field
                              AND seen.transformation_type = x.transformation_type
                              AND seen.transformation_subtype = x.transformation_subtype
                              AND seen.first_seen <= date_trunc('hour', min(x.t), 'UTC')
                              AND seen.last_seen >= date_trunc('hour', max(x.t), 'UTC'))
         ORDER BY 1, 2, 3, 4, 5, 6
        ON CONFLICT (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
                     transformation_subtype) DO UPDATE
           SET first_seen = least(c.first_seen, excluded.first_seen),
               last_seen = greatest(c.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < c.first_seen OR excluded.last_seen > c.last_seen;
    END IF;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_lineage(bigint[], timestamptz[], jsonb[], text[], text[],
                                             metastore.dataset_mention[], integer[]) IS
    'Derives stored events'' schema versions (the non-empty "fields" of schema facets of inputs, outputs '
    'and a DatasetEvent''s dataset), dataset lineage edges (each input to each output, through the job) and '
    'column lineage (columnLineage facets of outputs: one row per distinct output field, empty for the '
    'dataset-level list, input dataset and field, transformation type and subtype, both empty when not '
    'given; entries with a field over 1000 bytes or a type or subtype over 200 bytes are skipped) into '
    'dataset_schema_versions, lineage_edges and column_lineage. The events come as parallel arrays (id, '
    'eventTime, payload, job namespace and name); p_mentions are their metastore.extract_datasets rows and '
    'p_mention_events the ordinal of the event of each: only those datasets are resolved. The rules live '
    'here only: live ingest (store_event, one event) and backfill (batches) both call it.';

REVOKE ALL ON FUNCTION metastore.derive_lineage(bigint[], timestamptz[], jsonb[], text[], text[],
                                                metastore.dataset_mention[], integer[]) FROM PUBLIC;
