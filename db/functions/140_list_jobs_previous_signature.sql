CREATE OR REPLACE FUNCTION metastore.list_jobs(
    p_limit     integer DEFAULT 100,
    p_cursor    text DEFAULT NULL,
    p_namespace text DEFAULT NULL,
    p_q         text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- The previous release's signature: jobs by name, through the one implementation.
    RETURN metastore.list_jobs(p_limit, p_cursor, p_namespace, p_q, 'name', NULL, NULL);
END
$fn$;

COMMENT ON FUNCTION metastore.list_jobs(integer, text, text, text) IS
    'One page of jobs ordered by (namespace, name), each with its latest run (by first eventTime): '
    '{"jobs": [...], "next_cursor": text or null}. Filters: exact namespace, q (case-insensitive substring '
    'of the name); hidden jobs and namespaces (metastore.hide) are not listed. The seven-argument list_jobs with '
    'sort name. Error codes: 22023 limit outside 1..1000 or a cursor not returned by this function.';

REVOKE ALL ON FUNCTION metastore.list_jobs(integer, text, text, text) FROM PUBLIC;
-- To this installation's group roles (metastore.group_roles).
DO $grant$
BEGIN
    EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION metastore.list_jobs(integer, text, text, text) TO %I, %I',
                              metastore.group_role('app'), metastore.group_role('reader'));
END
$grant$;
