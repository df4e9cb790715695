-- Symlinks name the same data twice (a Trino table and its S3 location): lineage reads cross them
-- through this one rule.
CREATE OR REPLACE FUNCTION metastore.dataset_aliases(p_ids bigint[], p_limit integer)
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
-- Planned once per session: a custom plan of its one statement cost 2 to 5 ms each call, the
-- generic one (= ANY of the ids, on both symlink indexes) runs in 0.1.
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    v_all bigint[] := ARRAY(SELECT DISTINCT x FROM unnest(p_ids) AS x WHERE x IS NOT NULL ORDER BY x);
    v_new bigint[] := v_all;
BEGIN
    -- Both ways (carrier -> identifier, identifier -> carriers), to a fixed point: two paths that
    -- carry one table identifier are aliases of each other. Bounded by p_limit ids.
    WHILE cardinality(v_new) > 0 AND cardinality(v_all) < p_limit LOOP
        v_new := ARRAY(
            SELECT DISTINCT n.id
              FROM (SELECT s.symlink_id AS id FROM metastore.dataset_symlinks AS s WHERE s.dataset_id = ANY (v_new)
                    UNION ALL
                    SELECT s.dataset_id FROM metastore.dataset_symlinks AS s WHERE s.symlink_id = ANY (v_new)) AS n
             WHERE n.id <> ALL (v_all)
             ORDER BY n.id
             LIMIT p_limit - cardinality(v_all));
        v_all := v_all || v_new;
    END LOOP;
    RETURN v_all;
END
$fn$;

COMMENT ON FUNCTION metastore.dataset_aliases(bigint[], integer) IS
    'The datasets p_ids name, with every dataset linked to them by metastore.dataset_symlinks, either way '
    'and transitively, at most p_limit ids (the given ones first).';

REVOKE ALL ON FUNCTION metastore.dataset_aliases(bigint[], integer) FROM PUBLIC;
