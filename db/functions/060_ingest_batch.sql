CREATE OR REPLACE FUNCTION metastore.ingest_batch(
    p_body             bytea,
    p_source_kind      text DEFAULT 'unauthenticated',
    p_source_principal text DEFAULT NULL,
    OUT status         text,
    OUT result         jsonb
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_kind      text := metastore.check_source(p_source_kind, p_source_principal);
    v_batch     jsonb;
    v_received  integer;
    v_max       integer;
    v_events    jsonb[];
    v_checked   metastore.checked_event[];
    v_stored    integer := 0;
    v_dups      integer := 0;
    v_failed    jsonb;
    v_text      text;
BEGIN
    -- Whole-body errors (not UTF-8, not JSON, a duplicate key) propagate with their SQLSTATE.
    v_text := pg_catalog.convert_from(p_body, 'UTF8');
    v_batch := v_text::jsonb;
    IF pg_catalog.jsonb_typeof(v_batch) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a batch must be a JSON array of OpenLineage events, not a JSON %s',
                                        pg_catalog.jsonb_typeof(v_batch));
    END IF;
    v_received := pg_catalog.jsonb_array_length(v_batch);
    SELECT s.max_batch_events INTO v_max FROM metastore.settings AS s;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000', MESSAGE = 'metastore.settings has no row: the deploy makes it, see V0002';
    END IF;
    IF v_received > v_max THEN
        RAISE EXCEPTION USING
            ERRCODE = '54000',
            MESSAGE = pg_catalog.format('a batch holds at most %s events (metastore.settings.max_batch_events), '
                                        'not %s: send it in smaller batches', v_max, v_received);
    END IF;

    -- Linear in the size of the batch: the checks are collected once and walked once (unnest),
    -- never indexed (an element of an array of composite values is found by walking the array
    -- from its start).

    -- 1. Check every event, writing nothing. In the batch's order: the function scan keeps it. The
    -- batch is walked once, for its events and their checks.
    SELECT coalesce(array_agg(a.e), '{}'), coalesce(array_agg(metastore.check_event(a.e)), '{}')
      INTO v_events, v_checked
      FROM jsonb_array_elements(v_batch) AS a (e);
    -- jsonb would keep the last of duplicate keys: not the events sent (033_json_unique_keys.sql).
    -- After the checks: on PostgreSQL 15 this check prints the jsonb, which the checks must have
    -- ruled safe to print first (22003, 54M01; 54M02 is refused before it is measured); a batch
    -- holding such an event is not checked there.
    IF (pg_catalog.current_setting('server_version_num')::integer >= 160000
        OR NOT EXISTS (SELECT FROM pg_catalog.unnest(v_checked) AS c
                        WHERE c.error_code IN ('22003', '54M01', '54M02')))
       AND NOT metastore.json_has_unique_keys(v_text, v_batch) THEN
        RAISE EXCEPTION USING ERRCODE = '22030', MESSAGE = 'an object of the batch has the same key twice';
    END IF;

    -- 2. Record the refused, store the rest, as every ingest function does.
    SELECT count(*) FILTER (WHERE i.status = 'stored'), count(*) FILTER (WHERE i.status = 'duplicate'),
           coalesce(jsonb_agg(jsonb_build_object('index', i.o - 1, 'code', i.error_code, 'reason', i.error_message,
                                                 'retriable', false) ORDER BY i.o)
                        FILTER (WHERE i.error_code IS NOT NULL), '[]')
      INTO v_stored, v_dups, v_failed
      FROM metastore.ingest_checked(NULL, v_events, v_checked, v_kind, p_source_principal)
           WITH ORDINALITY AS i (status, event_id, error_code, error_message, event_type, o);

    status := CASE
        WHEN v_stored + v_dups = v_received THEN 'success'
        WHEN v_stored + v_dups = 0 THEN 'failure'
        ELSE 'partial_success'
    END;
    result := pg_catalog.jsonb_build_object(
        'status', status,
        'summary', pg_catalog.jsonb_build_object(
            'received', v_received,
            'successful', v_stored + v_dups,
            'stored', v_stored,
            'duplicates', v_dups,
            'failed', v_received - v_stored - v_dups,
            'retriable', 0,
            'non_retriable', v_received - v_stored - v_dups),
        'failed_events', v_failed);
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_batch(bytea, text, text) IS
    'Ingests a JSON array of OpenLineage events (the OpenLineage batch API). Each event is stored or '
    'rejected on its own; result follows the spec''s batch response (status, summary, failed_events). '
    'status: success, partial_success, or failure (no event accepted). Error codes for the whole body: '
    '22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 22023 not an array; 22030 an object of the '
    'array with the same key twice; 54000 more events than metastore.settings.max_batch_events; 22023 an '
    'unknown source kind, or a principal with the unauthenticated kind (p_source_kind null means '
    'unauthenticated); 55000 metastore.settings has no row.';

REVOKE ALL ON FUNCTION metastore.ingest_batch(bytea, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ingest_batch(bytea, text, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
