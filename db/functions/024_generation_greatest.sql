-- The merge of a time in an upsert of a derived row (db/CONVENTIONS.md: every derived row carries
-- its generation): a stored row of another, older generation is replaced by the new value, one of
-- the same generation keeps the latest of both. No SET clause, so that the planner inlines it
-- (see metastore.facet_text). GREATEST and LEAST are not functions: they compare
-- with the type's btree operator class, which no search_path changes.
CREATE OR REPLACE FUNCTION metastore.generation_greatest(
    p_stored_generation integer,
    p_generation        integer,
    p_stored            timestamptz,
    p_new               timestamptz
) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN p_stored_generation OPERATOR(pg_catalog.<>) p_generation THEN p_new
                ELSE GREATEST(p_stored, p_new) END
$fn$;

COMMENT ON FUNCTION metastore.generation_greatest(integer, integer, timestamptz, timestamptz) IS
    'p_new when p_stored_generation differs from p_generation (a row of an older generation is replaced), '
    'else the latest of p_stored and p_new (nulls ignored). The merge of a last_seen in the derivations'' upserts.';

REVOKE ALL ON FUNCTION metastore.generation_greatest(integer, integer, timestamptz, timestamptz) FROM PUBLIC;
