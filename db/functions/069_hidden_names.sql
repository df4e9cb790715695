-- What the owner hid (metastore.hide), as every read function leaves it out: looked up once per
-- call, a handful of rows, so that the filters are comparisons with small arrays.
CREATE OR REPLACE FUNCTION metastore.hidden_names(
    OUT dataset_ids   bigint[],
    OUT job_ids       bigint[],
    OUT job_edge_keys bytea[],
    OUT namespaces    text[]
)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- Planned once per session (plans do not depend on the values: key lookups and ranges); a
-- custom plan of each statement cost more to make than to run.
SET plan_cache_mode = force_generic_plan
AS $fn$
BEGIN
    dataset_ids := '{}';
    job_ids := '{}';
    job_edge_keys := '{}';
    namespaces := '{}';
    -- db/functions is applied at every version: before the change that made the list, none is hidden.
    IF to_regclass('metastore.hidden') IS NULL THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(h.namespace) FILTER (WHERE h.kind = 'namespace'), '{}'),
           -- A job's key in metastore.lineage_edges (job_sha256).
           coalesce(array_agg(sha256(convert_to(jsonb_build_array(h.namespace, h.name)::text, 'UTF8')))
                        FILTER (WHERE h.kind = 'job'), '{}')
      INTO namespaces, job_edge_keys
      FROM metastore.hidden AS h
     WHERE h.unhidden_at IS NULL;
    -- By name: the rows that hold those names now (a dataset seen again after a rebuild removed it
    -- has a new id and the same name).
    dataset_ids := ARRAY(SELECT d.id FROM metastore.hidden AS h
                           JOIN metastore.datasets AS d ON d.name_key = h.name_key
                          WHERE h.kind = 'dataset' AND h.unhidden_at IS NULL);
    job_ids := ARRAY(SELECT j.id FROM metastore.hidden AS h
                       JOIN metastore.jobs AS j ON j.name_key = h.name_key
                      WHERE h.kind = 'job' AND h.unhidden_at IS NULL);
END
$fn$;

COMMENT ON FUNCTION metastore.hidden_names() IS
    'What metastore.hidden hides now: the ids of the hidden datasets and jobs, the hidden jobs'' keys in '
    'metastore.lineage_edges (job_sha256), and the hidden namespaces (every dataset and job of one). Empty '
    'arrays when nothing is hidden. For the read functions; not for applications.';

REVOKE ALL ON FUNCTION metastore.hidden_names() FROM PUBLIC;
