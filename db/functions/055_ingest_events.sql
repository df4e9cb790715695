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
    v_row      record;
BEGIN
    -- Linear in the number of bodies: every array is built once and walked once (unnest), never
    -- indexed (an element of an array of composite or variable-length values is found by walking
    -- the array from its start).

    -- 1. Read and check every body; nothing is written yet. In the order of p_bodies: the lateral
    -- call makes unnest the outer side of a nested loop, which keeps its order (an ORDER BY would
    -- copy every payload into a sort).
    SELECT pg_catalog.array_agg(r.payload), pg_catalog.array_agg(r.checked)
      INTO v_payloads, v_checked
      FROM pg_catalog.unnest(p_bodies) AS b (body)
     CROSS JOIN LATERAL metastore.read_event(b.body) AS r;

    -- 2. Lock the datasets they share with other writers, in one order; then store, in the order received.
    PERFORM metastore.lock_datasets(ARRAY(SELECT c.valid FROM pg_catalog.unnest(v_checked) AS c
                                           WHERE c.error_code IS NULL));
    FOR v_row IN
        SELECT u.body, u.payload, u.valid, u.error_code, u.error_message
          FROM ROWS FROM (pg_catalog.unnest(p_bodies), pg_catalog.unnest(v_payloads), pg_catalog.unnest(v_checked))
               AS u (body, payload, valid, error_code, error_message)
    LOOP
        error_code := v_row.error_code;
        error_message := v_row.error_message;
        IF error_code IS NOT NULL THEN
            status := 'rejected';
            event_id := NULL;
            event_type := NULL;
            IF v_row.payload IS NOT NULL THEN
                IF pg_catalog.jsonb_typeof(v_row.payload -> 'eventType') = 'string' THEN
                    event_type := pg_catalog.left(v_row.payload ->> 'eventType', 64);
                END IF;
                PERFORM metastore.record_rejection(v_row.body, error_code, error_message, v_kind, p_source_principal);
            END IF;
        ELSE
            SELECT s.event_id, CASE WHEN s.duplicate THEN 'duplicate' ELSE 'stored' END
              INTO event_id, status
              FROM metastore.store_event(v_row.payload, v_row.valid, v_kind, p_source_principal) AS s;
            event_type := (v_row.valid).event_type;
        END IF;
        RETURN NEXT;
    END LOOP;
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
