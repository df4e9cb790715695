-- Validates one event, stores it once, and derives its datasets, in the caller's transaction.
CREATE OR REPLACE FUNCTION metastore.store_event(
    p_payload          jsonb,
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL,
    OUT event_id       bigint,
    OUT duplicate      boolean
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'  -- an eventTime without a zone is UTC
AS $fn$
DECLARE
    v_kind      text;
    v_time_text text;
    v_time      timestamptz;
    v_hash      bytea;
    v_run_id    text;
    v_job_ns    text;
    v_job_name  text;
BEGIN
    IF jsonb_typeof(p_payload) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('an OpenLineage event must be a JSON object, not a JSON %s', jsonb_typeof(p_payload));
    END IF;

    v_kind := metastore.event_kind(p_payload);
    IF v_kind IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = 'not an OpenLineage event: it needs "run" and "job" objects (RunEvent), '
                      'a "job" object (JobEvent) or a "dataset" object (DatasetEvent)';
    END IF;

    v_time_text := metastore.json_text(p_payload -> 'eventTime', 'eventTime', 64);
    -- PostgreSQL also reads words like 'now' or 'epoch' as times: accept ISO 8601 only.
    IF v_time_text !~ '^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}(:?\d{2})?)?$' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22007',
            MESSAGE = format('"eventTime" must be an ISO 8601 date-time such as 2024-05-01T12:00:00.000Z, not "%s"',
                             v_time_text);
    END IF;
    BEGIN
        v_time := v_time_text::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION USING
            ERRCODE = '22007',
            MESSAGE = format('"eventTime" is not a valid date-time: "%s"', v_time_text);
    END;

    IF v_kind = 'run' THEN
        v_run_id := metastore.json_text(p_payload #> '{run,runId}', 'run.runId', 256);
    END IF;
    IF v_kind IN ('run', 'job') THEN
        v_job_ns := metastore.json_text(p_payload #> '{job,namespace}', 'job.namespace', 1000);
        v_job_name := metastore.json_text(p_payload #> '{job,name}', 'job.name', 1000);
    END IF;

    v_hash := sha256(convert_to(p_payload::text, 'UTF8'));
    INSERT INTO metastore.events AS e (
        payload, payload_sha256, event_kind, event_type, event_time, run_id, job_namespace, job_name,
        producer, schema_url, source_kind, source_principal)
    VALUES (
        p_payload, v_hash, v_kind,
        metastore.json_text(p_payload -> 'eventType', 'eventType', 64, false),
        v_time, v_run_id, v_job_ns, v_job_name,
        metastore.json_text(p_payload -> 'producer', 'producer', 2000, false),
        metastore.json_text(p_payload -> 'schemaURL', 'schemaURL', 2000, false),
        p_source_kind, p_source_principal)
    ON CONFLICT (payload_sha256) DO NOTHING
    RETURNING e.id INTO event_id;

    IF event_id IS NULL THEN
        -- Resent: the stored copy already carries everything derived from it.
        SELECT e.id INTO STRICT event_id FROM metastore.events AS e WHERE e.payload_sha256 = v_hash;
        duplicate := true;
        RETURN;
    END IF;
    duplicate := false;

    -- Sorted, so that concurrent events lock shared dataset rows in one order.
    INSERT INTO metastore.datasets AS d (namespace, name, kind, first_seen, last_seen, input_events, output_events)
    SELECT x.namespace, x.name,
           CASE WHEN bool_or(x.symlink_of_namespace IS NULL) THEN 'dataset' ELSE 'symlink' END,
           v_time, v_time,
           bool_or(x.direction = 'input')::integer, bool_or(x.direction = 'output')::integer
      FROM metastore.extract_datasets(p_payload) AS x
     GROUP BY x.namespace, x.name
     ORDER BY x.namespace, x.name
    ON CONFLICT (namespace, name) DO UPDATE
       SET kind = CASE WHEN d.kind = 'dataset' OR excluded.kind = 'dataset' THEN 'dataset' ELSE 'symlink' END,
           first_seen = least(d.first_seen, excluded.first_seen),
           last_seen = greatest(d.last_seen, excluded.last_seen),
           input_events = d.input_events + excluded.input_events,
           output_events = d.output_events + excluded.output_events;

    INSERT INTO metastore.event_datasets (event_id, dataset_id, direction)
    SELECT DISTINCT store_event.event_id, d.id, x.direction
      FROM metastore.extract_datasets(p_payload) AS x
      JOIN metastore.datasets AS d ON d.namespace = x.namespace AND d.name = x.name
    ON CONFLICT DO NOTHING;

    INSERT INTO metastore.dataset_symlinks (dataset_id, symlink_id, type)
    SELECT DISTINCT c.id, s.id, x.symlink_type
      FROM metastore.extract_datasets(p_payload) AS x
      JOIN metastore.datasets AS s ON s.namespace = x.namespace AND s.name = x.name
      JOIN metastore.datasets AS c ON c.namespace = x.symlink_of_namespace AND c.name = x.symlink_of_name
     WHERE x.symlink_of_namespace IS NOT NULL
    ON CONFLICT DO NOTHING;
END
$fn$;

COMMENT ON FUNCTION metastore.store_event(jsonb, text, text) IS
    'Stores one OpenLineage event (once: an event equal as JSON to a stored one returns that one with '
    'duplicate = true) and derives its datasets, links and symlinks. Raises on an invalid event; the caller '
    'decides whether to keep a record of it. Error codes: 22023 not an event or a malformed member; '
    '22007 eventTime not an ISO 8601 date-time; 22001 a member too long.';

REVOKE ALL ON FUNCTION metastore.store_event(jsonb, text, text) FROM PUBLIC;
