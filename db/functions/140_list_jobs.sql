CREATE OR REPLACE FUNCTION metastore.list_jobs(
    p_limit     integer DEFAULT 100,
    p_cursor    text DEFAULT NULL,
    p_namespace text DEFAULT NULL,
    p_q         text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_after jsonb;
    -- Bounds in metastore.dataset_key order (jobs_order_idx): from the start to past every key (no
    -- text holds the byte 0xff).
    v_from  bytea := '\x'::bytea;
    v_to    bytea := '\xff'::bytea;
    v_like  text;
    v_rows  jsonb;
    v_last  jsonb;
    v_next  text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF p_cursor IS NOT NULL THEN
        BEGIN
            v_after := convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR jsonb_array_length(v_after) <> 2
           OR jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR jsonb_typeof(v_after -> 1) IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023', MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged';
        END IF;
        v_from := metastore.dataset_key(v_after ->> 0, v_after ->> 1);
    END IF;
    IF p_namespace IS NOT NULL THEN
        -- The namespace's keys lie between its bytes followed by 0 and by 1.
        v_to := metastore.dataset_key(p_namespace, '');
        v_from := greatest(v_from, v_to);
        v_to := substr(substr(v_to, 1, length(v_to) - 1) || '\x01'::bytea, 1, 1024);
    END IF;
    -- q: a case-insensitive substring of the name (\, % and _ taken literally). No trigram index on
    -- jobs: jobs_order_idx is walked in order, and stops at the page's end.
    IF p_q IS NOT NULL THEN
        v_like := '%' || replace(replace(replace(lower(p_q), E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%';
    END IF;

    -- Keyset pages in (namespace, name) order, code point by code point (metastore.dataset_key, as
    -- list_datasets): jobs_order_idx holds its first 1024 bytes, ties past them are sorted. The
    -- latest run per row of the page only.
    SELECT coalesce(jsonb_agg(p.job ORDER BY p.sort_key), '[]')
      INTO v_rows
      FROM (SELECT metastore.dataset_key(j.namespace, j.name) AS sort_key,
                   jsonb_build_object(
                       'id', j.id, 'namespace', j.namespace, 'name', j.name,
                       'first_seen', j.first_seen, 'last_seen', j.last_seen,
                       'processing_type', j.processing_type, 'integration', j.integration, 'job_type', j.job_type,
                       'latest_run', (
                           SELECT jsonb_build_object(
                                      'id', r.id, 'run_id', r.run_id, 'state', r.state,
                                      'started_at', r.started_at, 'ended_at', r.ended_at,
                                      'duration_s', extract(epoch FROM r.duration),
                                      'trino_user', r.trino_user, 'trino_source', r.trino_source)
                             FROM metastore.runs_view AS r
                            WHERE r.job_id = j.id
                            ORDER BY r.first_event_time DESC, r.id DESC
                            LIMIT 1)) AS job
              FROM metastore.jobs AS j
             WHERE substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) >= substr(v_from, 1, 1024)
               AND metastore.dataset_key(j.namespace, j.name) > v_from
               AND substr(metastore.dataset_key(j.namespace, j.name), 1, 1024) <= v_to
               AND (p_namespace IS NULL OR j.namespace = p_namespace)
               AND (v_like IS NULL OR lower(j.name) LIKE v_like)
             ORDER BY substr(metastore.dataset_key(j.namespace, j.name), 1, 1024),
                      metastore.dataset_key(j.namespace, j.name)
             LIMIT p_limit + 1) AS p;

    IF jsonb_array_length(v_rows) > p_limit THEN
        v_rows := v_rows - p_limit;
        v_last := v_rows -> (p_limit - 1);
        v_next := translate(encode(convert_to(
                      jsonb_build_array(v_last -> 'namespace', v_last -> 'name')::text, 'UTF8'), 'base64'),
                      E'+/\n', '-_');
    END IF;
    RETURN jsonb_build_object('jobs', v_rows, 'next_cursor', v_next);
END
$fn$;

COMMENT ON FUNCTION metastore.list_jobs(integer, text, text, text) IS
    'One page of jobs ordered by (namespace, name), each with its latest run (by first eventTime): '
    '{"jobs": [...], "next_cursor": text or null}. Filters: exact namespace, q (case-insensitive substring '
    'of the name). Error codes: 22023 limit outside 1..1000 or a cursor not returned by this function.';

REVOKE ALL ON FUNCTION metastore.list_jobs(integer, text, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.list_jobs(integer, text, text, text) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
