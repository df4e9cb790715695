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
    -- One page, keyset-paginated in (namespace, name) order, which is the byte order of
    -- metastore.dataset_key: datasets_order_idx holds its first 1024 bytes (change 5; no index can
    -- hold names of any length whole), walked in order from the cursor; only keys that tie on
    -- all 1024 bytes are sorted (Incremental Sort), so a deep page costs what the first does.
    -- $1 after this key (null: from the start; a bound here would make the planner probe
    -- datasets_order_idx for its first key even when the trigram index serves q), $2 up to this prefix (the end of a namespace), $3 namespace,
    -- $4 scheme, $5 kind, $6 limit, $7 the LIKE pattern of q, $8 and $9 the hidden datasets and namespaces.
    c_page constant text := $q$
        SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(p) - 'sort_key' ORDER BY p.sort_key), '[]')
          FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                       v.input_events, v.output_events,
                       -- Per row of the page only: both directions of the symlinks facet.
                       (SELECT pg_catalog.count(*) FROM metastore.dataset_symlinks_view AS s
                         WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations,
                       metastore.dataset_key(v.namespace, v.name) AS sort_key
                  FROM metastore.datasets_view AS v
                 WHERE ($1::bytea IS NULL
                        OR (pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024)
                            >= pg_catalog.substr($1, 1, 1024)
                            AND metastore.dataset_key(v.namespace, v.name) > $1))
                   AND ($2::bytea IS NULL
                        OR pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024) <= $2)
                   AND ($3::text IS NULL OR v.namespace = $3)
                   AND ($4::text IS NULL OR (pg_catalog.left(v.scheme, 200) = pg_catalog.left($4, 200)
                                             AND v.scheme = $4))
                   AND ($5::text IS NULL OR v.kind = $5)
                   AND ($7::text IS NULL OR pg_catalog.lower(v.name) LIKE $7)
                   AND v.id <> ALL ($8) AND v.namespace <> ALL ($9)
                 ORDER BY pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024),
                          metastore.dataset_key(v.namespace, v.name)
                 LIMIT $6) AS p
    $q$;
    v_hide   record;
    v_skip_lo bytea;
    v_skip_hi bytea;
    v_after  jsonb;
    v_from   bytea;
    v_to     bytea;
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
        v_from := metastore.dataset_key(v_after ->> 0, v_after ->> 1);
    END IF;
    IF p_namespace IS NOT NULL THEN
        -- The namespace's keys lie between its bytes followed by 0 and by 1: start at the first,
        -- stop at the last instead of walking the rest of the index.
        v_to := metastore.dataset_key(p_namespace, '');
        v_from := greatest(v_from, v_to);  -- greatest ignores a null
        v_to := pg_catalog.substr(pg_catalog.substr(v_to, 1, pg_catalog.length(v_to) - 1) || '\x01'::bytea, 1, 1024);
    END IF;

    -- What the owner hid (metastore.hide) is not listed.
    v_hide := metastore.hidden_names();

    IF p_q IS NULL THEN
        -- Without q, one plan fits every call: datasets_order_idx, walked in order. A hidden
        -- namespace is a range of that index (its bytes followed by 0, up to them followed by 1): the
        -- walk stops before it and goes on past it, instead of reading its rows one by one (a hidden
        -- namespace of a million datasets would hold up a page for seconds). One of more than 1022
        -- bytes shares the index's 1024-byte prefix with others: left to the row filter.
        v_rows := '[]';
        LOOP
            SELECT k.lo, k.hi INTO v_skip_lo, v_skip_hi
              FROM (SELECT metastore.dataset_key(n.ns, '') AS lo,
                           substr(metastore.dataset_key(n.ns, ''), 1, octet_length(metastore.dataset_key(n.ns, '')) - 1)
                           || '\x01'::bytea AS hi
                      FROM unnest(v_hide.namespaces) AS n (ns)
                     WHERE octet_length(n.ns) <= 1022) AS k
             WHERE k.hi > coalesce(v_from, '\x'::bytea)
             ORDER BY k.lo
             LIMIT 1;
            SELECT v_rows || coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(p) - 'sort_key' ORDER BY p.sort_key), '[]')
              INTO v_rows
              FROM (SELECT v.id, v.namespace, v.name, v.scheme, v.authority, v.kind, v.first_seen, v.last_seen,
                           v.input_events, v.output_events,
                           (SELECT pg_catalog.count(*) FROM metastore.dataset_symlinks_view AS s
                             WHERE s.dataset_id = v.id OR s.symlink_id = v.id) AS symlink_relations,
                           metastore.dataset_key(v.namespace, v.name) AS sort_key
                      FROM metastore.datasets_view AS v
                     WHERE pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024)
                           >= pg_catalog.substr(coalesce(v_from, '\x'), 1, 1024)
                       AND metastore.dataset_key(v.namespace, v.name) > coalesce(v_from, '\x')
                       AND (v_to IS NULL OR pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024) <= v_to)
                       AND (v_skip_lo IS NULL
                            OR pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024) < v_skip_lo)
                       AND (p_namespace IS NULL OR v.namespace = p_namespace)
                       AND (p_scheme IS NULL OR (pg_catalog.left(v.scheme, 200) = pg_catalog.left(pg_catalog.lower(p_scheme), 200)
                                                 AND v.scheme = pg_catalog.lower(p_scheme)))
                       AND (p_kind IS NULL OR v.kind = p_kind)
                       AND v.id <> ALL (v_hide.dataset_ids) AND v.namespace <> ALL (v_hide.namespaces)
                     ORDER BY pg_catalog.substr(metastore.dataset_key(v.namespace, v.name), 1, 1024),
                              metastore.dataset_key(v.namespace, v.name)
                     LIMIT p_limit + 1 - pg_catalog.jsonb_array_length(v_rows)) AS p;
            EXIT WHEN pg_catalog.jsonb_array_length(v_rows) > p_limit OR v_skip_lo IS NULL
                      OR (v_to IS NOT NULL AND pg_catalog.substr(v_skip_lo, 1, 1024) > v_to);
            v_from := v_skip_hi;
        END LOOP;
    ELSE
        -- q is a case-insensitive substring of the name, as a LIKE pattern (\, % and _ taken
        -- literally) on lower(name), which the trigram index (V0002, where pg_trgm exists) serves.
        -- Planned for the values at hand (EXECUTE ... USING): a rare q goes through the trigram
        -- index, a common one walks datasets_order_idx and stops at the page's end.
        v_like := '%' || pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                      pg_catalog.lower(p_q), E'\\', E'\\\\'), '%', E'\\%'), '_', E'\\_') || '%';
        EXECUTE c_page INTO v_rows
          USING v_from, v_to, p_namespace, pg_catalog.lower(p_scheme), p_kind, p_limit + 1, v_like,
                v_hide.dataset_ids, v_hide.namespaces;
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
    'One page of datasets ordered by (namespace, name), in code point order (metastore.dataset_key): '
    '{"datasets": [...], "next_cursor": text or null}. '
    'Filters: exact namespace, scheme (case-insensitive), kind, q (case-insensitive substring of the name). '
    'Hidden datasets and namespaces (metastore.hide) are not listed. '
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
