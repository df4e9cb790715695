-- Jobs with their latest run, by name or by latest run, filtered by the state and user of the latest
-- run. (The four-argument metastore.list_jobs of the previous release calls this one.)
CREATE OR REPLACE FUNCTION metastore.list_jobs(
    p_limit     integer,
    p_cursor    text,
    p_namespace text,
    p_q         text,
    p_sort      text,
    p_state     text,
    p_user      text
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
-- Planned once per session (plans do not depend on the values: key lookups and ranges); a
-- custom plan of each statement cost more to make than to run.
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    -- Jobs (sort=name) or runs (sort=latest_run) looked at per page, at most: a rare state or user
    -- gives a page with fewer jobs, or none, and a cursor to go on from.
    c_scan   constant integer := 10000;
    c_states constant text[] := ARRAY['START', 'RUNNING', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER'];
    v_hide   record;
    v_sort   text := coalesce(p_sort, 'name');
    v_states text[];
    v_after  jsonb;
    v_second text;
    -- sort=name: bounds in metastore.dataset_key order (jobs_order_idx), as the four-argument one.
    v_from   bytea := '\x'::bytea;
    v_to     bytea := '\xff'::bytea;
    -- sort=latest_run: the latest run's (first_event_time, id) to go on after.
    v_t      timestamptz := 'infinity';
    v_i      bigint := 9223372036854775807;
    v_like   text;
    v_chunk  integer;
    v_seen   integer := 0;
    v_ids    bigint[];
    v_keys   bytea[];
    v_times  timestamptz[];
    v_runs   bigint[];
    v_complete boolean;
    v_page   jsonb := '[]';
    v_more   jsonb;
    v_last   jsonb;
    v_next   text;
    v_few    bigint[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF v_sort NOT IN ('name', 'latest_run') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('sort must be name or latest_run, not %s', p_sort);
    END IF;
    IF p_state IS NOT NULL THEN
        v_states := ARRAY(SELECT DISTINCT upper(btrim(s)) FROM unnest(string_to_array(p_state, ',')) AS s);
        IF cardinality(v_states) = 0 OR NOT v_states <@ c_states THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = format('state must be one or more of %s, separated by commas, not %s',
                                 array_to_string(c_states, ', '), p_state);
        END IF;
    END IF;
    IF p_cursor IS NOT NULL THEN
        -- By name: [namespace, name]; by latest run: [its first eventTime, its id].
        v_second := CASE v_sort WHEN 'name' THEN 'string' ELSE 'number' END;
        BEGIN
            v_after := convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
            IF v_sort = 'latest_run' THEN
                v_t := (v_after ->> 0)::timestamptz;
                v_i := (v_after ->> 1)::bigint;
            END IF;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR jsonb_array_length(v_after) <> 2
           OR jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR jsonb_typeof(v_after -> 1) IS DISTINCT FROM v_second
           OR v_t IS NULL OR v_i IS NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged, with the same sort';
        END IF;
        IF v_sort = 'name' THEN
            v_from := metastore.dataset_key(v_after ->> 0, v_after ->> 1);
        END IF;
    END IF;
    IF p_namespace IS NOT NULL THEN
        -- The namespace's keys lie between its bytes followed by 0 and by 1.
        v_to := metastore.dataset_key(p_namespace, '');
        v_from := greatest(v_from, v_to);
        v_to := substr(substr(v_to, 1, length(v_to) - 1) || '\x01'::bytea, 1, 1024);
    END IF;
    -- q: a case-insensitive substring of the name (\, % and _ taken literally).
    IF p_q IS NOT NULL THEN
        v_like := '%' || replace(replace(replace(lower(p_q), E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%';
    END IF;
    v_hide := metastore.hidden_names();
    -- runs_state_idx holds the runs that did not complete: with COMPLETE, walk all runs.
    v_complete := coalesce('COMPLETE' = ANY (v_states), false);

    IF v_sort = 'latest_run' THEN
        -- Few jobs (in the namespace): each one's latest run, sorted. Many: walk the runs newest
        -- first (the index of the state or user filter if there is one) and take each run that is
        -- its job's latest; with Trino's job per query every run is.
        v_few := ARRAY(SELECT j.id FROM metastore.jobs AS j
                        WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                              >= substr(CASE WHEN p_namespace IS NULL THEN '\x'::bytea ELSE v_from END, 1, 1024)
                          AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_to
                          AND (p_namespace IS NULL OR j.namespace = p_namespace)
                        -- In order, so that the scan stops at c_scan + 1 (a bitmap reads the range whole).
                        ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024)
                        LIMIT c_scan + 1);
        IF cardinality(v_few) > c_scan THEN
            v_few := NULL;
        END IF;
    END IF;

    -- Few jobs: every candidate at once. Otherwise chunks, growing, until the page is full.
    v_chunk := CASE WHEN v_few IS NOT NULL THEN c_scan + 1 ELSE p_limit + 1 END;
    LOOP
        IF v_sort = 'name' THEN
            SELECT coalesce(array_agg(c.id ORDER BY c.o), '{}'), coalesce(array_agg(c.k ORDER BY c.o), '{}')
              INTO v_ids, v_keys
              FROM (SELECT j.id, metastore.dataset_key(j.namespace, j.name) AS k,
                           row_number() OVER (ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                                                       metastore.dataset_key(j.namespace, j.name)) AS o
                      FROM (SELECT * FROM metastore.jobs AS j
                             WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= substr(v_from, 1, 1024)
                               AND metastore.dataset_key(j.namespace, j.name) > v_from
                               AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_to
                             ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                                      metastore.dataset_key(j.namespace, j.name)
                             LIMIT v_chunk) AS j) AS c;
            EXIT WHEN cardinality(v_ids) = 0;
            v_from := v_keys[cardinality(v_keys)];
            v_runs := NULL;
        ELSE
            SELECT coalesce(array_agg(c.job_id ORDER BY c.t DESC, c.run_id DESC), '{}'),
                   coalesce(array_agg(c.t ORDER BY c.t DESC, c.run_id DESC), '{}'),
                   coalesce(array_agg(c.run_id ORDER BY c.t DESC, c.run_id DESC), '{}')
              INTO v_ids, v_times, v_runs
              FROM (
                    -- Each of the few jobs' latest run.
                    SELECT l.job_id, l.first_event_time AS t, l.id AS run_id
                      FROM unnest(v_few) AS f (id)
                     CROSS JOIN LATERAL (SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                                          WHERE r.job_id = f.id
                                          ORDER BY r.first_event_time DESC, r.id DESC LIMIT 1) AS l
                     WHERE (l.first_event_time, l.id) < (v_t, v_i)
                    UNION ALL
                    -- Or the runs newest first (those that are their job's latest are kept below):
                    -- of the user, of the states, or all.
                    SELECT w.job_id, w.first_event_time, w.id
                      FROM (SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                             WHERE v_few IS NULL AND p_user IS NOT NULL
                               AND left(r.trino_user, 200) = left(p_user, 200) AND r.trino_user IS NOT NULL
                               AND (r.first_event_time, r.id) < (v_t, v_i)
                             ORDER BY left(r.trino_user, 200), r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS w
                    UNION ALL
                    SELECT s.job_id, s.first_event_time, s.id
                      FROM unnest(CASE WHEN v_few IS NULL AND p_user IS NULL AND NOT v_complete THEN v_states END)
                           AS k (state)
                     CROSS JOIN LATERAL (
                            SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                             WHERE r.state = k.state AND r.state <> 'COMPLETE' AND (r.first_event_time, r.id) < (v_t, v_i)
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS s
                    UNION ALL
                    SELECT w.job_id, w.first_event_time, w.id
                      FROM (SELECT r.job_id, r.first_event_time, r.id FROM metastore.runs AS r
                             WHERE v_few IS NULL AND p_user IS NULL AND (v_states IS NULL OR v_complete)
                               AND (r.first_event_time, r.id) < (v_t, v_i)
                             ORDER BY r.first_event_time DESC, r.id DESC
                             LIMIT v_chunk) AS w
                     ORDER BY 2 DESC, 3 DESC
                     LIMIT v_chunk) AS c;
            EXIT WHEN cardinality(v_ids) = 0;
            v_t := v_times[cardinality(v_times)];
            v_i := v_runs[cardinality(v_runs)];
        END IF;
        v_seen := v_seen + cardinality(v_ids);

        -- Every filter on each candidate, in order: its latest run's state and user, the name, what
        -- is hidden; sort=latest_run keeps a run only if it is its job's latest.
        SELECT coalesce(jsonb_agg(x.job ORDER BY x.o), '[]')
          INTO v_more
          FROM (SELECT c.o, jsonb_build_object(
                           'id', j.id, 'namespace', j.namespace, 'name', j.name,
                           'first_seen', j.first_seen, 'last_seen', j.last_seen,
                           'processing_type', j.processing_type, 'integration', j.integration, 'job_type', j.job_type,
                           'latest_run', CASE WHEN r.id IS NOT NULL THEN jsonb_build_object(
                                              'id', r.id, 'run_id', r.run_id, 'state', r.state,
                                              'started_at', r.started_at, 'ended_at', r.ended_at,
                                              'duration_s', extract(epoch FROM r.duration),
                                              'trino_user', r.trino_user, 'trino_source', r.trino_source,
                                              'first_event_time', r.first_event_time) END) AS job
                  FROM unnest(v_ids, v_runs) WITH ORDINALITY AS c (id, run, o)
                  JOIN metastore.jobs AS j ON j.id = c.id
                  LEFT JOIN LATERAL (SELECT v.* FROM metastore.runs_view AS v WHERE v.job_id = j.id
                                      ORDER BY v.first_event_time DESC, v.id DESC LIMIT 1) AS r ON true
                 WHERE (c.run IS NULL OR r.id = c.run)
                   AND (p_namespace IS NULL OR j.namespace = p_namespace)
                   AND (v_like IS NULL OR lower(j.name) LIKE v_like)
                   AND (v_states IS NULL OR r.state = ANY (v_states))
                   AND (p_user IS NULL OR r.trino_user = p_user)
                   AND j.id <> ALL (v_hide.job_ids) AND j.namespace <> ALL (v_hide.namespaces)) AS x;
        v_page := v_page || v_more;
        EXIT WHEN jsonb_array_length(v_page) > p_limit OR cardinality(v_ids) < v_chunk OR v_seen >= c_scan;
        v_chunk := least(v_chunk * 4, c_scan - v_seen);
    END LOOP;

    IF jsonb_array_length(v_page) > p_limit THEN
        v_page := (SELECT jsonb_agg(e.value ORDER BY e.o) FROM jsonb_array_elements(v_page) WITH ORDINALITY AS e (value, o)
                    WHERE e.o <= p_limit);
        v_last := v_page -> (p_limit - 1);
        v_next := CASE v_sort
                      WHEN 'name' THEN jsonb_build_array(v_last -> 'namespace', v_last -> 'name')::text
                      ELSE jsonb_build_array((v_last #>> '{latest_run,first_event_time}')::timestamptz::text,
                                             (v_last #>> '{latest_run,id}')::bigint)::text END;
    ELSIF v_seen >= c_scan AND cardinality(v_ids) > 0 THEN
        -- Not at the end: the page looked at as many as one page may. Go on from the last.
        v_next := CASE v_sort
                      WHEN 'name' THEN (SELECT jsonb_build_array(j.namespace, j.name)::text FROM metastore.jobs AS j
                                         WHERE j.id = v_ids[cardinality(v_ids)])
                      ELSE jsonb_build_array(v_t::text, v_i)::text END;
    END IF;
    IF v_next IS NOT NULL THEN
        v_next := translate(encode(convert_to(v_next, 'UTF8'), 'base64'), E'+/\n', '-_');
    END IF;
    RETURN jsonb_build_object('jobs', v_page, 'next_cursor', v_next);
END
$fn$;

COMMENT ON FUNCTION metastore.list_jobs(integer, text, text, text, text, text, text) IS
    'One page of jobs, each with its latest run (by first eventTime): {"jobs": [...], "next_cursor": text or '
    'null}. p_sort name (default; by namespace and name, as the four-argument metastore.list_jobs) or latest_run '
    '(newest latest run first; jobs without a run are not listed). Filters: exact namespace, q (case-insensitive '
    'substring of the name), state (one or several, comma-separated) and Trino user of the latest run. A page '
    'looks at most 10000 jobs (sort=name) or runs (sort=latest_run): a rare filter may give fewer than p_limit '
    'jobs, or none, with a next_cursor (null only at the end). Hidden jobs and namespaces (metastore.hide) are '
    'not listed. Error codes: 22023 limit outside 1..1000, an unknown sort or state, or a cursor not returned '
    'by this function for this sort.';

REVOKE ALL ON FUNCTION metastore.list_jobs(integer, text, text, text, text, text, text) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION metastore.list_jobs(integer, text, text, text, text, text, text) TO %I, %I',
        metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
