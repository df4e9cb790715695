-- Validation and extraction, without writing anything: callers run it inside an exception
-- block, and a block that writes nothing costs no subtransaction id (batches of hundreds of
-- events would otherwise overflow PostgreSQL's per-backend subtransaction cache).
CREATE OR REPLACE FUNCTION metastore.validate_event(p_payload jsonb) RETURNS metastore.valid_event
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'  -- an eventTime without a zone is UTC
AS $fn$
DECLARE
    -- Every stored event can be served back (docs/events.md, "Events the store can serve back"):
    -- no event prints to more than c_text_cap bytes of JSON text, nor to more than c_text_ratio
    -- times its size as stored once it prints to more than c_text_floor; none nests deeper than
    -- 512 levels (the jsonpath below).
    c_text_cap   constant bigint := 16777216;
    c_text_floor constant bigint := 1048576;
    c_text_ratio constant integer := 8;
    v_result    metastore.valid_event;
    v_time_text text;
    v_past      interval;
    v_future    interval;
    v_earliest  timestamptz;
    v_latest    timestamptz;
    v_numbers   jsonb;
    v_long      jsonb;
    v_zeros     jsonb;
    v_scale     integer;
    v_least     bigint := 0;
    v_printed   bigint;
    v_allowed   bigint;
BEGIN
    -- First, before anything walks the whole event: nesting. Readers of the feed, export and
    -- forwarding parse events (Python's json stops near 1000 levels, counting its caller's frames;
    -- Jackson at 1000; the feed's envelope adds two), and PostgreSQL's own jsonpath walks overflow
    -- their stack at about 11,900. The walk stops at level 512: a container there is the 513th.
    IF pg_catalog.jsonb_path_exists(p_payload, 'strict $.**{512} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION USING
            ERRCODE = '54M02',
            MESSAGE = 'the event is nested more than 512 levels deep; at most 512 are accepted, so that readers '
                      'such as Python''s json module and Jackson (1000 levels) can parse it when it is served back';
    END IF;

    -- Then numbers, compared, never printed: only those that may print long are looked at (zeros,
    -- whose text depends on their scale, and magnitudes from 1e16 up or below 1e-16: 17 characters
    -- or more). Outside the IEEE-754 double range (I-JSON, RFC 7493) they are refused: jsonb keeps
    -- them exact and small (1e131071 takes a few bytes), but their text is unbounded (131,072
    -- digits), and the de-duplication hash and consumers read text. A zero keeps the scale it was
    -- written with (0e-16383 prints 16,385 characters): more than 324 decimals, which no double
    -- needs, is refused too.
    v_allowed := least(c_text_cap, greatest(c_text_floor, c_text_ratio * pg_catalog.pg_column_size(p_payload)::bigint));
    v_numbers := pg_catalog.jsonb_path_query_array(p_payload, 'strict $.** ? (@.type() == "number")');
    v_long := pg_catalog.jsonb_path_query_array(v_numbers,
                  'strict $[*] ? (@ >= 1e16 || @ <= -1e16 || (@ < 1e-16 && @ > -1e-16))');
    IF v_long <> '[]'::jsonb THEN
        v_zeros := pg_catalog.jsonb_path_query_array(v_long, 'strict $[*] ? (@ == 0)');
        -- A zero prints as "0", or "0." and its decimals.
        SELECT max(pg_catalog.scale(z.v::numeric)),
               coalesce(sum(CASE WHEN pg_catalog.scale(z.v::numeric) > 0 THEN pg_catalog.scale(z.v::numeric) + 2
                                 ELSE 1 END), 0)
          INTO v_scale, v_least
          FROM pg_catalog.jsonb_array_elements(v_zeros) AS z (v);
        -- The others print 17 characters or more each; 65 from 1e64 (or below 1e-64), 257 from
        -- 1e256. Each walk is skipped once the event is known to print past its bound.
        v_least := v_least + 17 * (pg_catalog.jsonb_array_length(v_long) - pg_catalog.jsonb_array_length(v_zeros));
        IF v_scale > 324 OR (v_least <= v_allowed AND pg_catalog.jsonb_path_exists(v_long,
               'strict $[*] ? (@ > 1.7976931348623157e308 || @ < -1.7976931348623157e308'
               ' || (@ < 4.9e-324 && @ > -4.9e-324 && @ != 0))')) THEN
            RAISE EXCEPTION USING
                ERRCODE = '22003',
                MESSAGE = 'a number is outside the IEEE-754 double range (magnitude above 1.7976931348623157e308, '
                          'nonzero below 4.9e-324, or a zero with more than 324 decimals): such numbers are not '
                          'accepted (I-JSON, RFC 7493)';
        END IF;
        IF v_least <= v_allowed THEN
            v_least := v_least + 48 * pg_catalog.jsonb_array_length(pg_catalog.jsonb_path_query_array(v_long,
                           'strict $[*] ? (@ >= 1e64 || @ <= -1e64 || (@ < 1e-64 && @ > -1e-64 && @ != 0))'));
        END IF;
        IF v_least <= v_allowed THEN
            v_least := v_least + 192 * pg_catalog.jsonb_array_length(pg_catalog.jsonb_path_query_array(v_long,
                           'strict $[*] ? (@ >= 1e256 || @ <= -1e256 || (@ < 1e-256 && @ > -1e-256 && @ != 0))'));
        END IF;
    END IF;

    -- Then the size of the event's text as stored, what the feed, export and forwarding serve. The
    -- bound is relative to its size as stored (jsonb, uncompressed), the same on every ingest path
    -- whatever the request looked like: real events print to 0.8 to 1.02 times it, numbers from 1e308
    -- on 19 times. Everything but numbers prints to at most 6 times what it takes stored (a control
    -- character in a string is one byte stored and \u0001 printed; a member's key, separators and
    -- brackets fit in its 4-byte entry), so the event prints to at most 6 times its stored size plus
    -- its numbers' text ("[" and ", " standing for their separators). That bound is enough for most
    -- events; the others are printed, unless their long numbers alone print past the bound.
    IF v_least <= v_allowed THEN
        IF 6 * pg_catalog.pg_column_size(p_payload)::bigint + pg_catalog.octet_length(v_numbers::text) <= v_allowed THEN
            v_printed := 0;  -- within the bound, whatever its exact size
        ELSE
            v_printed := pg_catalog.octet_length(p_payload::text);
        END IF;
    END IF;
    IF coalesce(v_printed, v_least) > v_allowed THEN
        RAISE EXCEPTION USING
            ERRCODE = '54M01',
            MESSAGE = pg_catalog.format(
                'the event prints to %s%s bytes of JSON text as stored, more than the %s accepted for it (%s times '
                'its %s bytes as stored, at least %s, at most %s): numbers written with large exponents print '
                'every digit (1e308 prints 309)',
                CASE WHEN v_printed IS NULL THEN 'at least ' ELSE '' END, coalesce(v_printed, v_least), v_allowed,
                c_text_ratio, pg_catalog.pg_column_size(p_payload), c_text_floor, c_text_cap);
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
    'Error codes: 54M02 nested more than 512 levels deep; 22003 a number outside the IEEE-754 double range (or a '
    'zero with more than 324 decimals); 54M01 its JSON text as stored larger than 16 MiB, or than 1 MiB and 8 times '
    'its size as stored; 22023 not an event or a malformed member; '
    '22007 eventTime not an ISO 8601 date-time; 22008 eventTime outside the window of metastore.settings; '
    '22001 a member too long; 55000 metastore.settings has no row.';

REVOKE ALL ON FUNCTION metastore.validate_event(jsonb) FROM PUBLIC;
