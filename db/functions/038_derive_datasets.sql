-- Datasets, their activity, links and symlinks from a set of stored events: the one rule, used by
-- metastore.store_events for the events it stores and by metastore.backfill for every stored one.
-- Each statement takes its rows in key order, and every writer runs the statements in the same
-- order (this function, then derive_lineage, then derive_job_run, one call each per transaction),
-- so concurrent sets wait for each other on what they share and never deadlock.
CREATE OR REPLACE FUNCTION metastore.derive_datasets(
    p_event_ids bigint[],
    p_events    metastore.valid_event[],
    p_roll_up   boolean
) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_generation integer := metastore.derive_generation();
    v_id_of      jsonb;
    v_added      bigint[] := '{}';
    v_named      boolean;
    v_missing    boolean;
BEGIN
    -- p_events[i] is what metastore.validate_event read from the event stored as p_event_ids[i].
    -- Every dataset mentioned, looked up by its key (a probe each). The statements below find a
    -- mention's id in this jsonb object keyed by [namespace, name], not by a join to arrays: the
    -- generic plan, which guesses ten rows for each side, joined every mention to all of the set's
    -- datasets.
    SELECT coalesce(jsonb_object_agg(metastore.mention_key(m.namespace, m.name), d.id) FILTER (WHERE d.id IS NOT NULL),
                    '{}'),
           coalesce(bool_or(d.kind = 'symlink' AND m.direct), false), coalesce(bool_or(d.id IS NULL), false)
      INTO v_id_of, v_named, v_missing
      FROM (SELECT x.namespace, x.name, bool_or(x.symlink_of_namespace IS NULL) AS direct
              FROM unnest(p_events) AS u CROSS JOIN LATERAL unnest(u.mentions) AS x
             GROUP BY x.namespace, x.name) AS m
      LEFT JOIN metastore.datasets AS d ON d.name_key = sha256(metastore.dataset_key(m.namespace, m.name));

    IF v_missing THEN
        -- New datasets take what these events say, in (namespace, name) order. An existing dataset
        -- is not updated (that would lock its row until commit, and events sharing it would commit
        -- one at a time): the events' part goes to dataset_activity below.
        WITH added AS (
            INSERT INTO metastore.datasets AS d (namespace, name, kind, first_seen, last_seen, input_events,
                                                 output_events, generation)
            SELECT x.namespace, x.name,
                   CASE WHEN bool_or(x.symlink_of_namespace IS NULL) THEN 'dataset' ELSE 'symlink' END,
                   min(u.event_time), max(u.event_time),
                   count(DISTINCT u.id) FILTER (WHERE x.direction = 'input'),
                   count(DISTINCT u.id) FILTER (WHERE x.direction = 'output'),
                   v_generation
              FROM ROWS FROM (unnest(p_event_ids), unnest(p_events))
                   AS u (id)
             CROSS JOIN LATERAL unnest(u.mentions) AS x
             WHERE NOT v_id_of ? metastore.mention_key(x.namespace, x.name)
             GROUP BY x.namespace, x.name
             ORDER BY x.namespace, x.name
            ON CONFLICT (name_key) DO NOTHING
            RETURNING d.id, d.namespace, d.name)
        SELECT coalesce(array_agg(a.id), '{}'),
               v_id_of || coalesce(jsonb_object_agg(metastore.mention_key(a.namespace, a.name), a.id), '{}')
          INTO v_added, v_id_of
          FROM added AS a;
        -- Those another writer stored meanwhile (the insert waited for it to commit): a statement of
        -- its own sees them.
        SELECT v_id_of || coalesce(jsonb_object_agg(metastore.mention_key(m.namespace, m.name), d.id), '{}'),
               v_named OR coalesce(bool_or(d.kind = 'symlink' AND m.direct), false)
          INTO v_id_of, v_named
          FROM (SELECT x.namespace, x.name, bool_or(x.symlink_of_namespace IS NULL) AS direct
                  FROM unnest(p_events) AS u CROSS JOIN LATERAL unnest(u.mentions) AS x
                 WHERE NOT v_id_of ? metastore.mention_key(x.namespace, x.name)
                 GROUP BY x.namespace, x.name) AS m
          JOIN metastore.datasets AS d ON d.name_key = sha256(metastore.dataset_key(m.namespace, m.name));
    END IF;
    IF v_id_of = '{}' THEN
        RETURN v_id_of;
    END IF;

    -- What the events add to datasets stored before them. datasets_view adds it and
    -- metastore.roll_up_datasets folds it in (a rebuild, when it ends, for a dataset of an older
    -- generation).
    INSERT INTO metastore.dataset_activity (dataset_id, first_seen, last_seen, input_events, output_events,
                                            generation, direct)
    SELECT x.id, min(x.event_time), max(x.event_time),
           count(DISTINCT x.event_id) FILTER (WHERE x.direction = 'input'),
           count(DISTINCT x.event_id) FILTER (WHERE x.direction = 'output'),
           v_generation, bool_or(x.direct)
      FROM (SELECT u.id AS event_id, u.event_time, m.direction, m.symlink_of_namespace IS NULL AS direct,
                   (v_id_of ->> metastore.mention_key(m.namespace, m.name))::bigint AS id
              FROM ROWS FROM (unnest(p_event_ids), unnest(p_events))
                   AS u (id)
             CROSS JOIN LATERAL unnest(u.mentions) AS m) AS x
     WHERE x.id <> ALL (v_added)
     GROUP BY x.id;

    -- Known so far only as a symlink, now named directly: the one change that locks a row (in
    -- (namespace, name) order, as roll_up_datasets takes them).
    IF v_named THEN
        UPDATE metastore.datasets AS d SET kind = 'dataset'
          FROM (SELECT s.id FROM metastore.datasets AS s
                 WHERE s.kind = 'symlink' AND s.id <> ALL (v_added)
                   AND s.id IN (SELECT (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint
                                  FROM unnest(p_events) AS u CROSS JOIN LATERAL unnest(u.mentions) AS x
                                 WHERE x.symlink_of_namespace IS NULL)
                 ORDER BY s.namespace, s.name
                   FOR NO KEY UPDATE) AS l
         WHERE d.id = l.id;
    END IF;

    -- Folded in by about one event in 64: few rows wait in dataset_activity, and concurrent
    -- writers seldom meet on the rows' locks. Backfill's sets do not (two of its sessions would
    -- wait on each other's rows): a rebuild folds everything when it ends.
    IF p_roll_up AND random() < cardinality(p_event_ids) / 64.0 THEN
        PERFORM metastore.roll_up_datasets(ARRAY(SELECT k.value::bigint FROM jsonb_each_text(v_id_of) AS k));
    END IF;

    -- Links, with their event's event_time: the partition key, shared with metastore.events. A
    -- dataset repeated in an event (same direction) conflicts with itself and is linked once.
    INSERT INTO metastore.event_datasets (event_id, dataset_id, direction, event_time)
    SELECT u.id, (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint, x.direction, u.event_time
      FROM ROWS FROM (unnest(p_event_ids), unnest(p_events))
           AS u (id)
     CROSS JOIN LATERAL unnest(u.mentions) AS x
    ON CONFLICT DO NOTHING;

    INSERT INTO metastore.dataset_symlinks AS t (dataset_id, symlink_id, type, generation)
    SELECT DISTINCT (v_id_of ->> metastore.mention_key(x.symlink_of_namespace, x.symlink_of_name))::bigint,
           (v_id_of ->> metastore.mention_key(x.namespace, x.name))::bigint, x.symlink_type, v_generation
      FROM unnest(p_events) AS u
     CROSS JOIN LATERAL unnest(u.mentions) AS x
     WHERE x.symlink_of_namespace IS NOT NULL
     ORDER BY 1, 2, 3
    ON CONFLICT (dataset_id, symlink_id, type) DO UPDATE SET generation = excluded.generation
     WHERE t.generation <> excluded.generation;
    RETURN v_id_of;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_datasets(bigint[], metastore.valid_event[], boolean) IS
    'Applies a set of stored events (p_events[i] read by metastore.validate_event from the event stored as '
    'p_event_ids[i]) to metastore.datasets (new ones with the set''s kind, times and counts; existing ones '
    'through dataset_activity, folded in now and then when p_roll_up), event_datasets and dataset_symlinks, '
    'in the current generation (metastore.derive_generation). Returns the id of every dataset the set '
    'mentions, as a jsonb object keyed by the JSON text of [namespace, name] (what metastore.derive_lineage '
    'takes). Called by store_events and backfill; not for applications.';

REVOKE ALL ON FUNCTION metastore.derive_datasets(bigint[], metastore.valid_event[], boolean) FROM PUBLIC;
