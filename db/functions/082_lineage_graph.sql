-- A dataset's lineage graph, upstream and/or downstream, crossing symlinks, bounded in depth and size;
-- with p_include 'jobs', the jobs between the datasets are nodes too (dataset -> job -> dataset).
CREATE OR REPLACE FUNCTION metastore.lineage_graph(
    p_id         bigint,
    p_direction  text,
    p_depth      integer,
    p_node_limit integer,
    p_include    text
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
-- Planned once per session (plans do not depend on the values: key lookups and ranges); a
-- custom plan of each statement cost more to make than to run.
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    v_hide      record;
    v_hiding    boolean;
    v_jobs_mode boolean;
    v_start     bigint[];
    v_nodes     bigint[];
    v_depths    integer[];
    v_sides     text[];
    -- Job nodes (jobs mode): lineage_edges' job keys, the jobs' ids, their hop and side.
    v_jobs      bytea[] := '{}';
    v_job_ids   bigint[] := '{}';
    v_jdepths   integer[] := '{}';
    v_jsides    text[] := '{}';
    v_hop_jobs  bytea[];
    v_hop_ids   bigint[];
    v_seen      bigint[];
    v_jseen     bytea[];
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
    IF p_include IS NOT NULL AND p_include <> 'jobs' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('include must be jobs, not %s', p_include);
    END IF;
    v_jobs_mode := p_include IS NOT NULL;
    v_hide := metastore.hidden_names();
    v_hiding := cardinality(v_hide.dataset_ids) > 0 OR cardinality(v_hide.namespaces) > 0;
    IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                    WHERE d.id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    -- The dataset and its aliases are depth 0; each hop then adds the aliases of what it reached.
    -- What is hidden is not there: not listed, not walked through.
    v_start := metastore.dataset_aliases(ARRAY[p_id], p_node_limit);
    IF v_hiding THEN
        v_start := ARRAY(SELECT a.x FROM unnest(v_start) WITH ORDINALITY AS a (x, o)
                           JOIN metastore.datasets AS d ON d.id = a.x
                          WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                          ORDER BY a.o);
    END IF;
    v_nodes := v_start;
    v_depths := array_fill(0, ARRAY[cardinality(v_start)]);
    v_sides := array_fill('self'::text, ARRAY[cardinality(v_start)]);

    -- Each direction on its own from the start (up then down would reach siblings). A node seen
    -- once is never expanded again in that direction: cycles end there. A node the other direction
    -- listed already (A -> B -> A) is expanded all the same, but listed once.
    FOREACH v_dir IN ARRAY CASE WHEN p_direction = 'both' THEN ARRAY['upstream', 'downstream']
                                ELSE ARRAY[p_direction] END LOOP
        v_seen := v_start;
        v_jseen := '{}';
        v_frontier := v_start;
        FOR v_depth IN 1..p_depth LOOP
            EXIT WHEN cardinality(v_frontier) = 0 OR v_truncated;
            v_room := p_node_limit - cardinality(v_nodes) - cardinality(v_jobs);
            v_hop_jobs := NULL;
            IF v_jobs_mode THEN
                -- The jobs of this hop first (the most recently seen first), then only the datasets
                -- they reach: every dataset listed hangs on a job listed.
                -- A job not seen yet in this direction, with its id (jobs.name_key is the key of its
                -- namespace and name; lineage_edges keys it by their JSON text).
                SELECT coalesce(array_agg(h.job_sha256 ORDER BY h.o), '{}'), coalesce(array_agg(j.id ORDER BY h.o), '{}')
                  INTO v_hop_jobs, v_hop_ids
                  FROM (SELECT e.job_sha256, min(e.job_namespace) AS job_namespace, min(e.job_name) AS job_name,
                               row_number() OVER (ORDER BY max(e.last_seen) DESC, e.job_sha256) AS o
                          FROM metastore.lineage_edges AS e
                         WHERE CASE WHEN v_dir = 'upstream' THEN e.downstream_id ELSE e.upstream_id END = ANY (v_frontier)
                           AND e.job_sha256 <> ALL (v_jseen)
                           AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                         GROUP BY e.job_sha256
                         ORDER BY max(e.last_seen) DESC, e.job_sha256
                         LIMIT v_room + 1) AS h
                  JOIN metastore.jobs AS j ON j.name_key = sha256(metastore.dataset_key(h.job_namespace, h.job_name));
                v_jseen := v_jseen || v_hop_jobs;
                IF cardinality(v_hop_jobs) > v_room THEN
                    v_hop_jobs := v_hop_jobs[1:v_room];
                    v_hop_ids := v_hop_ids[1:v_room];
                    v_truncated := true;
                END IF;
                -- Listed once (the other direction may have listed one: A -> J -> B -> J' -> A).
                SELECT v_jobs || coalesce(array_agg(h.key ORDER BY h.o), '{}'),
                       v_job_ids || coalesce(array_agg(h.id ORDER BY h.o), '{}'),
                       v_jdepths || coalesce(array_agg(v_depth ORDER BY h.o), '{}'),
                       v_jsides || coalesce(array_agg(v_dir ORDER BY h.o), '{}')
                  INTO v_jobs, v_job_ids, v_jdepths, v_jsides
                  FROM unnest(v_hop_jobs, v_hop_ids) WITH ORDINALITY AS h (key, id, o)
                 WHERE h.key <> ALL (v_jobs);
                EXIT WHEN v_truncated;
                v_room := p_node_limit - cardinality(v_nodes) - cardinality(v_jobs);
            END IF;
            -- Room for every node listed already and one more than fits: past that, the graph is cut.
            v_cap := v_room + 1 + cardinality(v_nodes);
            IF v_dir = 'upstream' THEN
                v_next := ARRAY(SELECT DISTINCT e.upstream_id FROM metastore.lineage_edges AS e
                                 WHERE e.downstream_id = ANY (v_frontier) AND e.upstream_id <> ALL (v_seen)
                                   AND (v_hop_jobs IS NULL OR e.job_sha256 = ANY (v_hop_jobs))
                                   AND e.job_sha256 <> ALL (v_hide.job_edge_keys)
                                   AND e.job_namespace <> ALL (v_hide.namespaces)
                                 ORDER BY 1 LIMIT v_cap);
            ELSE
                v_next := ARRAY(SELECT DISTINCT e.downstream_id FROM metastore.lineage_edges AS e
                                 WHERE e.upstream_id = ANY (v_frontier) AND e.downstream_id <> ALL (v_seen)
                                   AND (v_hop_jobs IS NULL OR e.job_sha256 = ANY (v_hop_jobs))
                                   AND e.job_sha256 <> ALL (v_hide.job_edge_keys)
                                   AND e.job_namespace <> ALL (v_hide.namespaces)
                                 ORDER BY 1 LIMIT v_cap);
            END IF;
            -- A hidden dataset leads nowhere, not even to its symlinks' names.
            IF v_hiding THEN
                v_next := ARRAY(SELECT a.x FROM unnest(v_next) WITH ORDINALITY AS a (x, o)
                                  JOIN metastore.datasets AS d ON d.id = a.x
                                 WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                                 ORDER BY a.o);
            END IF;
            EXIT WHEN cardinality(v_next) = 0;
            v_next := ARRAY(SELECT x FROM unnest(metastore.dataset_aliases(v_next, v_cap)) WITH ORDINALITY AS a (x, o)
                             WHERE x <> ALL (v_seen) ORDER BY o);
            IF v_hiding THEN
                v_next := ARRAY(SELECT a.x FROM unnest(v_next) WITH ORDINALITY AS a (x, o)
                                  JOIN metastore.datasets AS d ON d.id = a.x
                                 WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
                                 ORDER BY a.o);
            END IF;
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

    -- Edges between the nodes found, at most 4 x p_node_limit: dataset to dataset (with the number
    -- of jobs), or in jobs mode dataset to job (input) and job to dataset (output); and the
    -- symlinks crossed.
    SELECT coalesce(jsonb_agg(g.edge ORDER BY g.k1, g.k2, g.k3, g.k4), '[]'), count(*) > v_max_edges
      INTO v_edges, v_cut
      FROM (SELECT * FROM (
                SELECT jsonb_build_object('kind', 'lineage', 'from', e.upstream_id, 'to', e.downstream_id,
                                          'jobs', count(*), 'first_seen', min(e.first_seen),
                                          'last_seen', max(e.last_seen)) AS edge,
                       0 AS k1, e.upstream_id AS k2, e.downstream_id AS k3, NULL::bigint AS k4
                  FROM metastore.lineage_edges AS e
                 WHERE NOT v_jobs_mode AND e.upstream_id = ANY (v_nodes) AND e.downstream_id = ANY (v_nodes)
                   AND e.job_sha256 <> ALL (v_hide.job_edge_keys) AND e.job_namespace <> ALL (v_hide.namespaces)
                 GROUP BY e.upstream_id, e.downstream_id
                UNION ALL
                SELECT jsonb_build_object('kind', 'input', 'from', e.upstream_id, 'to', j.id,
                                          'first_seen', min(e.first_seen), 'last_seen', max(e.last_seen)),
                       1, e.upstream_id, j.id, NULL
                  FROM metastore.lineage_edges AS e
                  JOIN unnest(v_jobs, v_job_ids) AS j (key, id) ON j.key = e.job_sha256
                 WHERE v_jobs_mode AND e.upstream_id = ANY (v_nodes)
                 GROUP BY e.upstream_id, j.id
                UNION ALL
                SELECT jsonb_build_object('kind', 'output', 'from', j.id, 'to', e.downstream_id,
                                          'first_seen', min(e.first_seen), 'last_seen', max(e.last_seen)),
                       2, j.id, e.downstream_id, NULL
                  FROM metastore.lineage_edges AS e
                  JOIN unnest(v_jobs, v_job_ids) AS j (key, id) ON j.key = e.job_sha256
                 WHERE v_jobs_mode AND e.downstream_id = ANY (v_nodes)
                 GROUP BY j.id, e.downstream_id
                UNION ALL
                SELECT jsonb_build_object('kind', 'symlink', 'from', s.dataset_id, 'to', s.symlink_id, 'type', s.type),
                       3, s.dataset_id, s.symlink_id, NULL
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
        'nodes', (SELECT coalesce(jsonb_agg(x.node ORDER BY x.o), '[]') FROM (
                    SELECT n.o, CASE WHEN v_jobs_mode THEN jsonb_build_object('type', 'dataset') ELSE '{}' END
                                || jsonb_build_object('id', d.id, 'namespace', d.namespace, 'name', d.name,
                                                      'kind', d.kind, 'depth', n.depth, 'side', n.side) AS node
                      FROM unnest(v_nodes, v_depths, v_sides) WITH ORDINALITY AS n (id, depth, side, o)
                      JOIN metastore.datasets_view AS d ON d.id = n.id
                    UNION ALL
                    -- Jobs after the datasets, in the order they were reached.
                    SELECT cardinality(v_nodes) + n.o,
                           jsonb_build_object(
                               'type', 'job', 'id', j.id, 'namespace', j.namespace, 'name', j.name,
                               'depth', n.depth, 'side', n.side,
                               'latest_run', (SELECT jsonb_build_object('id', r.id, 'state', r.state,
                                                                        'started_at', r.started_at,
                                                                        'ended_at', r.ended_at)
                                                FROM metastore.runs AS r WHERE r.job_id = j.id
                                               ORDER BY r.first_event_time DESC, r.id DESC LIMIT 1))
                      FROM unnest(v_job_ids, v_jdepths, v_jsides) WITH ORDINALITY AS n (id, depth, side, o)
                      JOIN metastore.jobs AS j ON j.id = n.id
                  ) AS x),
        'edges', v_edges,
        'truncated', v_truncated OR v_cut);
END
$fn$;

COMMENT ON FUNCTION metastore.lineage_graph(bigint, text, integer, integer, text) IS
    'The lineage graph around a dataset: {id, direction, depth, nodes, edges, truncated}. nodes: the dataset '
    'and its symlink aliases (side self, depth 0), then what p_depth hops upstream and/or downstream reach '
    '(each with its aliases), at most p_node_limit. edges: lineage (from upstream to downstream, with the '
    'number of jobs) and symlink (from the dataset carrying the identifier to it) between listed nodes, at '
    'most 4 x p_node_limit. With p_include ''jobs'' the jobs of each hop are nodes too (type job, listed '
    'after the datasets; the node limit counts both; datasets carry type dataset), and the edges are input '
    '(dataset to job), output (job to dataset) and symlink. truncated: a limit cut the graph. Hidden '
    'datasets and jobs (metastore.hide) are not there. Error codes: 22023 direction not '
    'upstream/downstream/both, depth outside 1..10, node limit outside 1..1000, include not jobs; P0002 no '
    'such dataset.';

REVOKE ALL ON FUNCTION metastore.lineage_graph(bigint, text, integer, integer, text) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION metastore.lineage_graph(bigint, text, integer, integer, text) TO %I, %I',
        metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
