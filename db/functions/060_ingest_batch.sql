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
    v_batch     jsonb;
    v_event     jsonb;
    v_valid     metastore.valid_event;
    v_index     bigint;
    v_duplicate boolean;
    v_stored    integer := 0;
    v_dups      integer := 0;
    v_failed    jsonb := '[]';
    v_code      text;
    v_message   text;
    v_detail    text;
BEGIN
    -- Whole-body errors (not UTF-8, not JSON) propagate with their SQLSTATE.
    v_batch := convert_from(p_body, 'UTF8')::jsonb;
    IF jsonb_typeof(v_batch) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('a batch must be a JSON array of OpenLineage events, not a JSON %s', jsonb_typeof(v_batch));
    END IF;

    FOR v_event, v_index IN SELECT a.e, a.o - 1 FROM jsonb_array_elements(v_batch) WITH ORDINALITY AS a (e, o) LOOP
        v_code := NULL;
        BEGIN
            v_valid := metastore.validate_event(v_event);
        EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
            GET STACKED DIAGNOSTICS v_code = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_detail = PG_EXCEPTION_DETAIL;
        END;
        IF v_code IS NOT NULL THEN
            IF v_detail <> '' THEN
                v_message := v_message || ': ' || v_detail;
            END IF;
            INSERT INTO metastore.rejected_events (payload, sqlstate, reason, source_kind, source_principal)
            VALUES (v_event, v_code, v_message, p_source_kind, p_source_principal);
            v_failed := v_failed || jsonb_build_object(
                'index', v_index, 'code', v_code, 'reason', v_message, 'retriable', false);
            CONTINUE;
        END IF;
        SELECT s.duplicate INTO v_duplicate
          FROM metastore.store_event(v_event, v_valid, p_source_kind, p_source_principal) AS s;
        IF v_duplicate THEN v_dups := v_dups + 1; ELSE v_stored := v_stored + 1; END IF;
    END LOOP;

    status := CASE
        WHEN jsonb_array_length(v_failed) = 0 THEN 'success'
        WHEN v_stored + v_dups = 0 THEN 'failure'
        ELSE 'partial_success'
    END;
    result := jsonb_build_object(
        'status', status,
        'summary', jsonb_build_object(
            'received', jsonb_array_length(v_batch),
            'successful', v_stored + v_dups,
            'stored', v_stored,
            'duplicates', v_dups,
            'failed', jsonb_array_length(v_failed),
            'retriable', 0,
            'non_retriable', jsonb_array_length(v_failed)),
        'failed_events', v_failed);
END
$fn$;

COMMENT ON FUNCTION metastore.ingest_batch(bytea, text, text) IS
    'Ingests a JSON array of OpenLineage events (the OpenLineage batch API). Each event is stored or '
    'rejected on its own; result follows the spec''s batch response (status, summary, failed_events). '
    'status: success, partial_success, or failure (no event accepted). Error codes for the whole body: '
    '22021 not UTF-8; 22P02 not JSON; 22P05 a \u0000 escape; 22023 not an array.';

REVOKE ALL ON FUNCTION metastore.ingest_batch(bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION metastore.ingest_batch(bytea, text, text) TO metastore_app;
