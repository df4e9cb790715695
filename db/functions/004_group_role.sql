-- The installation's group roles, for the function files' grants (run by the deploy, as the owner).
CREATE OR REPLACE FUNCTION metastore.group_role(p_kind text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_role text;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('app', 'reader') THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('kind must be app or reader, not %s', p_kind);
    END IF;
    -- Before change 3 (deploy --to 1 or 2) the roles were the cluster-wide ones change 1 made.
    IF to_regclass('metastore.group_roles') IS NULL THEN
        RETURN 'metastore_' || p_kind;
    END IF;
    SELECT CASE p_kind WHEN 'app' THEN r.app_role ELSE r.reader_role END INTO STRICT v_role
      FROM metastore.group_roles AS r;
    RETURN v_role;
END
$fn$;

COMMENT ON FUNCTION metastore.group_role(text) IS
    'The name of this installation''s group role of the given kind (app or reader), as recorded in '
    'metastore.group_roles. Error codes: 22023 unknown kind.';

REVOKE ALL ON FUNCTION metastore.group_role(text) FROM PUBLIC;
