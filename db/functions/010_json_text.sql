-- Reads one string member of an event, with the checks every caller needs.
CREATE OR REPLACE FUNCTION metastore.json_text(
    p_value     jsonb,
    p_path      text,
    p_max_bytes integer,
    p_required  boolean DEFAULT true
) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_text text;
BEGIN
    IF p_value IS NULL OR jsonb_typeof(p_value) = 'null' THEN
        IF p_required THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('"%s" is required and must be a non-empty string', p_path);
        END IF;
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_value) <> 'string' OR p_value #>> '{}' = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = format('"%s" must be a non-empty string, not %s', p_path, left(p_value::text, 80));
    END IF;
    v_text := p_value #>> '{}';
    IF octet_length(v_text) > p_max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = '22001',
            MESSAGE = format('"%s" is %s bytes long; at most %s are accepted',
                             p_path, octet_length(v_text), p_max_bytes);
    END IF;
    RETURN v_text;
END
$fn$;

COMMENT ON FUNCTION metastore.json_text(jsonb, text, integer, boolean) IS
    'The string at p_value, or null when absent and not required. '
    'Error codes: 22023 missing or not a non-empty string; 22001 longer than p_max_bytes.';

REVOKE ALL ON FUNCTION metastore.json_text(jsonb, text, integer, boolean) FROM PUBLIC;
