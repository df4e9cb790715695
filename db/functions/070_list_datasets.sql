CREATE OR REPLACE FUNCTION metastore.list_datasets(
    p_limit     integer DEFAULT 100,
    p_cursor    text DEFAULT NULL,
    p_namespace text DEFAULT NULL,
    p_scheme    text DEFAULT NULL,
    p_kind      text DEFAULT NULL,
    p_q         text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    -- One page, keyset-paginated on the (namespace, name) unique index: a deep page costs what
    -- the first does. $1, $2: after (namespace, name); $3 namespace, $4 scheme, $5 kind, $6 limit,
    -- $7 the LIKE pattern of q.
    c_page constant text := $q$
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(p) ORDER BY p.namespace, p.name), '[]')
          FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                       v.input_events, v.output_events,
                       -- Per row of the page only: both directions of the symlinks facet.
                       (SELECT pg_catalog.count(*) FROM metastore.dataset_symlinks_view AS s
                         WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations
                  FROM metastore.datasets_view AS v
                 WHERE (v.namespace, v.name) > ($1, $2)
                   AND ($3::text IS NULL OR v.namespace = $3)
                   AND ($4::text IS NULL OR v.scheme = $4)
                   AND ($5::text IS NULL OR v.kind = $5)
                   AND ($7::text IS NULL OR pg_catalog.lower(v.name) LIKE $7)
                 ORDER BY v.namespace, v.name
                 LIMIT $6) AS p
    $q$;
    v_after  jsonb := '["", ""]';
    v_like   text;
    v_rows   jsonb;
    v_last   jsonb;
    v_next   text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF p_kind IS NOT NULL AND p_kind NOT IN ('dataset', 'symlink') THEN
        RAISE EXCEPTION USING
            ERRCODE = '22023', MESSAGE = pg_catalog.format('kind must be dataset or symlink, not "%s"', p_kind);
    END IF;
    IF p_cursor IS NOT NULL THEN
        BEGIN
            v_after := pg_catalog.convert_from(
                pg_catalog.decode(pg_catalog.translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF pg_catalog.jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR pg_catalog.jsonb_array_length(v_after) <> 2
           OR pg_catalog.jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR pg_catalog.jsonb_typeof(v_after -> 1) IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged';
        END IF;
    END IF;

    IF p_q IS NULL THEN
        -- Without q, one plan fits every call: the (namespace, name) index, walked in order.
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(p) ORDER BY p.namespace, p.name), '[]')
          INTO v_rows
          FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                       v.input_events, v.output_events,
                       (SELECT pg_catalog.count(*) FROM metastore.dataset_symlinks_view AS s
                         WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations
                  FROM metastore.datasets_view AS v
                 WHERE (v.namespace, v.name) > (v_after ->> 0, v_after ->> 1)
                   AND (p_namespace IS NULL OR v.namespace = p_namespace)
                   AND (p_scheme IS NULL OR v.scheme = pg_catalog.lower(p_scheme))
                   AND (p_kind IS NULL OR v.kind = p_kind)
                 ORDER BY v.namespace, v.name
                 LIMIT p_limit + 1) AS p;
    ELSE
        -- q is a case-insensitive substring of the name, as a LIKE pattern (\, % and _ taken
        -- literally) on lower(name), which the trigram index (V0002, where pg_trgm exists) serves.
        -- Planned for the values at hand (EXECUTE ... USING): a rare q goes through the trigram
        -- index, a common one walks the (namespace, name) index and stops at the page's end.
        v_like := '%' || pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                      pg_catalog.lower(p_q), E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%';
        EXECUTE c_page INTO v_rows
          USING v_after ->> 0, v_after ->> 1, p_namespace, pg_catalog.lower(p_scheme), p_kind, p_limit + 1, v_like;
    END IF;

    IF pg_catalog.jsonb_array_length(v_rows) > p_limit THEN
        v_rows := v_rows - p_limit;
        v_last := v_rows -> (p_limit - 1);
        v_next := pg_catalog.translate(pg_catalog.encode(pg_catalog.convert_to(
                      pg_catalog.jsonb_build_array(v_last -> 'namespace', v_last -> 'name')::text, 'UTF8'), 'base64'),
                      E'+/\n', '-_');
    END IF;
    RETURN pg_catalog.jsonb_build_object('datasets', v_rows, 'next_cursor', v_next);
END
$fn$;

COMMENT ON FUNCTION metastore.list_datasets(integer, text, text, text, text, text) IS
    'One page of datasets ordered by (namespace, name): {"datasets": [...], "next_cursor": text or null}. '
    'Filters: exact namespace, scheme (case-insensitive), kind, q (case-insensitive substring of the name). '
    'Error codes: 22023 limit outside 1..1000, unknown kind, or a cursor not returned by this function.';

REVOKE ALL ON FUNCTION metastore.list_datasets(integer, text, text, text, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format(
        'GRANT EXECUTE ON FUNCTION metastore.list_datasets(integer, text, text, text, text, text) TO %I, %I',
        metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
