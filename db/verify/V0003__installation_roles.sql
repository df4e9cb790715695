-- Verifies V0003: the installation's group roles are recorded, only they (and the owners) hold
-- privileges in the schema and on the database, and only they may connect.
SELECT singleton, app_role, reader_role, chosen FROM metastore.group_roles WHERE false;

DO $verify$
DECLARE
    v_app    text;
    v_reader text;
    v_chosen boolean;
    v_stray  text;
BEGIN
    SELECT r.app_role, r.reader_role, r.chosen INTO STRICT v_app, v_reader, v_chosen FROM metastore.group_roles AS r;
    ASSERT v_chosen, 'the group roles of this new installation are not set yet: run metastore db deploy again';
    ASSERT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_roles AS r
             WHERE r.rolname IN (v_app, v_reader) AND NOT r.rolcanlogin AND NOT r.rolsuper) = 2,
        pg_catalog.format('the group roles %s and %s must exist and be NOLOGIN', v_app, v_reader);
    ASSERT NOT pg_catalog.has_database_privilege('public', pg_catalog.current_database(), 'CONNECT'),
        'every role may connect to the database: CONNECT must not be granted to PUBLIC';
    ASSERT pg_catalog.has_database_privilege(v_app, pg_catalog.current_database(), 'CONNECT')
       AND pg_catalog.has_database_privilege(v_reader, pg_catalog.current_database(), 'CONNECT'),
        'the group roles must be able to connect';

    -- Every grant (defaults included: a NULL ACL means PUBLIC's defaults) is the owner's own or the
    -- recorded roles'; PUBLIC keeps only TEMPORARY on the database, useless without CONNECT.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s %s to %s', g.privilege_type, g.object,
                                                   CASE WHEN g.grantee = 0 THEN 'PUBLIC'
                                                        ELSE g.grantee::regrole::text END), '; ')
      INTO v_stray
      FROM (SELECT 'schema metastore' AS object, a.grantee, a.privilege_type, n.nspowner AS owner
              FROM pg_catalog.pg_namespace AS n
             CROSS JOIN LATERAL pg_catalog.aclexplode(coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) AS a
             WHERE n.nspname = 'metastore'
            UNION ALL
            SELECT c.oid::regclass::text, a.grantee, a.privilege_type, c.relowner
              FROM pg_catalog.pg_class AS c
             CROSS JOIN LATERAL pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault(
                   CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) AS a
             WHERE c.relnamespace = 'metastore'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
            UNION ALL
            SELECT p.oid::regprocedure::text, a.grantee, a.privilege_type, p.proowner
              FROM pg_catalog.pg_proc AS p
             CROSS JOIN LATERAL pg_catalog.aclexplode(coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner))) AS a
             WHERE p.pronamespace = 'metastore'::regnamespace
            UNION ALL
            SELECT 'database ' || d.datname, a.grantee, a.privilege_type, d.datdba
              FROM pg_catalog.pg_database AS d
             CROSS JOIN LATERAL pg_catalog.aclexplode(coalesce(d.datacl, pg_catalog.acldefault('d', d.datdba))) AS a
             WHERE d.datname = pg_catalog.current_database()) AS g
     WHERE g.grantee <> g.owner
       AND g.grantee NOT IN (pg_catalog.to_regrole(v_app), pg_catalog.to_regrole(v_reader))
       AND NOT (g.object LIKE 'database %' AND g.grantee = 0 AND g.privilege_type = 'TEMPORARY');
    ASSERT v_stray IS NULL,
        pg_catalog.format('only the owner, %s and %s may hold privileges; also granted: %s', v_app, v_reader, v_stray);
END
$verify$;
