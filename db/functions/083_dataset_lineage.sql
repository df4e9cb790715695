-- A dataset's lineage graph, upstream and/or downstream, crossing symlinks, bounded in depth and size:
-- metastore.lineage_graph without job nodes.
CREATE OR REPLACE FUNCTION metastore.dataset_lineage(
    p_id         bigint,
    p_direction  text DEFAULT 'both',
    p_depth      integer DEFAULT 3,
    p_node_limit integer DEFAULT 200
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- The graph without job nodes: one implementation (metastore.lineage_graph), this signature kept
    -- for callers of the previous release.
    RETURN metastore.lineage_graph(p_id, p_direction, p_depth, p_node_limit, NULL);
END
$fn$;

COMMENT ON FUNCTION metastore.dataset_lineage(bigint, text, integer, integer) IS
    'The lineage graph around a dataset: {id, direction, depth, nodes, edges, truncated}. nodes: the dataset '
    'and its symlink aliases (side self, depth 0), then what p_depth hops upstream and/or downstream reach '
    '(each with its aliases), at most p_node_limit. edges: lineage (from upstream to downstream, with the '
    'number of jobs) and symlink (from the dataset carrying the identifier to it) between listed nodes, at '
    'most 4 x p_node_limit. truncated: a limit cut the graph. Hidden datasets and jobs (metastore.hide) are not '
    'there. metastore.lineage_graph with p_include null. '
    'Error codes: 22023 direction not upstream/downstream/both, depth outside 1..10, node limit outside '
    '1..1000; P0002 no such dataset.';

REVOKE ALL ON FUNCTION metastore.dataset_lineage(bigint, text, integer, integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION metastore.dataset_lineage(bigint, text, integer, integer) TO %I, %I',
        metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
