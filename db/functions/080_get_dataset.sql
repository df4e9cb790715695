CREATE OR REPLACE FUNCTION metastore.get_dataset(
    p_id           bigint,
    p_events_limit integer DEFAULT 50
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_hide    record := metastore.hidden_names();
    v_dataset jsonb;
    v_first   timestamptz;
    v_before  timestamptz;
    v_lo      timestamptz;
    v_span    interval := interval '1 day';
    v_ids     bigint[] := '{}';
    v_times   timestamptz[] := '{}';
    v_dirs    text[] := '{}';
    v_events  jsonb;
BEGIN
    IF p_events_limit IS NULL OR p_events_limit < 0 OR p_events_limit > 1000 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('events_limit must be from 0 to 1000, not %s', p_events_limit);
    END IF;

    SELECT to_jsonb(v), v.first_seen, v.last_seen + interval '1 microsecond'
      INTO v_dataset, v_first, v_before
      FROM metastore.datasets_view AS v
     WHERE v.id = p_id AND v.id <> ALL (v_hide.dataset_ids) AND v.namespace <> ALL (v_hide.namespaces);
    IF v_dataset IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    -- Its most recent links, newest eventTime first. Links are partitioned by day of eventTime and
    -- all of a dataset's lie between its first_seen and last_seen. When its counts say they fit in
    -- one page, one look over that lifetime; otherwise look back from last_seen over windows of 1,
    -- 8, 64 and 512 days, then the rest, until the page is full: a busy dataset reads a day or two
    -- of partitions, never all of them. EXECUTE plans each query for its actual window, so pruned
    -- to that window's partitions (a cached generic plan would open and lock every partition).
    IF (v_dataset ->> 'input_events')::bigint + (v_dataset ->> 'output_events')::bigint <= p_events_limit THEN
        v_span := NULL;
    END IF;
    WHILE cardinality(v_ids) < p_events_limit LOOP
        v_lo := CASE WHEN v_span IS NULL OR v_span > interval '512 days' THEN v_first
                     ELSE greatest(v_before - v_span, v_first) END;
        EXECUTE
            'SELECT $1 || coalesce(array_agg(w.event_id ORDER BY w.event_time DESC, w.event_id DESC, w.direction), ''{}''),
                    $2 || coalesce(array_agg(w.event_time ORDER BY w.event_time DESC, w.event_id DESC, w.direction), ''{}''),
                    $3 || coalesce(array_agg(w.direction ORDER BY w.event_time DESC, w.event_id DESC, w.direction), ''{}'')
               FROM (SELECT l.event_id, l.event_time, l.direction
                       FROM metastore.event_datasets AS l
                      WHERE l.dataset_id = $4 AND l.event_time >= $5 AND l.event_time < $6
                      ORDER BY l.event_time DESC, l.event_id DESC, l.direction
                      LIMIT $7) AS w'
            INTO v_ids, v_times, v_dirs
            USING v_ids, v_times, v_dirs, p_id, v_lo, v_before, p_events_limit - cardinality(v_ids);
        EXIT WHEN v_lo <= v_first;
        v_before := v_lo;
        v_span := v_span * 8;
    END LOOP;

    -- Their events' headers, from the partitions of those eventTimes only; not those of a hidden
    -- job (the feed still serves them).
    v_events := '[]';
    IF cardinality(v_ids) > 0 THEN
        EXECUTE
            'SELECT coalesce(jsonb_agg(to_jsonb(r) - ''position'' ORDER BY r.position), ''[]'')
               FROM (SELECT l.event_id, l.direction, e.event_kind, e.event_type, e.event_time, e.run_id,
                            e.job_namespace, e.job_name, e.received_at, l.position
                       FROM unnest($1, $2, $3) WITH ORDINALITY AS l (event_id, event_time, direction, position)
                       JOIN metastore.events AS e ON e.id = l.event_id AND e.event_time = l.event_time
                      WHERE e.event_time = ANY ($2)
                        AND (e.job_namespace IS NULL OR e.job_namespace <> ALL ($5))
                        AND (cardinality($4) = 0 OR e.job_name IS NULL
                             OR sha256(metastore.dataset_key(e.job_namespace, e.job_name)) <> ALL (
                                    SELECT j.name_key FROM metastore.jobs AS j WHERE j.id = ANY ($4)))) AS r'
            INTO v_events
            USING v_ids, v_times, v_dirs, v_hide.job_ids, v_hide.namespaces;
    END IF;

    RETURN v_dataset || jsonb_build_object(
        'symlinks', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind, 'type', s.type)
                       ORDER BY d.namespace, d.name, s.type), '[]')
              FROM metastore.dataset_symlinks_view AS s
              JOIN metastore.datasets_view AS d ON d.id = s.symlink_id
             WHERE s.dataset_id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)),
        'symlink_of', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind, 'type', s.type)
                       ORDER BY d.namespace, d.name, s.type), '[]')
              FROM metastore.dataset_symlinks_view AS s
              JOIN metastore.datasets_view AS d ON d.id = s.dataset_id
             WHERE s.symlink_id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)),
        'events', v_events)
        -- Fields, schema versions, column lineage and one hop of lineage.
        || metastore.dataset_layer(p_id);
END
$fn$;

COMMENT ON FUNCTION metastore.get_dataset(bigint, integer) IS
    'One dataset with its symlinks (identifiers it carries), symlink_of (datasets that name it as a symlink) '
    'and its most recent events, newest eventTime first (job, run, event type, direction, time), and '
    '(metastore.dataset_layer) its fields, schema_versions, column_lineage, upstream and downstream. '
    'What the owner hid (metastore.hide) is not there: a hidden dataset is not found, hidden datasets are not '
    'listed, events of hidden jobs not shown. Error codes: P0002 no such dataset; 22023 events_limit outside 0..1000.';

REVOKE ALL ON FUNCTION metastore.get_dataset(bigint, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.get_dataset(bigint, integer) TO %I, %I',
                              metastore.group_role('app'),
                              metastore.group_role('reader'));
END
$grant$;
