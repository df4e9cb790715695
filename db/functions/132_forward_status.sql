-- Live forwarding: where each target is, for /api/v1/forwarding, the metric and the view's footer.
CREATE OR REPLACE FUNCTION metastore.forward_status() RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_out  jsonb := '[]';
    v_t    record;
    v_next timestamptz;
    v_auth text;
BEGIN
    FOR v_t IN SELECT * FROM metastore.forward_targets ORDER BY name LOOP
        -- The oldest event not yet acknowledged: the lag is how long it has waited.
        SELECT (r.event::jsonb ->> 'received_at')::timestamptz INTO v_next
          FROM metastore.read_events(1, v_t.cursor) AS r;
        -- The name is the target's URL, with any user:password@ in it (the cursor's key): anyone may
        -- read this, so neither the name nor the error (which may quote the URL) shows them.
        v_auth := substring(v_t.name FROM '^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@');
        v_out := v_out || jsonb_build_object(
            'target', CASE WHEN v_auth IS NULL THEN v_t.name ELSE replace(v_t.name, v_auth || '@', '') END,
            'sent', v_t.sent,
            'refused', v_t.refused,
            'cursor', v_t.cursor,
            'updated_at', v_t.updated_at,
            'lease_until', v_t.lease_until,
            'last_error', CASE WHEN v_auth IS NULL OR v_auth = '' THEN v_t.last_error
                               ELSE replace(v_t.last_error, v_auth, '***') END,
            'last_error_at', v_t.last_error_at,
            'oldest_pending_received_at', v_next,
            'lag_seconds', CASE WHEN v_next IS NULL THEN 0
                                ELSE round(extract(epoch FROM clock_timestamp() - v_next)::numeric, 3) END);
    END LOOP;
    RETURN jsonb_build_object('targets', v_out);
END
$fn$;

COMMENT ON FUNCTION metastore.forward_status() IS
    'Live forwarding, per target (its URL without user:password@): events sent and refused, cursor, last '
    'error (credentials of the URL replaced by ***), and lag_seconds: how long the oldest event not yet '
    'acknowledged has waited since it was received (0 when the target is up to date).';

REVOKE ALL ON FUNCTION metastore.forward_status() FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_status() TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
