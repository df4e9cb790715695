-- validate_event's errors as values: the exception block writes nothing, so it costs no
-- subtransaction id (see 035_validate_event.sql).
CREATE OR REPLACE FUNCTION metastore.check_event(p_payload jsonb) RETURNS metastore.checked_event
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_result metastore.checked_event;
    v_detail text;
BEGIN
    v_result.valid := metastore.validate_event(p_payload);
    RETURN v_result;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
    GET STACKED DIAGNOSTICS v_result.error_code = RETURNED_SQLSTATE, v_result.error_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL;
    IF v_detail <> '' THEN
        v_result.error_message := v_result.error_message || ': ' || v_detail;
    END IF;
    RETURN v_result;
END
$fn$;

COMMENT ON FUNCTION metastore.check_event(jsonb) IS
    'metastore.validate_event, with a refusal returned as error_code (SQLSTATE) and error_message '
    'instead of raised; valid is null then.';

REVOKE ALL ON FUNCTION metastore.check_event(jsonb) FROM PUBLIC;
