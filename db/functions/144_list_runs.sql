-- Runs as a timeline: which queries ran, by whom, what they read and wrote, which failed.
CREATE OR REPLACE FUNCTION metastore.list_runs(
    p_limit         integer DEFAULT 50,
    p_cursor        text DEFAULT NULL,
    p_state         text DEFAULT NULL,
    p_user          text DEFAULT NULL,
    p_source        text DEFAULT NULL,
    p_job_namespace text DEFAULT NULL,
    p_dataset_id    bigint DEFAULT NULL,
    p_from          text DEFAULT NULL,
    p_to            text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'          -- a time without a zone is UTC, as eventTime is at ingest
SET "DateStyle" = 'ISO, YMD'
-- Planned once per session (plans do not depend on the values: key lookups and ranges); a
-- custom plan of each statement cost more to make than to run.
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    -- Runs looked at per page, at most: a combination of filters no single index serves (a rare
    -- state of one user) gives a page with fewer runs, or none, and a cursor to go on from.
    c_scan    constant integer := 5000;
    -- A namespace of at most this many jobs is read job by job (runs_job_latest_idx); a larger one
    -- by walking the timeline.
    c_jobs    constant integer := 500;
    c_states  constant text[] := ARRAY['START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER'];
    v_hide    record;
    v_states  text[];
    v_from    timestamptz := '-infinity';
    v_to      timestamptz := 'infinity';
    v_after   jsonb;
    v_t       timestamptz := 'infinity';
    v_i       bigint := 9223372036854775807;
    v_aliases bigint[];
    v_jobs    bigint[];
    v_driver  text;
    v_chunk   integer;
    v_scanned integer := 0;
    v_ids     bigint[];
    v_times   timestamptz[];
    v_page    bigint[] := '{}';
    v_kept    bigint[];
    v_runs    jsonb;
    v_next    text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF p_state IS NOT NULL THEN
        v_states := ARRAY(SELECT DISTINCT upper(btrim(s)) FROM unnest(string_to_array(p_state, ',')) AS s);
        IF cardinality(v_states) = 0 OR NOT v_states <@ c_states THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('state must be one or more of %s, separated by commas, not %s',
                                 array_to_string(c_states, ', '), p_state);
        END IF;
    END IF;
    -- Bad times raise 22007/22008 (400) naming the value.
    v_from := coalesce(p_from::timestamptz, v_from);
    v_to := coalesce(p_to::timestamptz, v_to);
    IF v_from > v_to THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('from (%s) is after to (%s)', p_from, p_to);
    END IF;
    IF p_cursor IS NOT NULL THEN
        BEGIN
            v_after := convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
            v_t := (v_after ->> 0)::timestamptz;
            v_i := (v_after ->> 1)::bigint;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR jsonb_array_length(v_after) <> 2
           OR jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR jsonb_typeof(v_after -> 1) IS DISTINCT FROM 'number' OR v_t IS NULL OR v_i IS NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023', MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged';
        END IF;
    END IF;
    v_hide := metastore.hidden_names();
    IF p_dataset_id IS NOT NULL THEN
        IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                        WHERE d.id = p_dataset_id AND d.id <> ALL (v_hide.dataset_ids)
                          AND d.namespace <> ALL (v_hide.namespaces)) THEN
            RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_dataset_id);
        END IF;
        -- Its symlink aliases name the same data (as the lineage graph crosses them).
        v_aliases := metastore.dataset_aliases(ARRAY[p_dataset_id], 100);
    END IF;

    -- Which index walks the timeline: the most selective filter's (a source or COMPLETE has none),
    -- the others are checked on each run.
    IF p_dataset_id IS NOT NULL THEN
        v_driver := 'dataset';
    ELSIF p_user IS NOT NULL THEN
        v_driver := 'user';
        -- With states that have an index too (not COMPLETE): walk the one with fewer runs, each
        -- counted on its index up to 1000 (a user of many runs and failures are rarer, or the
        -- other way round).
        IF NOT 'COMPLETE' = ANY (v_states)
           AND (SELECT count(*) FROM (
                    SELECT FROM unnest(v_states) AS k (state)
                     CROSS JOIN LATERAL (SELECT FROM metastore.runs AS r
                                          WHERE r.state = k.state AND r.state <> 'COMPLETE'
                                          ORDER BY r.state, r.first_event_time LIMIT 1000) AS x
                     LIMIT 1000) AS c)
               < (SELECT count(*) FROM (
                      SELECT FROM metastore.runs AS r
                       WHERE left(r.trino_user, 200) = left(p_user, 200) AND r.trino_user IS NOT NULL
                       ORDER BY left(r.trino_user, 200), r.first_event_time LIMIT 1000) AS c) THEN
            v_driver := 'state';
        END IF;
    ELSIF p_job_namespace IS NOT NULL THEN
        v_jobs := ARRAY(SELECT j.id FROM metastore.jobs AS j
                         WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                               >= substr(metastore.dataset_key(p_job_namespace, ''), 1, 1024)
                           AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                               <= substr(substr(metastore.dataset_key(p_job_namespace, ''), 1,
                                                length(metastore.dataset_key(p_job_namespace, '')) - 1)
                                         || '\x01'::bytea, 1, 1024)
                           AND j.namespace = p_job_namespace
                         -- In order, so that the scan stops at c_jobs + 1 (a bitmap reads the range whole).
                         ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                         LIMIT c_jobs + 1);
        v_driver := CASE WHEN cardinality(v_jobs) <= c_jobs THEN 'jobs'
                         WHEN NOT 'COMPLETE' = ANY (v_states) THEN 'state' ELSE 'time' END;
    -- runs_state_idx holds the runs that did not complete: COMPLETE, most runs, walks the timeline.
    ELSIF NOT 'COMPLETE' = ANY (v_states) THEN
        v_driver := 'state';
    ELSE
        v_driver := 'time';
    END IF;

    v_chunk := p_limit + 1;
    LOOP
        -- The next candidates after (v_t, v_i) in timeline order, from the driver's index.
        IF v_driver = 'dataset' THEN
            SELECT coalesce(array_agg(c.run_id ORDER BY c.run_time DESC, c.run_id DESC), '{}'),
                   coalesce(array_agg(c.run_time ORDER BY c.run_time DESC, c.run_id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT DISTINCT s.run_id, s.run_time
                      FROM unnest(v_aliases) AS a (id)
                     CROSS JOIN LATERAL (
                            SELECT rd.run_id, rd.run_time FROM metastore.run_datasets AS rd
                             WHERE rd.dataset_id = a.id AND (rd.run_time, rd.run_id) < (v_t, v_i)
                               AND rd.run_time >= v_from AND rd.run_time < v_to
                             ORDER BY rd.run_time DESC, rd.run_id DESC
                             -- A run reads and writes a dataset at most once each.
                             LIMIT 2 * v_chunk) AS s
                     ORDER BY s.run_time DESC, s.run_id DESC
                     LIMIT v_chunk) AS c;
        ELSIF v_driver = 'user' THEN
            SELECT coalesce(array_agg(c.id ORDER BY c.first_event_time DESC, c.id DESC), '{}'),
                   coalesce(array_agg(c.first_event_time ORDER BY c.first_event_time DESC, c.id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT r.id, r.first_event_time FROM metastore.runs AS r
                     WHERE left(r.trino_user, 200) = left(p_user, 200) AND r.trino_user IS NOT NULL
                       AND (r.first_event_time, r.id) < (v_t, v_i)
                       AND r.first_event_time >= v_from AND r.first_event_time < v_to
                     ORDER BY left(r.trino_user, 200), r.first_event_time DESC, r.id DESC
                     LIMIT v_chunk) AS c;
        ELSIF v_driver IN ('jobs', 'state') THEN
            -- Several ordered walks (one per job, or per state) merged.
            SELECT coalesce(array_agg(c.id ORDER BY c.first_event_time DESC, c.id DESC), '{}'),
                   coalesce(array_agg(c.first_event_time ORDER BY c.first_event_time DESC, c.id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT s.id, s.first_event_time
                      FROM unnest(CASE WHEN v_driver = 'jobs' THEN v_jobs END) AS k (job_id)
                     CROSS JOIN LATERAL (
                            SELECT r.id, r.first_event_time FROM metastore.runs AS r
                             WHERE r.job_id = k.job_id AND (r.first_event_time, r.id) < (v_t, v_i)
                               AND r.first_event_time >= v_from AND r.first_event_time < v_to
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS s
                    UNION ALL
                    SELECT s.id, s.first_event_time
                      FROM unnest(CASE WHEN v_driver = 'state' THEN v_states END) AS k (state)
                     CROSS JOIN LATERAL (
                            SELECT r.id, r.first_event_time FROM metastore.runs AS r
                             WHERE r.state = k.state AND r.state <> 'COMPLETE' AND (r.first_event_time, r.id) < (v_t, v_i)
                               AND r.first_event_time >= v_from AND r.first_event_time < v_to
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS s
                     ORDER BY 2 DESC, 1 DESC
                     LIMIT v_chunk) AS c;
        ELSE
            SELECT coalesce(array_agg(c.id ORDER BY c.first_event_time DESC, c.id DESC), '{}'),
                   coalesce(array_agg(c.first_event_time ORDER BY c.first_event_time DESC, c.id DESC), '{}')
              INTO v_ids, v_times
              FROM (SELECT r.id, r.first_event_time FROM metastore.runs AS r
                     WHERE (r.first_event_time, r.id) < (v_t, v_i)
                       AND r.first_event_time >= v_from AND r.first_event_time < v_to
                     ORDER BY r.first_event_time DESC, r.id DESC
                     LIMIT v_chunk) AS c;
        END IF;
        EXIT WHEN cardinality(v_ids) = 0;
        v_scanned := v_scanned + cardinality(v_ids);
        v_t := v_times[cardinality(v_times)];
        v_i := v_ids[cardinality(v_ids)];

        -- Every filter on each candidate, in the candidates' order; the first p_limit + 1 kept.
        SELECT coalesce(array_agg(x.id ORDER BY x.o), '{}')
          INTO v_kept
          FROM (SELECT c.o, r.id
                  FROM unnest(v_ids) WITH ORDINALITY AS c (id, o)
                  JOIN metastore.runs AS r ON r.id = c.id
                  JOIN metastore.jobs AS j ON j.id = r.job_id
                 WHERE (v_states IS NULL OR r.state = ANY (v_states))
                   AND (p_user IS NULL OR r.trino_user = p_user)
                   AND (p_source IS NULL OR r.trino_source = p_source)
                   AND (p_job_namespace IS NULL OR j.namespace = p_job_namespace)
                   AND (v_aliases IS NULL
                        OR EXISTS (SELECT FROM metastore.run_datasets AS rd
                                    WHERE rd.run_id = r.id AND rd.dataset_id = ANY (v_aliases)))
                   AND r.job_id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)
                 ORDER BY c.o
                 LIMIT p_limit + 1 - cardinality(v_page)) AS x;
        v_page := v_page || v_kept;
        EXIT WHEN cardinality(v_page) > p_limit OR cardinality(v_ids) < v_chunk OR v_scanned >= c_scan;
        v_chunk := least(v_chunk * 4, c_scan - v_scanned);
    END LOOP;

    IF cardinality(v_page) > p_limit THEN
        v_page := v_page[1:p_limit];
        SELECT jsonb_build_array(r.first_event_time::text, r.id)::text INTO v_next
          FROM metastore.runs AS r WHERE r.id = v_page[p_limit];
    ELSIF v_scanned >= c_scan THEN
        -- Not at the end: the page looked at as many runs as one page may. Go on from the last.
        v_next := jsonb_build_array(v_t::text, v_i)::text;
    END IF;

    -- What the page shows, the datasets of all its runs in one statement: at most 100 of each side
    -- per run, along run_datasets' key (the smallest ids), and whether there are more.
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', r.id, 'run_id', r.run_id, 'state', r.state,
               'started_at', r.started_at, 'ended_at', r.ended_at,
               'duration_s', extract(epoch FROM r.duration),
               'trino_user', r.trino_user, 'trino_source', r.trino_source,
               'error_message', r.error_message,
               'first_event_time', r.first_event_time, 'last_event_time', r.last_event_time,
               'event_count', r.event_count,
               'job', jsonb_build_object('id', j.id, 'namespace', j.namespace, 'name', j.name),
               'inputs', io.inputs, 'outputs', io.outputs,
               'datasets_truncated', (io.inputs_full OR io.outputs_full) AND EXISTS (
                   SELECT FROM metastore.run_datasets AS rd
                     JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                    WHERE rd.run_id = r.id
                      AND ((io.inputs_full AND rd.direction = 'input' AND rd.dataset_id > io.last_input)
                           OR (io.outputs_full AND rd.direction = 'output' AND rd.dataset_id > io.last_output))
                      AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)))
               ORDER BY p.o), '[]')
      INTO v_runs
      FROM unnest(v_page) WITH ORDINALITY AS p (id, o)
      JOIN metastore.runs AS r ON r.id = p.id
      JOIN metastore.jobs AS j ON j.id = r.job_id
     CROSS JOIN LATERAL (
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', s.id, 'namespace', s.namespace, 'name', s.name)
                                      ORDER BY s.namespace COLLATE "C", s.name COLLATE "C", s.id)
                                FILTER (WHERE s.direction = 'input'), '[]') AS inputs,
                   coalesce(jsonb_agg(jsonb_build_object('id', s.id, 'namespace', s.namespace, 'name', s.name)
                                      ORDER BY s.namespace COLLATE "C", s.name COLLATE "C", s.id)
                                FILTER (WHERE s.direction = 'output'), '[]') AS outputs,
                   -- A side of 100: is there a 101st (past the greatest id listed)? Asked above.
                   count(*) FILTER (WHERE s.direction = 'input') = 100 AS inputs_full,
                   count(*) FILTER (WHERE s.direction = 'output') = 100 AS outputs_full,
                   max(s.id) FILTER (WHERE s.direction = 'input') AS last_input,
                   max(s.id) FILTER (WHERE s.direction = 'output') AS last_output
              FROM (SELECT * FROM (
                        SELECT rd.direction, d.id, d.namespace, d.name
                          FROM metastore.run_datasets AS rd
                          JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                         WHERE rd.run_id = r.id AND rd.direction = 'input'
                           AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                         ORDER BY rd.dataset_id LIMIT 100) AS i
                    UNION ALL
                    SELECT * FROM (
                        SELECT rd.direction, d.id, d.namespace, d.name
                          FROM metastore.run_datasets AS rd
                          JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                         WHERE rd.run_id = r.id AND rd.direction = 'output'
                           AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                         ORDER BY rd.dataset_id LIMIT 100) AS o) AS s) AS io;
    IF v_next IS NOT NULL THEN
        v_next := translate(encode(convert_to(v_next, 'UTF8'), 'base64'), E'+/\n', '-_');
    END IF;
    RETURN jsonb_build_object('runs', v_runs, 'next_cursor', v_next);
END
$fn$;

COMMENT ON FUNCTION metastore.list_runs(integer, text, text, text, text, text, bigint, text, text) IS
    'One page of runs, newest first by their first eventTime (then id), keyset-paginated: {"runs": [...], '
    '"next_cursor": text or null}. Each run with its state, times, Trino user and source, error, job, and the '
    'datasets it read (inputs) and wrote (outputs), at most 100 each. Filters (combined with AND): state (one '
    'or several, comma-separated), the Trino user, the Trino source, the job namespace, a dataset (runs that '
    'read or wrote it or one of its symlink aliases), first eventTime in [from, to). A page looks at most '
    '5000 runs: a rare combination of filters may give fewer than p_limit runs, or none, with a next_cursor '
    '(null only at the end). Hidden datasets and jobs (metastore.hide) are left out. Error codes: 22023 '
    'limit outside 1..1000, an unknown state, from after to, or a cursor not returned by this function; '
    '22007/22008 a time that is not one; P0002 no such dataset.';

REVOKE ALL ON FUNCTION metastore.list_runs(integer, text, text, text, text, text, bigint, text, text) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION metastore.list_runs(integer, text, text, text, text, text, bigint, text, text) '
        'TO %I, %I', metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
