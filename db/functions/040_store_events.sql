-- Stores validated events, each once, and derives what they say: the one store path of every
-- ingest function (through metastore.ingest_checked). Set-based: a statement per table for the
-- whole set, so a set of many events costs little more than one. Each statement takes its rows'
-- locks in key order, and every writer (this function, metastore.backfill) runs the derivations
-- in the same order, so concurrent sets cannot deadlock on what they share (datasets, edges, jobs,
-- runs).
DROP FUNCTION IF EXISTS metastore.store_event(jsonb, metastore.valid_event, text, text);
CREATE OR REPLACE FUNCTION metastore.store_events(
    p_payloads         jsonb[],
    p_events           metastore.valid_event[],
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL
) RETURNS TABLE (event_id bigint, duplicate boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_ids        bigint[];
    v_dups       boolean[];
    v_hashes     bytea[];
    v_new_ids    bigint[];
    v_new_pay    jsonb[];
    v_new_ev     metastore.valid_event[];
    v_datasets   jsonb;
    v_id         bigint;
BEGIN
    -- 1. The events, in the order given. Equal payloads have equal eventTimes, so they meet in one
    -- partition, where (payload_sha256, event_time) is unique; the first of equal ones in the set
    -- is stored, the others are its duplicates.
    v_hashes := ARRAY(SELECT sha256(convert_to(p.payload::text, 'UTF8'))
                        FROM unnest(p_payloads) WITH ORDINALITY AS p (payload, o) ORDER BY p.o);
    WITH ins AS (
        INSERT INTO metastore.events AS e (
            payload, payload_sha256, event_kind, event_type, event_time, run_id, job_namespace, job_name,
            producer, schema_url, source_kind, source_principal)
        SELECT u.payload, u.h, u.event_kind, u.event_type, u.event_time, u.run_id, u.job_namespace, u.job_name,
               u.producer, u.schema_url, p_source_kind, p_source_principal
          FROM ROWS FROM (unnest(p_payloads), unnest(v_hashes), unnest(p_events))
               AS u (payload, h)
        -- A second equal event of the set conflicts with the first, inserted by this statement.
        ON CONFLICT (payload_sha256, event_time) DO NOTHING
        RETURNING e.id, e.payload_sha256, e.event_time
    )
    SELECT array_agg(i.id ORDER BY k.o), array_agg(i.id IS NULL ORDER BY k.o)
      INTO v_ids, v_dups
      FROM (SELECT u.ordinality AS o, u.h, u.event_time,
                   u.ordinality = min(u.ordinality) OVER (PARTITION BY u.h, u.event_time) AS first
              FROM ROWS FROM (unnest(v_hashes), unnest(p_events)) WITH ORDINALITY
                   AS u (h)) AS k
      LEFT JOIN ins AS i ON k.first AND i.payload_sha256 = k.h AND i.event_time = k.event_time;

    IF array_position(v_ids, NULL) IS NOT NULL THEN
        -- Resent: the stored copy already carries everything derived from it. A statement of its
        -- own per copy: it sees copies that a concurrent writer committed while the insert waited on
        -- them. (One key lookup each, a single shard on Citus, which refuses the lookup as a
        -- correlated subquery beside unnest.)
        FOR v_i IN 1 .. cardinality(v_ids) LOOP
            CONTINUE WHEN v_ids[v_i] IS NOT NULL;
            SELECT e.id INTO v_id FROM metastore.events AS e
             WHERE e.payload_sha256 = v_hashes[v_i] AND e.event_time = (p_events[v_i]).event_time;
            v_ids[v_i] := v_id;
        END LOOP;
        IF array_position(v_ids, NULL) IS NOT NULL THEN
            RAISE EXCEPTION USING
                ERRCODE = '40001',
                MESSAGE = 'an equal event was stored and removed while this one was stored: send it again';
        END IF;
    END IF;

    -- Only the events stored now derive anything (usually all of them: no copy then).
    IF NOT true = ANY (v_dups) THEN
        v_new_ids := v_ids;
        v_new_pay := p_payloads;
        v_new_ev := p_events;
    ELSE
        SELECT array_agg(u.id ORDER BY u.ordinality), array_agg(u.payload ORDER BY u.ordinality),
               array_agg(x.ev ORDER BY u.ordinality)
          INTO v_new_ids, v_new_pay, v_new_ev
          FROM ROWS FROM (unnest(v_ids), unnest(v_dups), unnest(p_payloads), unnest(p_events)) WITH ORDINALITY
               AS u (id, dup, payload)
         CROSS JOIN LATERAL (SELECT ROW(u.event_kind, u.event_type, u.event_time, u.run_id, u.job_namespace,
                                        u.job_name, u.producer, u.schema_url, u.mentions)::metastore.valid_event) AS x (ev)
         WHERE NOT u.dup;
    END IF;

    IF v_new_ids IS NOT NULL THEN
        -- Citus: the new events wait in the event's transaction for the feed's sequencer
        -- (metastore.sequence_feed; docs/events.md, "On Citus"). Only where that table exists.
        IF to_regclass('metastore.feed_pending') IS NOT NULL THEN
            INSERT INTO metastore.feed_pending (event_id, event_time)
            SELECT u.id, u.event_time FROM ROWS FROM (unnest(v_new_ids), unnest(v_new_ev)) AS u (id);
        END IF;

        -- 2. Datasets, their activity, links and symlinks (metastore.derive_datasets).
        v_datasets := metastore.derive_datasets(v_new_ids, v_new_ev, true);

        -- 3. Each derivation only where its change is deployed: a revert drops its tables and its
        -- function (db/DESIGN.md, "Reverting a change, and the operator"), and PL/pgSQL looks a function up only
        -- when a call runs, so ingest goes on until the older release's deploy replaces this function.
        IF to_regclass('metastore.column_lineage') IS NOT NULL THEN
            PERFORM metastore.derive_lineage(v_new_ids, v_new_pay, v_new_ev, v_datasets);
        END IF;
        IF to_regclass('metastore.runs') IS NOT NULL THEN
            PERFORM metastore.derive_job_run(v_new_pay, v_new_ev);
            -- The runs' datasets, once their runs exist (and are locked by this transaction).
            IF to_regclass('metastore.run_datasets') IS NOT NULL THEN
                PERFORM metastore.derive_run_datasets(v_new_ev, v_datasets);
            END IF;
        END IF;
    END IF;

    RETURN QUERY SELECT u.id, u.dup FROM unnest(v_ids, v_dups) AS u (id, dup);
END
$fn$;

COMMENT ON FUNCTION metastore.store_events(jsonb[], metastore.valid_event[], text, text) IS
    'Stores events that metastore.validate_event accepted (p_events[i] read from p_payloads[i]), each once: '
    'an event equal as JSON to a stored one, or to an earlier one of the set, returns that one with '
    'duplicate = true. One row per event, in order. Derives (metastore.derive_datasets) the new events'' datasets, links and symlinks, '
    '(metastore.derive_lineage) schema versions, lineage edges and column lineage, and '
    '(metastore.derive_job_run) jobs and runs, and (metastore.derive_run_datasets) the datasets of each run. Error codes: 40001 an equal event vanished meanwhile (retry).';

REVOKE ALL ON FUNCTION metastore.store_events(jsonb[], metastore.valid_event[], text, text) FROM PUBLIC;
