-- No SET clause: a SET keeps PostgreSQL from inlining a SQL function, and the derivations call this
-- once per facet value of every event. Instead every function, operator and type is qualified
-- (db/CONVENTIONS.md). NULLIF and a simple CASE are avoided: they look their = up by search_path.
CREATE OR REPLACE FUNCTION metastore.facet_text(p_value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    -- An empty string is as good as none, so that null and '' never tie where values are compared.
    SELECT CASE WHEN pg_catalog.jsonb_typeof(p_value) OPERATOR(pg_catalog.=) 'string'::pg_catalog.text
                 AND p_value OPERATOR(pg_catalog.<>) '""'::pg_catalog.jsonb
                THEN p_value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[] END
$fn$;

COMMENT ON FUNCTION metastore.facet_text(jsonb) IS
    'The text of a facet value that is a non-empty JSON string; null for anything else (absent, JSON null, '
    'another type, ""). The lenient read of the derivations: a facet they cannot use is ignored, never an error.';

REVOKE ALL ON FUNCTION metastore.facet_text(jsonb) FROM PUBLIC;
