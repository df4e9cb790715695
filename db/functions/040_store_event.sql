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
    v_hash     bytea := sha256(convert_to(p_payload::text, 'UTF8'));
    v_new      bigint[];
    v_existing bigint;
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

    -- New datasets take what this event says; sorted, so that concurrent events wait on new
    -- rows' keys in one order. An existing dataset is not updated (that would lock its row until
    -- commit, and events sharing it would commit one at a time): the event's part goes to
    -- dataset_activity, which datasets_view adds and metastore.roll_up_datasets folds in.
    WITH added AS (
        INSERT INTO metastore.datasets AS d (namespace, name, kind, first_seen, last_seen, input_events, output_events)
        SELECT x.namespace, x.name,
               CASE WHEN bool_or(x.symlink_of_namespace IS NULL) THEN 'dataset' ELSE 'symlink' END,
               p_event.event_time, p_event.event_time,
               bool_or(x.direction = 'input')::integer, bool_or(x.direction = 'output')::integer
          FROM unnest(p_event.mentions) AS x
         GROUP BY x.namespace, x.name
         ORDER BY x.namespace, x.name
        ON CONFLICT (name_key) DO NOTHING
        RETURNING d.id)
    SELECT coalesce(array_agg(added.id), '{}') INTO v_new FROM added;

    -- Only when some of them existed already: an event whose datasets are all new is done here.
    IF cardinality(v_new) < (SELECT count(DISTINCT (x.namespace, x.name)) FROM unnest(p_event.mentions) AS x) THEN
        -- A statement of its own: it sees the rows the insert above found (committed by then).
        WITH seen AS (
            SELECT d.id, bool_or(x.direction = 'input')::integer AS input_events,
                   bool_or(x.direction = 'output')::integer AS output_events
              FROM unnest(p_event.mentions) AS x
              JOIN metastore.datasets AS d ON d.name_key = pg_catalog.sha256(metastore.dataset_key(x.namespace, x.name))
             WHERE d.id <> ALL (v_new)
             GROUP BY d.id)
        INSERT INTO metastore.dataset_activity (dataset_id, first_seen, last_seen, input_events, output_events)
        SELECT s.id, p_event.event_time, p_event.event_time, s.input_events, s.output_events FROM seen AS s;
        GET DIAGNOSTICS v_existing = ROW_COUNT;

        IF v_existing > 0 THEN
            -- Known so far only as a symlink, now named directly: the one change that locks the row.
            UPDATE metastore.datasets AS d SET kind = 'dataset'
             WHERE d.kind = 'symlink' AND d.id <> ALL (v_new)
               AND d.name_key IN (SELECT pg_catalog.sha256(metastore.dataset_key(x.namespace, x.name))
                                    FROM unnest(p_event.mentions) AS x WHERE x.symlink_of_namespace IS NULL);
            -- Folded in by about one event in 64 that mention a dataset: few rows wait in
            -- dataset_activity, and concurrent events seldom meet on the rows' locks.
            IF pg_catalog.random() < 1.0 / 64 THEN
                PERFORM metastore.roll_up_datasets(ARRAY(
                    SELECT d.id FROM unnest(p_event.mentions) AS x
                      JOIN metastore.datasets AS d ON d.name_key = pg_catalog.sha256(metastore.dataset_key(x.namespace, x.name))));
            END IF;
        END IF;
    END IF;

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

    -- Each derivation only where its change is deployed: a revert drops its tables and its function
    -- (db/CONVENTIONS.md, "Reverting a change"), and PL/pgSQL looks a function up only when a call
    -- runs, so ingest goes on until the older release's deploy replaces this function.
    IF pg_catalog.to_regclass('metastore.column_lineage') IS NOT NULL THEN
        PERFORM metastore.derive_lineage(event_id, p_event.event_time, p_payload, p_event.job_namespace,
                                         p_event.job_name, p_event.mentions);
    END IF;
    IF pg_catalog.to_regclass('metastore.runs') IS NOT NULL THEN
        PERFORM metastore.derive_job_run(ARRAY[p_payload], ARRAY[p_event]);
    END IF;
END
$fn$;

COMMENT ON FUNCTION metastore.store_event(jsonb, metastore.valid_event, text, text) IS
    'Stores an event that metastore.validate_event accepted (once: an event equal as JSON to a stored one '
    'returns that one with duplicate = true) and derives its datasets, links and symlinks, '
    '(metastore.derive_lineage) its schema versions, lineage edges and column lineage, and '
    '(metastore.derive_job_run) its job and run.';

REVOKE ALL ON FUNCTION metastore.store_event(jsonb, metastore.valid_event, text, text) FROM PUBLIC;
