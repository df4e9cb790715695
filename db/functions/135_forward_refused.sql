-- Live forwarding: an event the target judged and refused (400 or 422: it will never take it) is
-- kept with the answer, for the operator; the forwarder then skips it (forward_ack counts it).
-- Every other answer says nothing about the event and is retried, never recorded here. Bounded:
-- the body is cut to 2000 characters and the newest 1000 refusals per target are kept.
CREATE OR REPLACE FUNCTION metastore.forward_refused(
    p_target   text,
    p_owner    text,
    p_event_id bigint,
    p_cursor   text,
    p_status   integer,
    p_body     text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c_keep constant integer := 1000;
    v_key  text := metastore.forward_key(p_target);
    v_last record;
BEGIN
    IF p_status IS NULL OR p_status NOT IN (400, 422) OR p_event_id IS NULL OR p_cursor IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('only a 400 or 422 judges an event, with its id and cursor: not %s for event %s',
                             p_status, p_event_id);
    END IF;
    PERFORM FROM metastore.forward_targets AS t
      WHERE t.name = v_key AND t.lease_owner = p_owner AND t.lease_until >= clock_timestamp()
        FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO metastore.forward_refusals AS r (target, event_id, cursor, status, body)
    VALUES (v_key, p_event_id, p_cursor, p_status, left(coalesce(p_body, ''), 2000))
    ON CONFLICT (target, event_id) DO UPDATE
       SET cursor = excluded.cursor, status = excluded.status, body = excluded.body, refused_at = excluded.refused_at;
    SELECT r.refused_at, r.event_id INTO v_last
      FROM metastore.forward_refusals AS r
     WHERE r.target = v_key
     ORDER BY r.refused_at DESC, r.event_id DESC
    OFFSET c_keep - 1 LIMIT 1;
    IF FOUND THEN
        DELETE FROM metastore.forward_refusals AS r
         WHERE r.target = v_key AND (r.refused_at, r.event_id) < (v_last.refused_at, v_last.event_id);
    END IF;
    RETURN true;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_refused(text, text, bigint, text, integer, text) IS
    'Records that target p_target refused event p_event_id (feed cursor p_cursor) with p_status 400 or 422 and '
    'p_body (its first 2000 characters), keeping the newest 1000 refusals per target. Returns false when p_owner '
    'does not hold an unexpired lease (nothing is recorded). Error code: 22023 any other status.';

REVOKE ALL ON FUNCTION metastore.forward_refused(text, text, bigint, text, integer, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_refused(text, text, bigint, text, integer, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
