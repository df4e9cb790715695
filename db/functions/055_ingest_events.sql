CREATE OR REPLACE FUNCTION metastore.ingest_events(
    p_bodies           bytea[],
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL
) RETURNS TABLE (status text, event_id bigint, error_code text, error_message text, event_type text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    -- Each body is ingested on its own (metastore.ingest_event), in one transaction and one round trip.
    SELECT r.status, r.event_id, r.error_code, r.error_message, r.event_type
      FROM unnest(p_bodies) WITH ORDINALITY AS u (body, position)
     CROSS JOIN LATERAL metastore.ingest_event(u.body, p_source_kind, p_source_principal) AS r
     ORDER BY u.position
$fn$;

COMMENT ON FUNCTION metastore.ingest_events(bytea[], text, text) IS
    'Ingests several separately received events (each UTF-8 JSON bytes) in one transaction: one result row '
    'per body, in order, as metastore.ingest_event gives it. Used by the service''s asynchronous writer.';

REVOKE ALL ON FUNCTION metastore.ingest_events(bytea[], text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION metastore.ingest_events(bytea[], text, text) TO metastore_app;
