-- Live forwarding: the owner removes a target that is no longer configured (its cursor, counts and
-- refusals), so that GET /api/v1/forwarding lists only the targets in use. A target still being
-- sent to (an unexpired lease) is not removed: a replica would make it again, from the first event.
CREATE OR REPLACE FUNCTION metastore.forward_remove(p_target text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_key   text := metastore.forward_key(p_target);
    v_until timestamptz;
BEGIN
    SELECT t.lease_until INTO v_until FROM metastore.forward_targets AS t WHERE t.name = v_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_until >= clock_timestamp() THEN
        RAISE EXCEPTION USING
            ERRCODE = '55006',
            MESSAGE = format('forwarding target %s is in use (a replica holds its lease until %s)', v_key, v_until),
            HINT = 'Remove it from METASTORE_FORWARD_URL on every replica first, then wait for the lease to end.';
    END IF;
    DELETE FROM metastore.forward_targets AS t WHERE t.name = v_key;
    RETURN true;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_remove(text) IS
    'Removes forwarding target p_target (any URL naming it: metastore.forward_key) with its cursor and refusals; '
    'returns false when there is no such target. For the owner only. Error code: 55006 the target is in use '
    '(a replica holds an unexpired lease).';

REVOKE ALL ON FUNCTION metastore.forward_remove(text) FROM PUBLIC;
