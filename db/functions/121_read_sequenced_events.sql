-- The event feed on Citus (metastore.read_events there): the same pages, filters and bounds, read
-- in the order of metastore.feed_order's seq, which metastore.sequence_feed assigns once an event
-- is visible (the proof is in docs/events.md, "On Citus"). The cursor is "s:" and the seq of the
-- last event returned (metastore.feed_seq).
--
-- The events lie on the workers and the order on the coordinator, so a page is read in steps:
-- the next c_batch seqs (their event times already filtered here), then which of their events
-- match the other filters (ids only, one statement over the workers), then the matching events
-- themselves, c_fetch at a time in seq order, until the page holds p_limit events or 1 MiB of
-- text (at least one event, whatever its size), as on one server. A seq whose event retention
-- removed has no event left and is passed over.
CREATE OR REPLACE FUNCTION metastore.read_sequenced_events(
    p_limit             integer,
    p_cursor            text,
    p_event_time_from   timestamptz,
    p_event_time_to     timestamptz,
    p_received_from     timestamptz,
    p_received_to       timestamptz,
    p_job_namespace     text,
    p_job_name          text,
    p_dataset_namespace text,
    p_dataset_name      text,
    p_event_type        text
) RETURNS TABLE (event text, cursor text, more boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
SET "DateStyle" = 'ISO, YMD'
-- Each step planned with its arrays as constants, so that the workers' shards are pruned.
SET plan_cache_mode = force_custom_plan
SET work_mem = '64MB'
AS $fn$
DECLARE
    c_batch      constant integer := 1000;
    -- Events fetched with their payload at once: as many as a PL/pgSQL loop over a query holds
    -- on one server (it fetches 10 rows at a time).
    c_fetch      constant integer := 10;
    c_page_bytes constant integer := 1048576;
    v_after      bigint;
    v_datasets   bigint[];
    v_seqs       bigint[];
    v_ids        bigint[];
    v_at         timestamptz[];
    v_found      bigint[];
    v_m_seqs     bigint[];
    v_m_ids      bigint[];
    v_m_at       timestamptz[];
    v_from       integer;
    v_row        record;
    v_text       text;
    v_cursor     text;
    v_rows       text[] := '{}';
    v_cursors    text[] := '{}';
    v_bytes      bigint := 0;
    v_more       boolean := false;
BEGIN
    v_after := metastore.feed_seq(p_cursor);
    IF p_dataset_namespace IS NOT NULL OR p_dataset_name IS NOT NULL THEN
        v_datasets := ARRAY(SELECT d.id FROM metastore.datasets AS d
                             WHERE CASE WHEN p_dataset_namespace IS NOT NULL AND p_dataset_name IS NOT NULL
                                        THEN d.name_key = sha256(metastore.dataset_key(p_dataset_namespace, p_dataset_name))
                                        ELSE (p_dataset_namespace IS NULL OR d.namespace = p_dataset_namespace)
                                             AND (p_dataset_name IS NULL OR d.name = p_dataset_name) END);
        IF cardinality(v_datasets) = 0 THEN
            RETURN;  -- no such dataset
        END IF;
    END IF;
    <<walk>>
    LOOP
        SELECT array_agg(o.seq ORDER BY o.seq), array_agg(o.event_id ORDER BY o.seq), array_agg(o.event_time ORDER BY o.seq)
          INTO v_seqs, v_ids, v_at
          FROM (SELECT q.seq, q.event_id, q.event_time
                  FROM metastore.feed_order AS q
                 WHERE q.seq > v_after
                   AND (p_event_time_from IS NULL OR q.event_time >= p_event_time_from)
                   AND (p_event_time_to IS NULL OR q.event_time < p_event_time_to)
                 ORDER BY q.seq
                 LIMIT c_batch) AS o;
        EXIT walk WHEN v_seqs IS NULL;
        -- Ids are unique: the times only prune the shards asked.
        SELECT array_agg(e.id) INTO v_found
          FROM metastore.events AS e
         WHERE e.id = ANY (v_ids) AND e.event_time = ANY (v_at)
           AND (p_received_from IS NULL OR e.received_at >= p_received_from)
           AND (p_received_to IS NULL OR e.received_at < p_received_to)
           AND (p_job_namespace IS NULL OR (pg_catalog.left(e.job_namespace, 200) = pg_catalog.left(p_job_namespace, 200)
                                            AND e.job_namespace = p_job_namespace))
           AND (p_job_name IS NULL OR (pg_catalog.left(e.job_name, 400) = pg_catalog.left(p_job_name, 400)
                                       AND e.job_name = p_job_name))
           AND (p_event_type IS NULL OR e.event_type = upper(p_event_type))
           AND (v_datasets IS NULL
                OR EXISTS (SELECT FROM metastore.event_datasets AS l
                            WHERE l.event_id = e.id AND l.event_time = e.event_time AND l.dataset_id = ANY (v_datasets)));
        SELECT array_agg(u.seq ORDER BY u.n), array_agg(u.id ORDER BY u.n), array_agg(u.at ORDER BY u.n)
          INTO v_m_seqs, v_m_ids, v_m_at
          FROM unnest(v_seqs, v_ids, v_at) WITH ORDINALITY AS u (seq, id, at, n)
         WHERE u.id = ANY (v_found);
        v_from := 1;
        WHILE v_from <= coalesce(cardinality(v_m_ids), 0) LOOP
            FOR v_row IN
                SELECT e.id, e.payload, e.received_at, e.source_kind, e.source_principal,
                       array_position(v_m_ids, e.id) AS i
                  FROM metastore.events AS e
                 WHERE e.id = ANY (v_m_ids[v_from:v_from + c_fetch - 1])
                   AND e.event_time = ANY (v_m_at[v_from:v_from + c_fetch - 1])
                 ORDER BY 6
            LOOP
                IF pg_catalog.cardinality(v_rows) = p_limit OR v_bytes >= c_page_bytes THEN
                    v_more := true;
                    EXIT walk;
                END IF;
                v_cursor := translate(encode(convert_to('s:' || v_m_seqs[v_row.i]::text, 'UTF8'), 'base64'),
                                      E'+/\n', '-_');
                v_text := jsonb_build_object('id', v_row.id,
                                             'cursor', v_cursor,
                                             'received_at', v_row.received_at,
                                             'source_kind', v_row.source_kind,
                                             'source_principal', v_row.source_principal,
                                             'event', v_row.payload)::text;
                IF v_bytes > 0 AND v_bytes + octet_length(v_text) > c_page_bytes THEN
                    v_more := true;
                    EXIT walk;
                END IF;
                v_bytes := v_bytes + octet_length(v_text);
                v_rows := array_append(v_rows, v_text);
                v_cursors := array_append(v_cursors, v_cursor);
            END LOOP;
            v_from := v_from + c_fetch;
        END LOOP;
        EXIT walk WHEN cardinality(v_seqs) < c_batch;
        v_after := v_seqs[cardinality(v_seqs)];
    END LOOP;
    RETURN QUERY SELECT r.event, r.cursor, v_more
                   FROM unnest(v_rows, v_cursors) WITH ORDINALITY AS r (event, cursor, n)
                  ORDER BY r.n;
END
$fn$;

COMMENT ON FUNCTION metastore.read_sequenced_events(integer, text, timestamptz, timestamptz, timestamptz, timestamptz,
                                                    text, text, text, text, text) IS
    'metastore.read_events on Citus: the same page, read in the order of metastore.feed_order (seq), with a cursor '
    'of that order (metastore.feed_seq). Called by metastore.read_events, which checks the limit and the times.';

REVOKE ALL ON FUNCTION metastore.read_sequenced_events(integer, text, timestamptz, timestamptz, timestamptz,
                                                       timestamptz, text, text, text, text, text) FROM PUBLIC;
