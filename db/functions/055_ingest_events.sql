CREATE OR REPLACE FUNCTION metastore.ingest_events(
    p_bodies           bytea[],
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL
) RETURNS TABLE (status text, event_id bigint, error_code text, error_message text, event_type text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_kind     text := metastore.check_source(p_source_kind, p_source_principal);
    v_payloads jsonb[];
    v_checked  metastore.checked_event[];
BEGIN
    -- Read and check every body, in the order of p_bodies: the lateral call makes unnest the outer
    -- side of a nested loop, which keeps its order (an ORDER BY would copy every payload into a sort).
    SELECT array_agg(r.payload), array_agg(r.checked)
      INTO v_payloads, v_checked
      FROM unnest(p_bodies) AS b (body)
     CROSS JOIN LATERAL metastore.read_event(b.body) AS r;
    RETURN QUERY SELECT * FROM metastore.ingest_checked(p_bodies, v_payloads, v_checked, v_kind, p_source_principal);
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_events(bytea[], text, text) IS
    'Ingests several separately received events (each UTF-8 JSON bytes) in one transaction: one result row '
    'per body, in order, as metastore.ingest_event gives it. Used by the service''s asynchronous writer. '
    'p_source_kind null means unauthenticated; raises 22023 for an unknown kind or a principal with the '
    'unauthenticated kind.';

REVOKE ALL ON FUNCTION metastore.ingest_events(bytea[], text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ingest_events(bytea[], text, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
