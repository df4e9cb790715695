-- Live forwarding: a forwarder takes (or renews) the lease on a target before sending to it, so
-- that one replica at a time sends to each target, in order. A lease that was not renewed in time
-- (its holder died or hangs) passes to the next caller. The target is named by
-- metastore.forward_key: the same target whatever credentials its URL carries.
CREATE OR REPLACE FUNCTION metastore.forward_claim(
    p_target        text,
    p_owner         text,
    p_lease_seconds integer DEFAULT 30
) RETURNS TABLE (claimed boolean, cursor text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_key    text;
    v_cursor text;
BEGIN
    IF p_target IS NULL OR p_target = '' OR p_owner IS NULL OR p_owner = ''
       OR p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 3600 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('target and owner must be named and the lease from 1 to 3600 s, not %s, %s, %s',
                             metastore.forward_key(p_target), p_owner, p_lease_seconds);
    END IF;
    v_key := metastore.forward_key(p_target);
    INSERT INTO metastore.forward_targets AS t (name) VALUES (v_key) ON CONFLICT (name) DO NOTHING;
    UPDATE metastore.forward_targets AS t
       SET lease_owner = p_owner,
           lease_until = clock_timestamp() + make_interval(secs => p_lease_seconds)
     WHERE t.name = v_key
       AND (t.lease_owner IS NULL OR t.lease_owner = p_owner OR t.lease_until < clock_timestamp())
    RETURNING t.cursor INTO v_cursor;
    claimed := FOUND;
    cursor := CASE WHEN claimed THEN v_cursor END;
    RETURN NEXT;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_claim(text, text, integer) IS
    'Takes or renews the lease of p_owner on forwarding target p_target (named by metastore.forward_key, made '
    'on first use) for p_lease_seconds; returns claimed (false while another owner holds an unexpired lease) '
    'and the feed cursor to send after. Error code: 22023 bad arguments.';

REVOKE ALL ON FUNCTION metastore.forward_claim(text, text, integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_claim(text, text, integer) TO %I',
                              metastore.group_role('app'));
END
$grant$;
