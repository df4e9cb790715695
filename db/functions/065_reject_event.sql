-- For the service: an event it accepted (202) but cannot store, e.g. one that missed the
-- statement deadline alone or failed alone with a server error, is recorded with the reason
-- instead of being retried forever.
CREATE OR REPLACE FUNCTION metastore.reject_event(
    p_body             bytea,
    p_sqlstate         text,
    p_reason           text,
    p_source_kind      text,
    p_source_principal text
) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_kind text := metastore.check_source(p_source_kind, p_source_principal);
BEGIN
    IF p_sqlstate IS NULL OR p_sqlstate !~ '^[0-9A-Z]{5}$' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = 'p_sqlstate must be a SQLSTATE: five digits or capital letters';
    END IF;
    IF p_reason IS NULL OR p_reason = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'p_reason must say why';
    END IF;
    PERFORM metastore.record_rejection(p_body, p_sqlstate, pg_catalog.left(p_reason, 2000), v_kind,
                                       p_source_principal);
END
$fn$;

COMMENT ON FUNCTION metastore.reject_event(bytea, text, text, text, text) IS
    'Records in metastore.rejected_events an event the service accepted but could not store (p_body as '
    'received, or null; p_sqlstate and p_reason say why; the reason is cut at 2000 characters). Error codes: '
    '22023 p_sqlstate not a SQLSTATE, p_reason missing, an unknown source kind, or a principal with the '
    'unauthenticated kind (p_source_kind null means unauthenticated).';

REVOKE ALL ON FUNCTION metastore.reject_event(bytea, text, text, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.reject_event(bytea, text, text, text, text) TO %I',
                              metastore.group_role('app'));
END
$grant$;
