-- The lineage of one field across hops: the input fields it is derived from (upstream) and the output
-- fields derived from it (downstream), from metastore.column_lineage, crossing symlinks, bounded in
-- depth and size as the dataset graph (metastore.lineage_graph).
CREATE OR REPLACE FUNCTION metastore.field_lineage(
    p_id         bigint,
    p_field      text,
    p_direction  text DEFAULT 'both',
    p_depth      integer DEFAULT 3,
    p_node_limit integer DEFAULT 200
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
    -- Nodes, numbered from 1 in the order found (1: the field asked for): the JSON text of
    -- [dataset id, field] as key, then dataset, field, depth, side.
    v_keys      text[];
    v_nd        bigint[];
    v_nf        text[];
    v_ndepth    integer[];
    v_nside     text[];
    -- Edges: from and to (node numbers), kind, transformation type and subtype, first and last seen.
    v_efrom     integer[] := '{}';
    v_eto       integer[] := '{}';
    v_ekind     text[] := '{}';
    v_ett       text[] := '{}';
    v_ets       text[] := '{}';
    v_efirst    timestamptz[] := '{}';
    v_elast     timestamptz[] := '{}';
    -- One hop's column lineage rows: the frontier node it starts from (origin), the field it starts
    -- from (the origin's, or the same field of a symlink alias), the field it reaches, and the row.
    v_origin    bigint[];
    v_sds       bigint[];
    v_sf        text[];
    v_dds       bigint[];
    v_df        text[];
    v_tt        text[];
    v_ts        text[];
    v_first     timestamptz[];
    v_last      timestamptz[];
    v_seen      text[];
    v_fr_ds     bigint[];
    v_fr_f      text[];
    v_dir       text;
    v_room      integer;
    v_truncated boolean := false;
    v_max_edges integer := 4 * p_node_limit;
    v_edges     jsonb;
    v_cut       boolean;
BEGIN
    IF p_field IS NULL OR p_field = '' OR octet_length(p_field) > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'field must be a name of 1 to 1000 bytes';
    END IF;
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
    v_hide := metastore.hidden_names();
    IF NOT EXISTS (SELECT FROM metastore.datasets AS d
                    WHERE d.id = p_id AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = format('no dataset has id %s', p_id);
    END IF;

    v_keys := ARRAY[jsonb_build_array(p_id, p_field)::text];
    v_nd := ARRAY[p_id];
    v_nf := ARRAY[p_field];
    v_ndepth := ARRAY[0];
    v_nside := ARRAY['self'];

    -- Each direction on its own from the field, as the dataset graph; a field seen once in a
    -- direction is not walked from again (cycles end there). Each hop is a few statements over sets.
    FOREACH v_dir IN ARRAY CASE WHEN p_direction = 'both' THEN ARRAY['upstream', 'downstream']
                                ELSE ARRAY[p_direction] END LOOP
        v_seen := v_keys[1:1];
        v_fr_ds := ARRAY[p_id];
        v_fr_f := ARRAY[p_field];
        FOR v_depth IN 1..p_depth LOOP
            EXIT WHEN cardinality(v_fr_ds) = 0 OR v_truncated;
            -- The frontier's fields and the same fields of their datasets' symlink aliases (the same
            -- data under another name), then the column lineage rows of each, in a stable order.
            WITH fr AS (
                SELECT f.ds, f.field FROM unnest(v_fr_ds, v_fr_f) AS f (ds, field)
            ), ex AS (
                SELECT fr.ds AS origin, fr.ds, fr.field FROM fr
                UNION
                SELECT fr.ds, a.x, fr.field
                  FROM fr
                 CROSS JOIN LATERAL unnest(
                        CASE WHEN EXISTS (SELECT FROM metastore.dataset_symlinks AS s
                                           WHERE s.dataset_id = fr.ds OR s.symlink_id = fr.ds)
                             THEN metastore.dataset_aliases(ARRAY[fr.ds], 20) ELSE '{}' END) AS a (x)
                  JOIN metastore.datasets AS d ON d.id = a.x
                 WHERE a.x <> fr.ds AND d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)
            ), hop AS (
                SELECT ex.origin, ex.ds AS src_ds, ex.field AS src_f,
                       c.output_dataset_id AS dst_ds, c.output_field AS dst_f,
                       c.transformation_type, c.transformation_subtype, c.first_seen, c.last_seen
                  FROM ex
                  JOIN metastore.column_lineage AS c
                    ON c.input_dataset_id = ex.ds AND left(c.input_field, 200) = left(ex.field, 200)
                   AND c.input_field = ex.field
                 WHERE v_dir = 'downstream' AND c.output_field <> ''
                UNION ALL
                SELECT ex.origin, ex.ds, ex.field, c.input_dataset_id, c.input_field,
                       c.transformation_type, c.transformation_subtype, c.first_seen, c.last_seen
                  FROM ex
                  JOIN metastore.column_lineage AS c ON c.output_dataset_id = ex.ds AND c.output_field = ex.field
                 WHERE v_dir = 'upstream'
            )
            SELECT array_agg(h.origin ORDER BY h.o), array_agg(h.src_ds ORDER BY h.o), array_agg(h.src_f ORDER BY h.o),
                   array_agg(h.dst_ds ORDER BY h.o), array_agg(h.dst_f ORDER BY h.o),
                   array_agg(h.transformation_type ORDER BY h.o), array_agg(h.transformation_subtype ORDER BY h.o),
                   array_agg(h.first_seen ORDER BY h.o), array_agg(h.last_seen ORDER BY h.o)
              INTO v_origin, v_sds, v_sf, v_dds, v_df, v_tt, v_ts, v_first, v_last
              FROM (SELECT hop.*, row_number() OVER (ORDER BY hop.origin, hop.src_ds, hop.src_f COLLATE "C",
                                                              hop.dst_ds, hop.dst_f COLLATE "C",
                                                              hop.transformation_type COLLATE "C",
                                                              hop.transformation_subtype COLLATE "C") AS o
                      FROM hop
                      JOIN metastore.datasets AS d ON d.id = hop.dst_ds
                     WHERE d.id <> ALL (v_hide.dataset_ids) AND d.namespace <> ALL (v_hide.namespaces)) AS h
             WHERE h.o <= v_max_edges + 1;
            EXIT WHEN v_origin IS NULL;
            IF cardinality(v_origin) > v_max_edges THEN
                v_truncated := true;
            END IF;

            -- New nodes: the aliases' fields the rows start from (beside their frontier node, at its
            -- depth), then the fields reached, in the rows' order, as many as there is room for.
            v_room := p_node_limit - cardinality(v_keys);
            WITH r AS (
                SELECT * FROM unnest(v_origin, v_sds, v_sf, v_dds, v_df) WITH ORDINALITY AS r (origin, sds, sf, dds, df, o)
            ), k AS (
                SELECT k.key FROM unnest(v_keys) AS k (key)
            ), cand AS (
                SELECT jsonb_build_array(r.sds, r.sf)::text AS key, r.sds AS ds, r.sf AS field,
                       jsonb_build_array(r.origin, r.sf)::text AS origin_key, NULL::integer AS depth, 2 * r.o AS o
                  FROM r WHERE r.sds <> r.origin
                UNION ALL
                SELECT jsonb_build_array(r.dds, r.df)::text, r.dds, r.df, NULL, v_depth, 2 * r.o + 1 FROM r
            ), fresh AS (
                SELECT DISTINCT ON (c.key) c.* FROM cand AS c
                 WHERE NOT EXISTS (SELECT FROM k WHERE k.key = c.key)
                 ORDER BY c.key, c.o
            ), kept AS (
                SELECT f.*, row_number() OVER (ORDER BY f.o) AS n FROM fresh AS f
            )
            SELECT v_keys || coalesce(array_agg(kp.key ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_nd || coalesce(array_agg(kp.ds ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_nf || coalesce(array_agg(kp.field ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_ndepth || coalesce(array_agg(coalesce(kp.depth, v_ndepth[array_position(v_keys, kp.origin_key)])
                                                  ORDER BY kp.n) FILTER (WHERE kp.n <= v_room), '{}'),
                   v_nside || coalesce(array_agg(CASE WHEN kp.depth IS NULL
                                                           AND v_nside[array_position(v_keys, kp.origin_key)] = 'self'
                                                      THEN 'self' ELSE v_dir END ORDER BY kp.n)
                                           FILTER (WHERE kp.n <= v_room), '{}'),
                   v_truncated OR coalesce(max(kp.n) > v_room, false)
              INTO v_keys, v_nd, v_nf, v_ndepth, v_nside, v_truncated
              FROM kept AS kp;

            -- Edges between listed nodes: lineage from input to output field, and a symlink from the
            -- field of the dataset carrying the identifier to the same field of the identifier.
            WITH r AS (
                SELECT * FROM unnest(v_origin, v_sds, v_sf, v_dds, v_df, v_tt, v_ts, v_first, v_last)
                       AS r (origin, sds, sf, dds, df, tt, ts, first_seen, last_seen)
            ), k AS (
                SELECT k.key, k.n FROM unnest(v_keys) WITH ORDINALITY AS k (key, n)
            ), e AS (
                SELECT DISTINCT CASE WHEN v_dir = 'downstream' THEN s.n ELSE d.n END::integer AS f,
                       CASE WHEN v_dir = 'downstream' THEN d.n ELSE s.n END::integer AS t,
                       'lineage' AS kind, r.tt, r.ts, r.first_seen, r.last_seen
                  FROM r
                  JOIN k AS s ON s.key = jsonb_build_array(r.sds, r.sf)::text
                  JOIN k AS d ON d.key = jsonb_build_array(r.dds, r.df)::text
                UNION
                SELECT CASE WHEN y.carried THEN s.n ELSE o.n END::integer,
                       CASE WHEN y.carried THEN o.n ELSE s.n END::integer,
                       'symlink', NULL, NULL, NULL::timestamptz, NULL::timestamptz
                  FROM (SELECT DISTINCT r.origin, r.sds, r.sf FROM r WHERE r.sds <> r.origin) AS a
                  JOIN k AS s ON s.key = jsonb_build_array(a.sds, a.sf)::text
                  JOIN k AS o ON o.key = jsonb_build_array(a.origin, a.sf)::text
                 CROSS JOIN LATERAL (SELECT EXISTS (SELECT FROM metastore.dataset_symlinks AS l
                                                     WHERE l.dataset_id = a.sds AND l.symlink_id = a.origin)) AS y (carried)
            )
            SELECT v_efrom || coalesce(array_agg(e.f ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_eto || coalesce(array_agg(e.t ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_ekind || coalesce(array_agg(e.kind ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_ett || coalesce(array_agg(e.tt ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_ets || coalesce(array_agg(e.ts ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_efirst || coalesce(array_agg(e.first_seen ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}'),
                   v_elast || coalesce(array_agg(e.last_seen ORDER BY e.f, e.t, e.kind, e.tt, e.ts), '{}')
              INTO v_efrom, v_eto, v_ekind, v_ett, v_ets, v_efirst, v_elast
              FROM e;

            -- The next frontier: the fields reached that this direction has not walked from.
            SELECT coalesce(array_agg(x.dds ORDER BY x.o), '{}'), coalesce(array_agg(x.df ORDER BY x.o), '{}'),
                   v_seen || coalesce(array_agg(x.key ORDER BY x.o), '{}')
              INTO v_fr_ds, v_fr_f, v_seen
              FROM (SELECT DISTINCT ON (k.key) k.key, r.dds, r.df, r.o
                      FROM unnest(v_dds, v_df) WITH ORDINALITY AS r (dds, df, o)
                     CROSS JOIN LATERAL (SELECT jsonb_build_array(r.dds, r.df)::text AS key) AS k
                     -- Set operations by hash, not = ANY (a comparison with each element).
                     WHERE EXISTS (SELECT FROM unnest(v_keys) AS n (key) WHERE n.key = k.key)
                       AND NOT EXISTS (SELECT FROM unnest(v_seen) AS n (key) WHERE n.key = k.key)
                     ORDER BY k.key, r.o) AS x;
        END LOOP;
    END LOOP;

    -- Each edge once (both directions may find one in a cycle), at most 4 x p_node_limit.
    SELECT coalesce(jsonb_agg(x.edge ORDER BY x.f, x.t, x.kind, x.tt, x.ts), '[]'), count(*) > v_max_edges
      INTO v_edges, v_cut
      FROM (SELECT DISTINCT ON (e.f, e.t, e.kind, e.tt, e.ts) e.f, e.t, e.kind, e.tt, e.ts,
                   CASE WHEN e.kind = 'symlink' THEN jsonb_build_object('kind', 'symlink', 'from', e.f, 'to', e.t)
                        ELSE jsonb_build_object(
                                 'kind', 'lineage', 'from', e.f, 'to', e.t,
                                 'transformation', CASE WHEN e.tt = '' AND e.ts = '' THEN NULL
                                                        ELSE jsonb_build_object('type', nullif(e.tt, ''),
                                                                                'subtype', nullif(e.ts, '')) END,
                                 'first_seen', e.fs, 'last_seen', e.ls) END AS edge
              FROM unnest(v_efrom, v_eto, v_ekind, v_ett, v_ets, v_efirst, v_elast) AS e (f, t, kind, tt, ts, fs, ls)
             ORDER BY e.f, e.t, e.kind, e.tt, e.ts
             LIMIT v_max_edges + 1) AS x;
    IF v_cut THEN
        v_edges := v_edges - v_max_edges;
        v_truncated := true;
    END IF;

    RETURN jsonb_build_object(
        'id', p_id,
        'field', p_field,
        'direction', p_direction,
        'depth', p_depth,
        'nodes', (SELECT jsonb_agg(jsonb_build_object('id', n.o, 'dataset_id', d.id, 'namespace', d.namespace,
                                                      'name', d.name, 'field', n.field, 'depth', n.depth,
                                                      'side', n.side) ORDER BY n.o)
                    FROM unnest(v_nd, v_nf, v_ndepth, v_nside) WITH ORDINALITY AS n (ds, field, depth, side, o)
                    JOIN metastore.datasets AS d ON d.id = n.ds),
        'edges', v_edges,
        'truncated', v_truncated);
END
$fn$;

COMMENT ON FUNCTION metastore.field_lineage(bigint, text, text, integer, integer) IS
    'The lineage of field p_field of dataset p_id across hops, from the columnLineage facets '
    '(metastore.column_lineage): {id, field, direction, depth, nodes, edges, truncated}. nodes: {id (1, 2, ... '
    'in the order found; 1 is the field asked for), dataset_id, namespace, name, field, depth, side}. edges: '
    'lineage from an input field to an output field derived from it, with its transformation ({type, subtype}, '
    'null when the facet gave none), first_seen and last_seen to the hour; symlink from a field of the dataset '
    'that carries a symlink identifier to the same field of the identifier (the walk crosses symlinks both '
    'ways, as the dataset graph). At most p_node_limit nodes and 4 x p_node_limit edges (truncated: a limit '
    'cut the graph). The facet''s dataset-level list (fields that affect the whole dataset) is not followed. '
    'Hidden datasets (metastore.hide) are not there. Error codes: 22023 field empty or over 1000 bytes, '
    'direction not upstream/downstream/both, depth outside 1..10, node limit outside 1..1000; P0002 no such '
    'dataset.';

REVOKE ALL ON FUNCTION metastore.field_lineage(bigint, text, text, integer, integer) FROM PUBLIC;
DO $grant$
BEGIN
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION metastore.field_lineage(bigint, text, text, integer, integer) TO %I, %I',
        metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
