-- Reads one string member of an event, with the checks every caller needs.
-- Its search_path is pinned like every function's (a plpgsql function is never inlined, and the
-- switch costs little next to the call).
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
    IF p_value IS NULL OR pg_catalog.jsonb_typeof(p_value) = 'null' THEN
        IF p_required THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = pg_catalog.format('"%s" is required and must be a non-empty string', p_path);
        END IF;
        RETURN NULL;
    END IF;
    -- The message names the JSON type, never the value: the text of a value is unbounded (a
    -- number such as 1e131071 prints as 131,072 digits).
    IF pg_catalog.jsonb_typeof(p_value) <> 'string' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023',
            MESSAGE = pg_catalog.format('"%s" must be a non-empty string, not a JSON %s',
                                        p_path, pg_catalog.jsonb_typeof(p_value));
    END IF;
    v_text := p_value #>> '{}';
    IF v_text = '' THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = pg_catalog.format('"%s" must be a non-empty string, not ""', p_path);
    END IF;
    IF pg_catalog.octet_length(v_text) > p_max_bytes THEN
        RAISE EXCEPTION USING
            ERRCODE = '22001',
            MESSAGE = pg_catalog.format('"%s" is %s bytes long; at most %s are accepted',
                                        p_path, pg_catalog.octet_length(v_text), p_max_bytes);
    END IF;
    RETURN v_text;
END
$fn$;

COMMENT ON FUNCTION metastore.json_text(jsonb, text, integer, boolean) IS
    'The string at p_value, or null when absent and not required. '
    'Error codes: 22023 missing or not a non-empty string; 22001 longer than p_max_bytes (null: no limit).';

REVOKE ALL ON FUNCTION metastore.json_text(jsonb, text, integer, boolean) FROM PUBLIC;
