CREATE OR REPLACE FUNCTION metastore.dataset_summary(p_namespaces_limit integer DEFAULT 500) RETURNS jsonb
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
    -- What the view's filters offer: every scheme and the busiest namespaces, with counts; what the
    -- owner hid (metastore.hide) is not counted.
    WITH h AS (SELECT * FROM metastore.hidden_names()),
    v AS NOT MATERIALIZED (SELECT d.scheme, d.namespace FROM metastore.datasets AS d, h
           WHERE d.id <> ALL (h.dataset_ids) AND d.namespace <> ALL (h.namespaces))
    SELECT jsonb_build_object(
        'datasets', (SELECT count(*) FROM v),
        'schemes', (SELECT coalesce(jsonb_agg(jsonb_build_object('scheme', s.scheme, 'datasets', s.n)
                                              ORDER BY s.scheme NULLS LAST), '[]')
                      FROM (SELECT v.scheme, count(*) AS n FROM v GROUP BY v.scheme) AS s),
        'namespaces', (SELECT coalesce(jsonb_agg(jsonb_build_object('namespace', n.namespace, 'datasets', n.n)
                                                 ORDER BY n.namespace), '[]')
                         FROM (SELECT v.namespace, count(*) AS n FROM v
                                GROUP BY v.namespace ORDER BY count(*) DESC, v.namespace
                                LIMIT greatest(p_namespaces_limit, 0)) AS n))
$fn$;

COMMENT ON FUNCTION metastore.dataset_summary(integer) IS
    'Counts for the view''s filters: all datasets, per scheme (null: no scheme), and per namespace '
    '(the p_namespaces_limit namespaces with most datasets, ordered by name); hidden datasets and namespaces '
    '(metastore.hide) are not counted.';

REVOKE ALL ON FUNCTION metastore.dataset_summary(integer) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.dataset_summary(integer) TO %I, %I',
                              metastore.group_role('app'),
                              metastore.group_role('reader'));
END
$grant$;
