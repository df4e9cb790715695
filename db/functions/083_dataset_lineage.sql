-- A dataset's lineage graph, upstream and/or downstream, crossing symlinks, bounded in depth and size.
CREATE OR REPLACE FUNCTION metastore.dataset_lineage(
    p_id         bigint,
    p_direction  text DEFAULT 'both',
    p_depth      integer DEFAULT 3,
    p_node_limit integer DEFAULT 200
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_start     bigint[];
    v_nodes     bigint[];
    v_depths    integer[];
    v_sides     text[];
    v_seen      bigint[];
    v_frontier  bigint[];
    v_next      bigint[];
    v_new       bigint[];
    v_cap       integer;
    v_dir       text;
    v_truncated boolean := false;
    v_room      integer;
    v_edges     jsonb;
    v_cut       boolean;
    v_max_edges integer := 4 * p_node_limit;
BEGIN
    IF p_direction IS NULL OR p_direction NOT IN ('upstream', 'downstream', 'both') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('direction must be upstream, downstream or both, not %s', coalesce(p_direction, 'null'));
    END IF;
    IF p_depth IS NULL OR p_depth < 1 OR p_depth > 10 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('depth must be from 1 to 10, not %s', p_depth);
    END IF;
    IF p_node_limit IS NULL OR p_node_limit < 1 OR p_node_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('node limit must be from 1 to 1000, not %s', p_node_limit);
    END IF;
    IF NOT EXISTS (SELECT FROM metastore.datasets AS d WHERE d.id = p_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    -- The dataset and its aliases are depth 0; each hop then adds the aliases of what it reached.
    v_start := metastore.dataset_aliases(ARRAY[p_id], p_node_limit);
    v_nodes := v_start;
    v_depths := array_fill(0, ARRAY[cardinality(v_start)]);
    v_sides := array_fill('self'::text, ARRAY[cardinality(v_start)]);

    -- Each direction on its own from the start (up then down would reach siblings). A node seen
    -- once is never expanded again in that direction: cycles end there. A node the other direction
    -- listed already (A -> B -> A) is expanded all the same, but listed once.
    FOREACH v_dir IN ARRAY CASE WHEN p_direction = 'both' THEN ARRAY['upstream', 'downstream']
                                ELSE ARRAY[p_direction] END LOOP
        v_seen := v_start;
        v_frontier := v_start;
        FOR v_depth IN 1..p_depth LOOP
            EXIT WHEN cardinality(v_frontier) = 0 OR v_truncated;
            v_room := p_node_limit - cardinality(v_nodes);
            -- Room for every node listed already and one more than fits: past that, the graph is cut.
            v_cap := v_room + 1 + cardinality(v_nodes);
            IF v_dir = 'upstream' THEN
                v_next := ARRAY(SELECT DISTINCT e.upstream_id FROM metastore.lineage_edges AS e
                                 WHERE e.downstream_id = ANY (v_frontier) AND e.upstream_id <> ALL (v_seen)
                                 ORDER BY 1 LIMIT v_cap);
            ELSE
                v_next := ARRAY(SELECT DISTINCT e.downstream_id FROM metastore.lineage_edges AS e
                                 WHERE e.upstream_id = ANY (v_frontier) AND e.downstream_id <> ALL (v_seen)
                                 ORDER BY 1 LIMIT v_cap);
            END IF;
            EXIT WHEN cardinality(v_next) = 0;
            v_next := ARRAY(SELECT x FROM unnest(metastore.dataset_aliases(v_next, v_cap)) WITH ORDINALITY AS a (x, o)
                             WHERE x <> ALL (v_seen) ORDER BY o);
            v_seen := v_seen || v_next;
            v_frontier := v_next;
            v_new := ARRAY(SELECT x FROM unnest(v_next) WITH ORDINALITY AS a (x, o)
                            WHERE x <> ALL (v_nodes) ORDER BY o);
            IF cardinality(v_new) > v_room THEN
                v_new := v_new[1:v_room];
                v_truncated := true;
            END IF;
            v_nodes := v_nodes || v_new;
            v_depths := v_depths || array_fill(v_depth, ARRAY[cardinality(v_new)]);
            v_sides := v_sides || array_fill(v_dir, ARRAY[cardinality(v_new)]);
        END LOOP;
    END LOOP;

    -- Edges between the nodes found: lineage per (upstream, downstream) with its number of jobs,
    -- and the symlinks crossed.
    SELECT coalesce(jsonb_agg(g.edge ORDER BY g.k1, g.k2, g.k3), '[]'), count(*) > v_max_edges
      INTO v_edges, v_cut
      FROM (SELECT * FROM (
                SELECT jsonb_build_object('kind', 'lineage', 'from', e.upstream_id, 'to', e.downstream_id,
                                          'jobs', count(*), 'first_seen', min(e.first_seen),
                                          'last_seen', max(e.last_seen)) AS edge,
                       0 AS k1, e.upstream_id AS k2, e.downstream_id AS k3
                  FROM metastore.lineage_edges AS e
                 WHERE e.upstream_id = ANY (v_nodes) AND e.downstream_id = ANY (v_nodes)
                 GROUP BY e.upstream_id, e.downstream_id
                UNION ALL
                SELECT jsonb_build_object('kind', 'symlink', 'from', s.dataset_id, 'to', s.symlink_id, 'type', s.type),
                       1, s.dataset_id, s.symlink_id
                  FROM metastore.dataset_symlinks AS s
                 WHERE s.dataset_id = ANY (v_nodes) AND s.symlink_id = ANY (v_nodes)) AS u
             ORDER BY u.k1, u.k2, u.k3
             LIMIT v_max_edges + 1) AS g;
    IF v_cut THEN
        v_edges := v_edges - v_max_edges;
    END IF;

    RETURN jsonb_build_object(
        'id', p_id,
        'direction', p_direction,
        'depth', p_depth,
        'nodes', (SELECT jsonb_agg(jsonb_build_object('id', d.id, 'namespace', d.namespace, 'name', d.name,
                                                      'kind', d.kind, 'depth', n.depth, 'side', n.side)
                                   ORDER BY n.o)
                    FROM unnest(v_nodes, v_depths, v_sides) WITH ORDINALITY AS n (id, depth, side, o)
                    JOIN metastore.datasets_view AS d ON d.id = n.id),
        'edges', v_edges,
        'truncated', v_truncated OR v_cut);
END
$fn$;

COMMENT ON FUNCTION metastore.dataset_lineage(bigint, text, integer, integer) IS
    'The lineage graph around a dataset: {id, direction, depth, nodes, edges, truncated}. nodes: the dataset '
    'and its symlink aliases (side self, depth 0), then what p_depth hops upstream and/or downstream reach '
    '(each with its aliases), at most p_node_limit. edges: lineage (from upstream to downstream, with the '
    'number of jobs) and symlink (from the dataset carrying the identifier to it) between listed nodes, at '
    'most 4 x p_node_limit. truncated: a limit cut the graph. '
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
