-- Stores one validated event once, and derives its datasets, in the caller's transaction.
CREATE OR REPLACE FUNCTION metastore.store_event(
    p_payload          jsonb,
    p_event            metastore.valid_event,
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL,
    OUT event_id       bigint,
    OUT duplicate      boolean
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_hash bytea := sha256(convert_to(p_payload::text, 'UTF8'));
BEGIN
    INSERT INTO metastore.events AS e (
        payload, payload_sha256, event_kind, event_type, event_time, run_id, job_namespace, job_name,
        producer, schema_url, source_kind, source_principal)
    VALUES (
        p_payload, v_hash, p_event.event_kind, p_event.event_type, p_event.event_time, p_event.run_id,
        p_event.job_namespace, p_event.job_name, p_event.producer, p_event.schema_url,
        p_source_kind, p_source_principal)
    -- Equal payloads have equal eventTimes, so they meet in one partition, where this key is unique.
    ON CONFLICT (payload_sha256, event_time) DO NOTHING
    RETURNING e.id INTO event_id;

    IF event_id IS NULL THEN
        -- Resent: the stored copy already carries everything derived from it.
        SELECT e.id INTO STRICT event_id
          FROM metastore.events AS e
         WHERE e.payload_sha256 = v_hash AND e.event_time = p_event.event_time;
        duplicate := true;
        RETURN;
    END IF;
    duplicate := false;

    -- Sorted, so that concurrent events lock shared dataset rows in one order.
    INSERT INTO metastore.datasets AS d (namespace, name, kind, first_seen, last_seen, input_events, output_events)
    SELECT x.namespace, x.name,
           CASE WHEN bool_or(x.symlink_of_namespace IS NULL) THEN 'dataset' ELSE 'symlink' END,
           p_event.event_time, p_event.event_time,
           bool_or(x.direction = 'input')::integer, bool_or(x.direction = 'output')::integer
      FROM unnest(p_event.mentions) AS x
     GROUP BY x.namespace, x.name
     ORDER BY x.namespace, x.name
    ON CONFLICT (name_key) DO UPDATE
       SET kind = CASE WHEN d.kind = 'dataset' OR excluded.kind = 'dataset' THEN 'dataset' ELSE 'symlink' END,
           first_seen = least(d.first_seen, excluded.first_seen),
           last_seen = greatest(d.last_seen, excluded.last_seen),
           input_events = d.input_events + excluded.input_events,
           output_events = d.output_events + excluded.output_events;

    INSERT INTO metastore.event_datasets (event_id, dataset_id, direction, event_time)
    SELECT DISTINCT store_event.event_id, d.id, x.direction, p_event.event_time
      FROM unnest(p_event.mentions) AS x
      JOIN metastore.datasets AS d ON d.name_key = pg_catalog.sha256(metastore.dataset_key(x.namespace, x.name))
    ON CONFLICT DO NOTHING;

    INSERT INTO metastore.dataset_symlinks (dataset_id, symlink_id, type)
    SELECT DISTINCT c.id, s.id, x.symlink_type
      FROM unnest(p_event.mentions) AS x
      JOIN metastore.datasets AS s ON s.name_key = pg_catalog.sha256(metastore.dataset_key(x.namespace, x.name))
      JOIN metastore.datasets AS c
        ON c.name_key = pg_catalog.sha256(metastore.dataset_key(x.symlink_of_namespace, x.symlink_of_name))
     WHERE x.symlink_of_namespace IS NOT NULL
    ON CONFLICT DO NOTHING;
END
$fn$;

COMMENT ON FUNCTION metastore.store_event(jsonb, metastore.valid_event, text, text) IS
    'Stores an event that metastore.validate_event accepted (once: an event equal as JSON to a stored one '
    'returns that one with duplicate = true) and derives its datasets, links and symlinks.';

REVOKE ALL ON FUNCTION metastore.store_event(jsonb, metastore.valid_event, text, text) FROM PUBLIC;
