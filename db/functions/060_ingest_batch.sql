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
    v_checked   metastore.checked_event[];
    v_index     bigint;
    v_duplicate boolean;
    v_stored    integer := 0;
    v_dups      integer := 0;
    v_failed    jsonb := '[]';
    v_text      text;
BEGIN
    -- Whole-body errors (not UTF-8, not JSON, a duplicate key) propagate with their SQLSTATE.
    v_text := convert_from(p_body, 'UTF8');
    v_batch := v_text::jsonb;
    -- jsonb would keep the last of duplicate keys: not the events sent (037_json_unique_keys.sql).
    IF NOT metastore.json_has_unique_keys(v_text, v_batch) THEN
        RAISE EXCEPTION USING ERRCODE = '22030', MESSAGE = 'an object of the batch has the same key twice';
    END IF;
    IF jsonb_typeof(v_batch) <> 'array' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('a batch must be a JSON array of OpenLineage events, not a JSON %s', jsonb_typeof(v_batch));
    END IF;

    -- Check every event first (writing nothing), lock the datasets they mention in one order,
    -- then store or record each.
    v_checked := ARRAY(SELECT metastore.check_event(a.e) FROM jsonb_array_elements(v_batch) WITH ORDINALITY AS a (e, o)
                        ORDER BY a.o);
    PERFORM metastore.lock_datasets(ARRAY(SELECT (c).valid FROM unnest(v_checked) AS c WHERE (c).error_code IS NULL));
    FOR v_event, v_index IN SELECT a.e, a.o - 1 FROM jsonb_array_elements(v_batch) WITH ORDINALITY AS a (e, o) LOOP
        IF (v_checked[v_index + 1]).error_code IS NOT NULL THEN
            INSERT INTO metastore.rejected_events (payload, sqlstate, reason, source_kind, source_principal)
            VALUES (v_event, (v_checked[v_index + 1]).error_code, (v_checked[v_index + 1]).error_message,
                    p_source_kind, p_source_principal);
            v_failed := v_failed || jsonb_build_object(
                'index', v_index, 'code', (v_checked[v_index + 1]).error_code,
                'reason', (v_checked[v_index + 1]).error_message, 'retriable', false);
            CONTINUE;
        END IF;
        SELECT s.duplicate INTO v_duplicate
          FROM metastore.store_event(v_event, (v_checked[v_index + 1]).valid, p_source_kind, p_source_principal) AS s;
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
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.ingest_batch(bytea, text, text) TO %I', metastore.group_role('app'));
END
$grant$;
