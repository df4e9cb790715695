CREATE OR REPLACE FUNCTION metastore.get_dataset(
    p_id           bigint,
    p_events_limit integer DEFAULT 50
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_dataset jsonb;
BEGIN
    IF p_events_limit IS NULL OR p_events_limit < 0 OR p_events_limit > 1000 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('events_limit must be from 0 to 1000, not %s', p_events_limit);
    END IF;

    SELECT to_jsonb(v) INTO v_dataset FROM metastore.datasets_view AS v WHERE v.id = p_id;
    IF v_dataset IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    RETURN v_dataset || jsonb_build_object(
        'symlinks', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind, 'type', s.type)
                       ORDER BY d.namespace, d.name, s.type), '[]')
              FROM metastore.dataset_symlinks_view AS s
              JOIN metastore.datasets_view AS d ON d.id = s.symlink_id
             WHERE s.dataset_id = p_id),
        'symlink_of', (
            SELECT coalesce(jsonb_agg(jsonb_build_object(
                       'id', d.id, 'namespace', d.namespace, 'name', d.name, 'kind', d.kind, 'type', s.type)
                       ORDER BY d.namespace, d.name, s.type), '[]')
              FROM metastore.dataset_symlinks_view AS s
              JOIN metastore.datasets_view AS d ON d.id = s.dataset_id
             WHERE s.symlink_id = p_id),
        'events', (
            -- Most recently stored first: (dataset_id, event_id) is indexed; sorting a busy
            -- dataset's events by eventTime would read them all.
            SELECT coalesce(jsonb_agg(to_jsonb(r) ORDER BY r.event_id DESC), '[]')
              FROM (SELECT e.event_id, e.direction, e.event_kind, e.event_type, e.event_time, e.run_id,
                           e.job_namespace, e.job_name, e.received_at
                      FROM metastore.dataset_events_view AS e
                     WHERE e.dataset_id = p_id
                     ORDER BY e.event_id DESC
                     LIMIT p_events_limit) AS r));
END
$fn$;

COMMENT ON FUNCTION metastore.get_dataset(bigint, integer) IS
    'One dataset with its symlinks (identifiers it carries), symlink_of (datasets that name it as a symlink) '
    'and its most recently stored events (job, run, event type, direction, time). '
    'Error codes: P0002 no such dataset; 22023 events_limit outside 0..1000.';

REVOKE ALL ON FUNCTION metastore.get_dataset(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION metastore.get_dataset(bigint, integer) TO metastore_app, metastore_reader;
