-- Live forwarding: where each target is, for /api/v1/forwarding, the metric and the view's footer.
-- Names are keys without credentials (metastore.forward_key), and the forwarder stores errors and
-- refusal bodies with the URL's credentials replaced: anyone may read this. No event is rendered:
-- the lag is read from the oldest pending event's received_at alone.
CREATE OR REPLACE FUNCTION metastore.forward_status() RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_out     jsonb := '[]';
    v_t       record;
    v_pos     record;
    v_next    timestamptz;
    v_oid     bigint;
    v_oat     timestamptz;
    v_refusal jsonb;
BEGIN
    FOR v_t IN SELECT * FROM metastore.forward_targets ORDER BY name LOOP
        -- The oldest event not yet acknowledged, in the feed's order: the lag is how long it has waited.
        IF pg_catalog.to_regclass('metastore.feed_order') IS NOT NULL THEN
            -- Citus: the order of metastore.feed_order (docs/events.md, "On Citus").
            SELECT o.event_id, o.event_time INTO v_oid, v_oat
              FROM metastore.feed_order AS o
             WHERE o.seq > metastore.feed_seq(v_t.cursor)
             ORDER BY o.seq
             LIMIT 1;
            SELECT e.received_at INTO v_next
              FROM metastore.events AS e
             WHERE e.id = v_oid AND e.event_time = v_oat;
        ELSE
            SELECT * INTO v_pos FROM metastore.forward_position(v_t.cursor);
            SELECT e.received_at INTO v_next
              FROM metastore.events AS e
             WHERE (e.xact_id, e.id) > (v_pos.xact_id, v_pos.event_id)
               AND e.xact_id < pg_snapshot_xmin(pg_current_snapshot())
             ORDER BY e.xact_id, e.id
             LIMIT 1;
        END IF;
        SELECT jsonb_build_object('event_id', r.event_id, 'status', r.status, 'body', r.body, 'at', r.refused_at)
          INTO v_refusal
          FROM metastore.forward_refusals AS r
         WHERE r.target = v_t.name
         ORDER BY r.refused_at DESC, r.event_id DESC
         LIMIT 1;
        v_out := v_out || jsonb_build_object(
            'target', v_t.name,
            'sent', v_t.sent,
            'refused', v_t.refused,
            'last_refusal', v_refusal,
            'cursor', v_t.cursor,
            'updated_at', v_t.updated_at,
            'lease_until', v_t.lease_until,
            'failures', v_t.failures,
            'failing_since', v_t.failing_since,
            'last_error', v_t.last_error,
            'last_error_at', v_t.last_error_at,
            'oldest_pending_received_at', v_next,
            'lag_seconds', CASE WHEN v_next IS NULL THEN 0
                                ELSE round(extract(epoch FROM clock_timestamp() - v_next)::numeric, 3) END);
    END LOOP;
    RETURN jsonb_build_object('targets', v_out);
END
$fn$;

COMMENT ON FUNCTION metastore.forward_status() IS
    'Live forwarding, per target (named by metastore.forward_key: no credentials): events sent and refused, '
    'the last refusal (event, status, start of the body), cursor, failures in a row and since when, the last '
    'error, and lag_seconds: how long the oldest event not yet acknowledged has waited since it was received '
    '(0 when the target is up to date).';

REVOKE ALL ON FUNCTION metastore.forward_status() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_status() TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
