-- Validation and extraction, without writing anything: callers run it inside an exception
-- block, and a block that writes nothing costs no subtransaction id (batches of hundreds of
-- events would otherwise overflow PostgreSQL's per-backend subtransaction cache).
CREATE OR REPLACE FUNCTION metastore.validate_event(p_payload jsonb) RETURNS metastore.valid_event
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'  -- an eventTime without a zone is UTC
AS $fn$
DECLARE
    v_result    metastore.valid_event;
    v_time_text text;
    v_past      interval;
    v_future    interval;
    v_earliest  timestamptz;
    v_latest    timestamptz;
BEGIN
    -- First, before anything prints a value: numbers outside the IEEE-754 double range (I-JSON,
    -- RFC 7493). jsonb keeps them exact and small (1e131071 takes a few bytes), but their text
    -- is unbounded (131,072 digits), and the de-duplication hash and consumers read text. A zero
    -- keeps the scale it was written with (0e-16383 prints 16,385 characters): more than 324
    -- decimals, which no double needs, is refused too. Compared as numeric, never printed: the
    -- walk returns only the offending numbers and the zeros.
    IF EXISTS (SELECT
                 FROM pg_catalog.jsonb_path_query(p_payload,
                          'strict $.** ? (@.type() == "number" && (@ == 0 || @ > 1.7976931348623157e308'
                          ' || @ < -1.7976931348623157e308 || (@ < 4.9e-324 && @ > -4.9e-324)))') AS n (v)
                WHERE n.v::numeric <> 0 OR pg_catalog.scale(n.v::numeric) > 324) THEN
        RAISE EXCEPTION USING
            ERRCODE = '22003',
            MESSAGE = 'a number is outside the IEEE-754 double range (magnitude above 1.7976931348623157e308, '
                      'nonzero below 4.9e-324, or a zero with more than 324 decimals): such numbers are not '
                      'accepted (I-JSON, RFC 7493)';
    END IF;

    IF pg_catalog.jsonb_typeof(p_payload) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('an OpenLineage event must be a JSON object, not a JSON %s',
                                        pg_catalog.jsonb_typeof(p_payload));
    END IF;

    v_result.event_kind := metastore.event_kind(p_payload);
    IF v_result.event_kind IS NULL THEN
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
            MESSAGE = pg_catalog.format(
                '"eventTime" must be an ISO 8601 date-time such as 2024-05-01T12:00:00.000Z, not "%s"', v_time_text);
    END IF;
    BEGIN
        v_result.event_time := v_time_text::timestamptz;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        RAISE EXCEPTION USING
            ERRCODE = '22007',
            MESSAGE = pg_catalog.format('"eventTime" is not a valid date-time: "%s"', v_time_text);
    END;

    -- The window of metastore.settings, and whatever it says, years 1 to 9999 (UTC) only.
    SELECT s.event_time_past, s.event_time_future INTO v_past, v_future FROM metastore.settings AS s;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000', MESSAGE = 'metastore.settings has no row: the deploy makes it, see V0002';
    END IF;
    v_earliest := greatest(pg_catalog.now() - v_past, '0001-01-01 00:00:00+00'::timestamptz);
    v_latest := least(pg_catalog.now() + v_future, '9999-12-31 23:59:59.999999+00'::timestamptz);
    IF v_result.event_time < v_earliest OR v_result.event_time > v_latest THEN
        RAISE EXCEPTION USING
            ERRCODE = '22008',
            MESSAGE = pg_catalog.format(
                '"eventTime" %s is outside the accepted window: from %s to %s (now - %s to now + %s)',
                v_time_text,
                pg_catalog.to_char(v_earliest, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                pg_catalog.to_char(v_latest, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                v_past, v_future);
    END IF;

    IF v_result.event_kind = 'run' THEN
        v_result.run_id := metastore.json_text(p_payload #> '{run,runId}', 'run.runId', 256);
    END IF;
    IF v_result.event_kind IN ('run', 'job') THEN
        -- Of any length, like dataset names: events_job_idx holds prefixes only (change 5).
        v_result.job_namespace := metastore.json_text(p_payload #> '{job,namespace}', 'job.namespace', NULL);
        v_result.job_name := metastore.json_text(p_payload #> '{job,name}', 'job.name', NULL);
    END IF;
    v_result.event_type := metastore.json_text(p_payload -> 'eventType', 'eventType', 64, false);
    v_result.producer := metastore.json_text(p_payload -> 'producer', 'producer', 2000, false);
    v_result.schema_url := metastore.json_text(p_payload -> 'schemaURL', 'schemaURL', 2000, false);
    v_result.mentions := ARRAY(SELECT x FROM metastore.extract_datasets(p_payload) AS x);
    RETURN v_result;
END
$fn$;

COMMENT ON FUNCTION metastore.validate_event(jsonb) IS
    'Checks that p_payload is an OpenLineage event this store accepts and returns what it says '
    '(event kind, type, time, run, job, producer, schema URL, and the datasets it mentions). Writes nothing. '
    'Error codes: 22003 a number outside the IEEE-754 double range (or a zero with more than 324 decimals); 22023 not an event or a malformed member; '
    '22007 eventTime not an ISO 8601 date-time; 22008 eventTime outside the window of metastore.settings; '
    '22001 a member too long; 55000 metastore.settings has no row.';

REVOKE ALL ON FUNCTION metastore.validate_event(jsonb) FROM PUBLIC;
