-- The event feed: stored events as they were sent, in an order a reader can page through while
-- ingest goes on without ever skipping or repeating an event.
--
-- Why it never skips. Each event row carries xact_id, the id of the transaction that stored it
-- (V0004). A page holds only rows whose xact_id is below h = pg_snapshot_xmin of the snapshot
-- the page is read with: every transaction with an id below h had finished (committed or rolled
-- back) when that snapshot was taken, so the page's snapshot sees all the rows they stored, and
-- no row with xact_id < h can be stored later (new transactions get ids >= h). Pages are ordered
-- by (xact_id, id), unique, and the cursor is the (xact_id, id) of the last row returned, which
-- is below h. So the set of rows at or before a cursor is complete when the page is read and can
-- never grow afterwards: the next page, starting strictly after the cursor, cannot miss a row and
-- cannot repeat one. Rows stored by transactions still open wait (they are not lost) until those
-- finish; an open writing transaction anywhere in the cluster holds the horizon back, so the
-- feed lags by the longest such transaction. An id-only cursor has no such guarantee: ids are
-- taken at insert and become visible at commit, in another order.
--
-- A page is also cut at c_page_bytes of text (the rows as returned; at least one row, whatever its
-- size): a prefix of the same order, so the argument above holds page by page. Rows are printed one
-- at a time and the walk stops at the first that does not fit, so a page of large events costs its
-- own rows (and at most one more), never p_limit of them: the events stored are at most 16 MiB of
-- text each (validate_event), those stored before that rule existed may be more, and come one per
-- page.
--
-- Rows create_partitions moves out of the default partition keep their xact_id (the move
-- copies whole rows), so they keep their place; apply_retention removes old rows, which a
-- reader behind them no longer gets. A logical dump restored into another cluster carries xact_ids
-- of the old cluster: move events with `metastore export` and `metastore import` instead.
CREATE OR REPLACE FUNCTION metastore.read_events(
    p_limit             integer DEFAULT 100,
    p_cursor            text DEFAULT NULL,
    p_event_time_from   text DEFAULT NULL,
    p_event_time_to     text DEFAULT NULL,
    p_received_from     text DEFAULT NULL,
    p_received_to       text DEFAULT NULL,
    p_job_namespace     text DEFAULT NULL,
    p_job_name          text DEFAULT NULL,
    p_dataset_namespace text DEFAULT NULL,
    p_dataset_name      text DEFAULT NULL,
    p_event_type        text DEFAULT NULL
) RETURNS TABLE (event text, cursor text, more boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'          -- a time without a zone is UTC, as eventTime is at ingest
SET "DateStyle" = 'ISO, YMD'
-- Each page planned for its own filters: the optional ones below are "x IS NULL OR ...", which a
-- generic plan keeps as filters, so a dataset's few events were found by walking the whole feed.
SET plan_cache_mode = force_custom_plan
-- A page is held twice (its rows, then what the function returns) and normally takes 1 MiB; one
-- event of 16 MiB spilled to disk at the default work_mem, which cost 0.3 s of an 18 MB event's 0.7.
SET work_mem = '64MB'
AS $fn$
DECLARE
    -- A dataset filter: the datasets it names; when fewer than c_few links name them, their
    -- events (ids and times), from which the page is chosen instead of walking the feed. Above
    -- that, the feed is walked, and a page is full after about events / links rows.
    c_few     constant integer := 10000;
    c_page_bytes constant integer := 1048576;
    v_row     record;
    v_text    text;
    v_cursor  text;
    v_rows    text[] := '{}';
    v_cursors text[] := '{}';
    v_bytes   bigint := 0;
    v_more    boolean := false;
    v_ids     bigint[];
    v_ev_ids  bigint[];
    v_ev_at   timestamptz[];
    v_xact    xid8 := '0';
    v_id      bigint := 0;
    v_et_from timestamptz;
    v_et_to   timestamptz;
    v_rc_from timestamptz;
    v_rc_to   timestamptz;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    -- On Citus the order above does not hold: the events lie on the workers, each with its own
    -- transactions and visibility, and a horizon taken here can pass events a worker has not yet
    -- committed. There the feed reads the order one sequencer assigns after commit (docs/events.md,
    -- "On Citus"); refused where that order is missing (its change reverted), rather than skip events.
    IF metastore.feed_sequenced() THEN
        RETURN QUERY SELECT r.event, r.cursor, r.more
                       FROM metastore.read_sequenced_events(p_limit, p_cursor, p_event_time_from::timestamptz,
                                                            p_event_time_to::timestamptz, p_received_from::timestamptz,
                                                            p_received_to::timestamptz, p_job_namespace, p_job_name,
                                                            p_dataset_namespace, p_dataset_name, p_event_type) AS r;
        RETURN;
    END IF;
    -- The place the cursor names (22023 for one this function did not return).
    SELECT p.xact_id, p.event_id INTO v_xact, v_id FROM metastore.forward_position(p_cursor) AS p;
    -- Bad times raise 22007/22008 (400) naming the value.
    v_et_from := p_event_time_from::timestamptz;
    v_et_to := p_event_time_to::timestamptz;
    v_rc_from := p_received_from::timestamptz;
    v_rc_to := p_received_to::timestamptz;
    IF p_dataset_namespace IS NOT NULL OR p_dataset_name IS NOT NULL THEN
        -- By name_key when both are given; a namespace or a name alone has no index of its own.
        v_ids := ARRAY(SELECT d.id FROM metastore.datasets AS d
                        WHERE CASE WHEN p_dataset_namespace IS NOT NULL AND p_dataset_name IS NOT NULL
                                   THEN d.name_key = sha256(metastore.dataset_key(p_dataset_namespace, p_dataset_name))
                                   ELSE (p_dataset_namespace IS NULL OR d.namespace = p_dataset_namespace)
                                        AND (p_dataset_name IS NULL OR d.name = p_dataset_name) END);
        SELECT array_agg(l.event_id), array_agg(l.event_time) INTO v_ev_ids, v_ev_at
          FROM (SELECT l.event_id, l.event_time FROM metastore.event_datasets AS l
                 WHERE l.dataset_id = ANY (v_ids) LIMIT c_few + 1) AS l;
        IF cardinality(v_ev_ids) > c_few THEN
            v_ev_ids := NULL;
        ELSIF v_ev_ids IS NULL THEN
            RETURN;  -- no event mentions it
        END IF;
    END IF;

    FOR v_row IN
        SELECT e.xact_id, e.id, e.payload, e.received_at, e.source_kind, e.source_principal
          FROM metastore.events AS e
         WHERE (e.xact_id, e.id) > (v_xact, v_id)
           -- The horizon of this statement's own snapshot (see above): below it, all is final.
           AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
           AND (v_et_from IS NULL OR e.event_time >= v_et_from)
           AND (v_et_to IS NULL OR e.event_time < v_et_to)
           AND (v_rc_from IS NULL OR e.received_at >= v_rc_from)
           AND (v_rc_to IS NULL OR e.received_at < v_rc_to)
           -- The prefixes events_job_idx holds (change 5: job names of any length), then the whole.
           AND (p_job_namespace IS NULL OR (pg_catalog.left(e.job_namespace, 200) = pg_catalog.left(p_job_namespace, 200)
                                            AND e.job_namespace = p_job_namespace))
           AND (p_job_name IS NULL OR (pg_catalog.left(e.job_name, 400) = pg_catalog.left(p_job_name, 400)
                                       AND e.job_name = p_job_name))
           AND (p_event_type IS NULL OR e.event_type = upper(p_event_type))
           AND (v_ids IS NULL
                OR EXISTS (SELECT FROM metastore.event_datasets AS l
                            WHERE l.event_id = e.id AND l.event_time = e.event_time AND l.dataset_id = ANY (v_ids)))
           -- Key conditions the plan can take: ids on the primary key; times prune the partitions. (A
           -- plan may still walk the feed's index with the ids as its condition when estimates are
           -- off: 50 ms for 200 of a million events, where a full walk took 300. A UNION ALL that
           -- forced the lookups took the feed's ordered walk away from every other call.)
           AND (v_ev_ids IS NULL OR (e.id = ANY (v_ev_ids) AND e.event_time = ANY (v_ev_at)))
         ORDER BY e.xact_id, e.id
         LIMIT p_limit + 1
    LOOP
        -- Full: the row exists, so more follow; it is not printed (a page past its bytes is one large event).
        IF pg_catalog.cardinality(v_rows) = p_limit OR v_bytes >= c_page_bytes THEN
            v_more := true;
            EXIT;
        END IF;
        v_cursor := translate(encode(convert_to(v_row.xact_id::text || ':' || v_row.id::text, 'UTF8'), 'base64'),
                              E'+/\n', '-_');
        -- The payload as stored, rendered by PostgreSQL; the envelope around it is this store's.
        v_text := jsonb_build_object('id', v_row.id,
                                     'cursor', v_cursor,
                                     'received_at', v_row.received_at,
                                     'source_kind', v_row.source_kind,
                                     'source_principal', v_row.source_principal,
                                     'event', v_row.payload)::text;
        IF v_bytes > 0 AND v_bytes + octet_length(v_text) > c_page_bytes THEN
            v_more := true;
            EXIT;
        END IF;
        v_bytes := v_bytes + octet_length(v_text);
        -- array_append on the variable itself appends in place (no copy of what the page holds).
        v_rows := array_append(v_rows, v_text);
        v_cursors := array_append(v_cursors, v_cursor);
    END LOOP;
    RETURN QUERY SELECT r.event, r.cursor, v_more
                   FROM unnest(v_rows, v_cursors) WITH ORDINALITY AS r (event, cursor, n)
                  ORDER BY r.n;
END
$fn$;

COMMENT ON FUNCTION metastore.read_events(integer, text, text, text, text, text, text, text, text, text, text) IS
    'One page of the event feed: at most p_limit (1..1000) stored events after p_cursor, and at most 1 MiB '
    'of text unless its one event is larger, in the order of '
    '(transaction id, event id), each row the event as JSON text ({"id", "cursor", "received_at", '
    '"source_kind", "source_principal", "event": the payload as stored}), its cursor, and whether more '
    'events follow the page. Only events of transactions below the snapshot xmin are returned, so a '
    'reader paging with the cursor while ingest runs sees every committed event exactly once (the proof '
    'is in db/functions/120_read_events.sql and docs/events.md). Filters: eventTime and received_at '
    'ranges [from, to) (a time without a zone is UTC), job namespace and name, dataset namespace and '
    'name (events that mention it), event type. Error codes: 22023 a limit outside 1..1000 or a cursor '
    'not returned by this function; 22007/22008 a time that is not one. On Citus the order is that of '
    'metastore.feed_order, which metastore.sequence_feed assigns (metastore.read_sequenced_events; 0A000 where it '
    'is not deployed).';

REVOKE ALL ON FUNCTION metastore.read_events(integer, text, text, text, text, text, text, text, text, text, text)
    FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.read_events(integer, text, text, text, text, text, text, text, text, text, text) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
