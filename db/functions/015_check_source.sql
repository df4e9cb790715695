-- Provenance as the ingest functions accept it: what the service knows about the sender.
CREATE OR REPLACE FUNCTION metastore.check_source(p_source_kind text, p_source_principal text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- No kind said: the sender is unknown.
    IF p_source_kind IS NULL THEN
        p_source_kind := 'unauthenticated';
    END IF;
    IF p_source_kind NOT IN ('unauthenticated', 'inferred', 'authenticated') THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('source kind must be unauthenticated, inferred or authenticated, not %s',
                                        pg_catalog.quote_literal(pg_catalog.left(p_source_kind, 64)));
    END IF;
    IF p_source_principal IS NOT NULL AND p_source_kind = 'unauthenticated' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = 'an unauthenticated source has no principal';
    END IF;
    RETURN p_source_kind;
END
$fn$;

COMMENT ON FUNCTION metastore.check_source(text, text) IS
    'The source kind to record for what the service says of a sender: null means unauthenticated. '
    'Error codes: 22023 an unknown kind, or a principal with the unauthenticated kind.';

REVOKE ALL ON FUNCTION metastore.check_source(text, text) FROM PUBLIC;
