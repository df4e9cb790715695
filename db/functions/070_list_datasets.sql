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
    v_after  jsonb := '["", ""]';
    v_rows   jsonb;
    v_last   jsonb;
    v_next   text;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('limit must be from 1 to 1000, not %s', p_limit);
    END IF;
    IF p_kind IS NOT NULL AND p_kind NOT IN ('dataset', 'symlink') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('kind must be dataset or symlink, not "%s"', p_kind);
    END IF;
    IF p_cursor IS NOT NULL THEN
        BEGIN
            v_after := convert_from(decode(translate(p_cursor, '-_', '+/'), 'base64'), 'UTF8')::jsonb;
        EXCEPTION WHEN data_exception THEN
            v_after := NULL;
        END;
        IF jsonb_typeof(v_after) IS DISTINCT FROM 'array' OR jsonb_array_length(v_after) <> 2
           OR jsonb_typeof(v_after -> 0) IS DISTINCT FROM 'string'
           OR jsonb_typeof(v_after -> 1) IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = 'cursor is not valid: pass the next_cursor of the previous page unchanged';
        END IF;
    END IF;

    -- Keyset pagination on the (namespace, name) unique index: a deep page costs what the first does.
    SELECT coalesce(jsonb_agg(to_jsonb(p) ORDER BY p.namespace, p.name), '[]')
      INTO v_rows
      FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                   v.input_events, v.output_events,
                   -- Per row of the page only: both directions of the symlinks facet.
                   (SELECT count(*) FROM metastore.dataset_symlinks_view AS s
                     WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations
              FROM metastore.datasets_view AS v
             WHERE (v.namespace, v.name) > (v_after ->> 0, v_after ->> 1)
               AND (p_namespace IS NULL OR v.namespace = p_namespace)
               AND (p_scheme IS NULL OR v.scheme = lower(p_scheme))
               AND (p_kind IS NULL OR v.kind = p_kind)
               AND (p_q IS NULL OR strpos(lower(v.name), lower(p_q)) > 0)
             ORDER BY v.namespace, v.name
             LIMIT p_limit + 1) AS p;

    IF jsonb_array_length(v_rows) > p_limit THEN
        v_rows := v_rows - p_limit;
        v_last := v_rows -> (p_limit - 1);
        v_next := translate(encode(convert_to(jsonb_build_array(v_last -> 'namespace', v_last -> 'name')::text, 'UTF8'),
                                   'base64'), E'+/\n', '-_');
    END IF;
    RETURN jsonb_build_object('datasets', v_rows, 'next_cursor', v_next);
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
