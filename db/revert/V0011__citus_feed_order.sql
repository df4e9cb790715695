-- Reverts V0011: the feed's order on Citus. The functions that use it look for the tables before
-- each use (to_regclass), so ingest goes on until the older release's deploy replaces them; the
-- sequencing functions go first (the older release's verify lists the functions exactly).
-- Forwarding goes on from one server's order without skipping: a target's cursor (a seq) becomes
-- the place just before the first event, in (transaction id, event id) order, of those it has not
-- been sent (numbered after its cursor, or not numbered yet); events after that place that it was
-- sent already are sent again (at least once), none is left out.
DO $citus$
DECLARE
    v_target text;
    v_seq    text[];
    v_ids    bigint[];
    v_xact   xid8;
    v_id     bigint;
BEGIN
    IF pg_catalog.to_regclass('metastore.feed_order') IS NULL THEN
        RETURN;
    END IF;
    -- One connection per node for the reads of the events below: the functions changed later in
    -- the same transaction cannot follow a parallel read of a distributed table.
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    FOR v_target, v_seq IN
        SELECT t.name, pg_catalog.regexp_match(pg_catalog.convert_from(pg_catalog.decode(
                   pg_catalog.translate(t.cursor, '-_', '+/'), 'base64'), 'UTF8'), '^s:([0-9]{1,19})$')
          FROM metastore.forward_targets AS t
         WHERE t.cursor IS NOT NULL
    LOOP
        v_xact := NULL;
        v_id := NULL;
        IF v_seq IS NOT NULL THEN
            v_ids := ARRAY(SELECT o.event_id FROM metastore.feed_order AS o WHERE o.seq > v_seq[1]::bigint
                           UNION ALL
                           SELECT p.event_id FROM metastore.feed_pending AS p);
            SELECT e.xact_id, e.id INTO v_xact, v_id FROM metastore.events AS e
             WHERE e.id = ANY (v_ids) ORDER BY e.xact_id, e.id LIMIT 1;
            IF v_id IS NULL THEN  -- it was sent every event: after the last
                SELECT e.xact_id, e.id + 1 INTO v_xact, v_id FROM metastore.events AS e
                 ORDER BY e.xact_id DESC, e.id DESC LIMIT 1;
            END IF;
        END IF;
        UPDATE metastore.forward_targets AS t
           SET cursor = CASE WHEN v_id > 0
                             THEN pg_catalog.translate(pg_catalog.encode(pg_catalog.convert_to(
                                      v_xact::text || ':' || (v_id - 1)::text, 'UTF8'), 'base64'),
                                      E'+/\n', '-_') END
         WHERE t.name = v_target;
    END LOOP;
END
$citus$;
DROP FUNCTION IF EXISTS metastore.sequence_feed();
DROP FUNCTION IF EXISTS metastore.feed_seq(text);
DROP FUNCTION IF EXISTS metastore.read_sequenced_events(integer, text, timestamptz, timestamptz, timestamptz,
                                                        timestamptz, text, text, text, text, text);
DROP TABLE IF EXISTS metastore.feed_order;
DROP TABLE IF EXISTS metastore.feed_pending;
