-- Whether JSON text has no object with the same key twice, at any depth.
--
-- jsonb keeps the last of duplicate keys without a word, so an event sent with
-- {"job": A, ..., "job": B} would be stored (and de-duplicated) as another event than the one
-- sent. The check runs on the text, before it becomes jsonb:
-- * PostgreSQL 16+: the SQL/JSON predicate `IS JSON WITH UNIQUE KEYS`, one pass in C. It is
--   run through EXECUTE because PostgreSQL 15 cannot even parse it.
-- * PostgreSQL 15 (the oldest supported): no such predicate, and no way to see duplicates but
--   the json type. Counting members is enough: json_strip_nulls(json) re-emits the text keeping
--   every member, jsonb_strip_nulls(jsonb) without the dropped ones, both with the same escaping;
--   each member is one colon outside strings, and strings are emitted alike on both sides. Two
--   linear passes (a recursive walk over json re-reads every subtree at each level: quadratic in
--   the nesting depth). Not seen on 15: a duplicate whose dropped values are all null, e.g.
--   {"a": null, "a": 1}, since both sides drop null members.
-- Its cost, added to ingest_event, is measured by python -m bench.unique_keys (figures in
-- docs/operations.md, "What the service refuses"). p_parsed spares 15 a second parse of the text
-- into jsonb.
CREATE OR REPLACE FUNCTION metastore.json_has_unique_keys(p_json text, p_parsed jsonb) RETURNS boolean
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_unique boolean;
    v_json   text;
    v_jsonb  text;
BEGIN
    IF pg_catalog.strpos(p_json, '{') = 0 THEN
        RETURN true;  -- no object at all
    END IF;
    IF pg_catalog.current_setting('server_version_num')::integer >= 160000 THEN
        EXECUTE 'SELECT $1 IS JSON WITH UNIQUE KEYS' INTO v_unique USING p_json;
        RETURN v_unique;
    END IF;
    -- Both sides re-emit the text with the same escaping (so a \u003a escape is a colon on both);
    -- every member adds one colon outside strings, and the members jsonb dropped are missing from
    -- its side. json_strip_nulls is the one function of 15 that re-emits json keeping duplicates;
    -- it drops null members, so both sides drop them.
    v_json := pg_catalog.json_strip_nulls(p_json::json)::text;
    v_jsonb := pg_catalog.jsonb_strip_nulls(p_parsed)::text;
    RETURN pg_catalog.octet_length(v_json) - pg_catalog.octet_length(pg_catalog.replace(v_json, ':', ''))
         = pg_catalog.octet_length(v_jsonb) - pg_catalog.octet_length(pg_catalog.replace(v_jsonb, ':', ''));
END
$fn$;

COMMENT ON FUNCTION metastore.json_has_unique_keys(text, jsonb) IS
    'True when the JSON text p_json has no object with a duplicate key at any depth (jsonb keeps the last '
    'one silently); p_parsed is p_json::jsonb, which the caller has already made. Used by the ingest '
    'functions, which refuse a duplicate with SQLSTATE 22030 (duplicate_json_object_key_value).';

REVOKE ALL ON FUNCTION metastore.json_has_unique_keys(text, jsonb) FROM PUBLIC;
