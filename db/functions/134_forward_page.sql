-- Live forwarding: the next events to send, in the feed's order, as few as make p_max_bytes of
-- rendered text (but always the first, whatever its size), at most p_limit. The feed's order and
-- horizon are those of metastore.read_events (the proof is there): only events of transactions
-- below the statement's snapshot xmin, ordered by (transaction id, event id), after the cursor.
--
-- Each event is rendered as it is returned, and the loop stops once the page holds p_max_bytes:
-- an event that prints to many megabytes (a stored 1e308 prints 309 digits) fills a page of its
-- own instead of making every page of 100 time out.
CREATE OR REPLACE FUNCTION metastore.forward_page(
    p_cursor    text,
    p_limit     integer DEFAULT 100,
    p_max_bytes integer DEFAULT 4194304
) RETURNS TABLE (cursor text, event_id bigint, payload text)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_pos   record;
    v_row   record;
    v_bytes bigint := 0;
    c_fetch constant integer := 10;
    v_after bigint;
    v_seqs  bigint[];
    v_ids   bigint[];
    v_at    timestamptz[];
    v_from  integer;
    v_count integer := 0;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 OR p_max_bytes IS NULL OR p_max_bytes < 1 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('limit must be from 1 to 1000 and max_bytes 1 or more, not %s and %s',
                             p_limit, p_max_bytes);
    END IF;
    -- On Citus: the order of metastore.feed_order, as metastore.read_events reads it there (the
    -- proof is in docs/events.md, "On Citus"); refused where that order is not deployed.
    IF metastore.feed_sequenced() THEN
        v_after := metastore.feed_seq(p_cursor);
        <<walk>>
        LOOP
            SELECT array_agg(o.seq ORDER BY o.seq), array_agg(o.event_id ORDER BY o.seq),
                   array_agg(o.event_time ORDER BY o.seq)
              INTO v_seqs, v_ids, v_at
              FROM (SELECT q.seq, q.event_id, q.event_time FROM metastore.feed_order AS q
                     WHERE q.seq > v_after ORDER BY q.seq LIMIT p_limit) AS o;
            EXIT walk WHEN v_seqs IS NULL;
            v_from := 1;
            -- c_fetch events at a time, each step one statement over the workers.
            WHILE v_from <= cardinality(v_ids) LOOP
                FOR v_row IN
                    SELECT e.id, e.payload, array_position(v_ids, e.id) AS i
                      FROM metastore.events AS e
                     WHERE e.id = ANY (v_ids[v_from:v_from + c_fetch - 1])
                       AND e.event_time = ANY (v_at[v_from:v_from + c_fetch - 1])
                     ORDER BY 3
                LOOP
                    cursor := translate(encode(convert_to('s:' || v_seqs[v_row.i]::text, 'UTF8'), 'base64'),
                                        E'+/\n', '-_');
                    event_id := v_row.id;
                    payload := v_row.payload::text;
                    RETURN NEXT;
                    v_count := v_count + 1;
                    v_bytes := v_bytes + octet_length(payload);
                    EXIT walk WHEN v_bytes >= p_max_bytes OR v_count >= p_limit;
                END LOOP;
                v_from := v_from + c_fetch;
            END LOOP;
            -- Every seq of the batch had its event removed by retention: the next ones.
            EXIT walk WHEN v_count > 0 OR cardinality(v_seqs) < p_limit;
            v_after := v_seqs[cardinality(v_seqs)];
        END LOOP;
        RETURN;
    END IF;
    SELECT * INTO v_pos FROM metastore.forward_position(p_cursor);
    FOR v_row IN
        SELECT e.xact_id, e.id, e.payload
          FROM metastore.events AS e
         WHERE (e.xact_id, e.id) > (v_pos.xact_id, v_pos.event_id)
           AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
         ORDER BY e.xact_id, e.id
         LIMIT p_limit
    LOOP
        cursor := translate(encode(convert_to(v_row.xact_id::text || ':' || v_row.id::text, 'UTF8'), 'base64'),
                            E'+/\n', '-_');
        event_id := v_row.id;
        payload := v_row.payload::text;
        RETURN NEXT;
        v_bytes := v_bytes + octet_length(payload);
        EXIT WHEN v_bytes >= p_max_bytes;
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_page(text, integer, integer) IS
    'The next stored events after feed cursor p_cursor, in the order of metastore.read_events: each its cursor, '
    'id and payload as stored (JSON text); at most p_limit (1..1000), and no more once they add up to p_max_bytes '
    'of text (the first is returned whatever its size). Error codes: 22023 bad limits or a cursor not returned by '
    'the feed. On Citus the order is that of metastore.feed_order (seq), which metastore.sequence_feed assigns '
    '(0A000 where it is not deployed).';

REVOKE ALL ON FUNCTION metastore.forward_page(text, integer, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_page(text, integer, integer) TO %I',
                              metastore.group_role('app'));
END
$grant$;
