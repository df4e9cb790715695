-- Derives an event's schema versions, lineage edges and column lineage: called by
-- metastore.store_event for each newly stored event and by metastore.backfill for every event.
-- Upserts keyed by what they describe: an event that repeats what is known only moves last_seen
-- (and writes nothing when it does not move it), so rows grow with distinct facts, not events.
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
AS $fn$
DECLARE
    v_ids   bigint[];
    v_ns    text[];
    v_names text[];
BEGIN
    -- The datasets this event mentions (metastore.extract_datasets), looked up as store_event does.
    -- Only these are resolved: a column-lineage input the event does not mention is skipped, so
    -- what an event derives never depends on which other events came first.
    SELECT array_agg(d.id), array_agg(d.namespace), array_agg(d.name)
      INTO v_ids, v_ns, v_names
      FROM metastore.datasets AS d
     WHERE (d.namespace, d.name) IN (SELECT m.namespace, m.name FROM unnest(p_mentions) AS m);
    IF v_ids IS NULL THEN
        RETURN;
    END IF;

    INSERT INTO metastore.dataset_schema_versions AS v
           (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen)
    SELECT k.id, sha256(convert_to(s.fields::text, 'UTF8')), s.fields, p_event_id, p_event_time, p_event_time
      FROM metastore.extract_schemas(p_payload) AS s
      JOIN unnest(v_ids, v_ns, v_names) AS k (id, namespace, name) ON k.namespace = s.namespace AND k.name = s.name
     ORDER BY 1, 2
    ON CONFLICT (dataset_id, fields_sha256) DO UPDATE
       SET first_event_id = CASE WHEN excluded.first_seen < v.first_seen THEN excluded.first_event_id
                                 ELSE v.first_event_id END,
           first_seen = least(v.first_seen, excluded.first_seen),
           last_seen = greatest(v.last_seen, excluded.last_seen)
     WHERE excluded.first_seen < v.first_seen OR excluded.last_seen > v.last_seen;

    IF p_job_name IS NOT NULL THEN
        INSERT INTO metastore.lineage_edges AS e
               (upstream_id, downstream_id, job_sha256, job_namespace, job_name, first_seen, last_seen)
        SELECT DISTINCT i.id, o.id,
               sha256(convert_to(jsonb_build_array(p_job_namespace, p_job_name)::text, 'UTF8')),
               coalesce(p_job_namespace, ''), p_job_name, p_event_time, p_event_time
          FROM unnest(p_mentions) AS mi
          JOIN unnest(v_ids, v_ns, v_names) AS i (id, namespace, name) ON i.namespace = mi.namespace AND i.name = mi.name
         CROSS JOIN unnest(p_mentions) AS mo
          JOIN unnest(v_ids, v_ns, v_names) AS o (id, namespace, name) ON o.namespace = mo.namespace AND o.name = mo.name
         WHERE mi.direction = 'input' AND mi.symlink_of_namespace IS NULL
           AND mo.direction = 'output' AND mo.symlink_of_namespace IS NULL
         ORDER BY 1, 2
        ON CONFLICT (upstream_id, downstream_id, job_sha256) DO UPDATE
           SET first_seen = least(e.first_seen, excluded.first_seen),
               last_seen = greatest(e.last_seen, excluded.last_seen)
         WHERE excluded.first_seen < e.first_seen OR excluded.last_seen > e.last_seen;
    END IF;

    INSERT INTO metastore.column_lineage AS c
           (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
            transformation_subtype, first_seen, last_seen)
    SELECT o.id, x.output_field, i.id, x.input_field, x.transformation_type, x.transformation_subtype,
           p_event_time, p_event_time
      FROM metastore.extract_column_lineage(p_payload) AS x
      JOIN unnest(v_ids, v_ns, v_names) AS o (id, namespace, name) ON o.namespace = x.namespace AND o.name = x.name
      JOIN unnest(v_ids, v_ns, v_names) AS i (id, namespace, name)
        ON i.namespace = x.input_namespace AND i.name = x.input_name
     ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (output_dataset_id, output_field, input_dataset_id, input_field, transformation_type,
                 transformation_subtype) DO UPDATE
       SET first_seen = least(c.first_seen, excluded.first_seen),
           last_seen = greatest(c.last_seen, excluded.last_seen)
     WHERE excluded.first_seen < c.first_seen OR excluded.last_seen > c.last_seen;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[]) IS
    'Derives one stored event''s schema versions (metastore.extract_schemas), dataset lineage edges (each '
    'input to each output, through the job) and column lineage (metastore.extract_column_lineage) into '
    'dataset_schema_versions, lineage_edges and column_lineage. p_mentions: the event''s '
    'metastore.extract_datasets rows; only those datasets are resolved.';

REVOKE ALL ON FUNCTION metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[])
    FROM PUBLIC;
