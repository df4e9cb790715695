-- No SET clause, so that the planner inlines it (see metastore.facet_text). STABLE, not IMMUTABLE:
-- jsonb_build_array is stable, and an IMMUTABLE function whose body is not stays uninlined.
CREATE OR REPLACE FUNCTION metastore.mention_key(p_namespace text, p_name text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $fn$
    SELECT pg_catalog.jsonb_build_array(p_namespace, p_name)::pg_catalog.text
$fn$;

COMMENT ON FUNCTION metastore.mention_key(text, text) IS
    'The JSON text of [namespace, name]: the key of a dataset in the id map metastore.derive_datasets returns '
    'and derive_lineage and derive_run_datasets read, and of a job in the hash lineage_edges.job_sha256.';

REVOKE ALL ON FUNCTION metastore.mention_key(text, text) FROM PUBLIC;
