-- What every ingest function does once its bodies are read and checked: record the refused ones,
-- store the rest as one set (metastore.store_events), answer each in order. ingest_event,
-- ingest_events and ingest_batch differ only in how they read what they were sent.
CREATE OR REPLACE FUNCTION metastore.ingest_checked(
    p_bodies           bytea[],
    p_payloads         jsonb[],
    p_checked          metastore.checked_event[],
    p_source_kind      text,
    p_source_principal text
) RETURNS TABLE (status text, event_id bigint, error_code text, error_message text, event_type text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_payloads jsonb[];
    v_events   metastore.valid_event[];
    v_ids      bigint[];
    v_dups     boolean[];
    v_refused  boolean;
BEGIN
    -- Arrays aligned by position; p_bodies may be null (a batch's events have no bytes of their
    -- own: a refused one is recorded as its JSON text). Walked once (unnest), never indexed.

    SELECT array_agg(u.payload ORDER BY u.o) FILTER (WHERE u.error_code IS NULL),
           array_agg(u.valid ORDER BY u.o) FILTER (WHERE u.error_code IS NULL),
           coalesce(bool_or(u.error_code IS NOT NULL AND u.payload IS NOT NULL), false)
      INTO v_payloads, v_events, v_refused
      FROM ROWS FROM (unnest(p_payloads), unnest(p_checked)) WITH ORDINALITY
           AS u (payload, valid, error_code, error_message, o);

    -- The client's mistakes: nothing of the event is stored, only a record of why (of well-formed
    -- JSON: a body that is not JSON is refused without a record). Not as text when printing it is
    -- what was refused or was not measured: numbers outside the double range (22003), text that
    -- prints too large (54M01), nesting too deep (54M02, refused before its size was measured).
    IF v_refused THEN
        PERFORM metastore.record_rejection(
                    coalesce(u.body, CASE WHEN u.error_code NOT IN ('22003', '54M01', '54M02')
                                          THEN convert_to(u.payload::text, 'UTF8') END),
                    u.error_code, u.error_message, p_source_kind, p_source_principal)
           FROM ROWS FROM (unnest(p_bodies), unnest(p_payloads), unnest(p_checked)) WITH ORDINALITY
                AS u (body, payload, valid, error_code, error_message, o)
          WHERE u.error_code IS NOT NULL AND u.payload IS NOT NULL
          ORDER BY u.o;
    END IF;

    IF v_payloads IS NOT NULL THEN
        SELECT array_agg(s.event_id ORDER BY s.k), array_agg(s.duplicate ORDER BY s.k)
          INTO v_ids, v_dups
          FROM metastore.store_events(v_payloads, v_events, p_source_kind, p_source_principal)
               WITH ORDINALITY AS s (event_id, duplicate, k);
    END IF;

    -- The k-th accepted event is the k-th stored.
    RETURN QUERY
    SELECT CASE WHEN c.error_code IS NOT NULL THEN 'rejected' WHEN s.dup THEN 'duplicate' ELSE 'stored' END,
           s.id, c.error_code, c.error_message,
           CASE WHEN c.error_code IS NULL THEN (c.valid).event_type
                WHEN jsonb_typeof(c.payload -> 'eventType') = 'string' THEN left(c.payload ->> 'eventType', 64) END
      FROM (SELECT u.payload, u.valid, u.error_code, u.error_message, u.o,
                   count(*) FILTER (WHERE u.error_code IS NULL) OVER (ORDER BY u.o) AS k
              FROM ROWS FROM (unnest(p_payloads), unnest(p_checked)) WITH ORDINALITY
                   AS u (payload, valid, error_code, error_message, o)) AS c
      LEFT JOIN unnest(v_ids, v_dups) WITH ORDINALITY AS s (id, dup, k)
        ON c.error_code IS NULL AND s.k = c.k
     ORDER BY c.o;
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_checked(bytea[], jsonb[], metastore.checked_event[], text, text) IS
    'The shared second half of metastore.ingest_event, ingest_events and ingest_batch: given the bodies (or '
    'null), their payloads and metastore.check_event''s answers, aligned by position, records the refused '
    'ones (metastore.record_rejection), stores the others as one set (metastore.store_events) and returns '
    'one row per event, in order, as metastore.ingest_event describes. Not for applications.';

REVOKE ALL ON FUNCTION metastore.ingest_checked(bytea[], jsonb[], metastore.checked_event[], text, text) FROM PUBLIC;
