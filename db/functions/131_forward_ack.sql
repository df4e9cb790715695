-- Live forwarding: records what a target acknowledged. Only the holder of an unexpired lease may
-- move the cursor: a forwarder that lost its lease (it stalled) cannot move it back; what it sent
-- is sent again by the next holder (at least once). An attempt that ended without an answer
-- judging the event (p_error) counts as a failure, retried by the forwarder with backoff; one
-- that ended well ends the run of failures.
CREATE OR REPLACE FUNCTION metastore.forward_ack(
    p_target        text,
    p_owner         text,
    p_cursor        text,
    p_sent          integer,
    p_refused       integer DEFAULT 0,
    p_error         text DEFAULT NULL
) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF p_sent IS NULL OR p_sent < 0 OR p_refused IS NULL OR p_refused < 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = format('sent and refused must be 0 or more, not %s and %s', p_sent, p_refused);
    END IF;
    UPDATE metastore.forward_targets AS t
       SET cursor = coalesce(p_cursor, t.cursor),
           sent = t.sent + p_sent,
           refused = t.refused + p_refused,
           last_error = coalesce(left(p_error, 2000), t.last_error),
           last_error_at = CASE WHEN p_error IS NOT NULL THEN clock_timestamp() ELSE t.last_error_at END,
           failures = CASE WHEN p_error IS NOT NULL THEN t.failures + 1 ELSE 0 END,
           failing_since = CASE WHEN p_error IS NOT NULL THEN coalesce(t.failing_since, clock_timestamp()) END,
           updated_at = clock_timestamp()
     WHERE t.name = metastore.forward_key(p_target) AND t.lease_owner = p_owner AND t.lease_until >= clock_timestamp();
    RETURN FOUND;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_ack(text, text, text, integer, integer, text) IS
    'Records that target p_target answered the events up to feed cursor p_cursor (p_sent accepted, p_refused '
    'judged and refused with 400 or 422), and p_error (at most 2000 characters kept) when an attempt ended '
    'without such an answer: failures counts those in a row, 0 again after an attempt without error. Returns '
    'false when p_owner does not hold an unexpired lease (nothing is recorded). Error code: 22023 negative counts.';

REVOKE ALL ON FUNCTION metastore.forward_ack(text, text, text, integer, integer, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.forward_ack(text, text, text, integer, integer, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
