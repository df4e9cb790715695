-- Sets this installation's group roles and moves their privileges; the deploy calls it last, on
-- every run (`metastore db deploy --app-role/--reader-role`), also to keep CONNECT on the database
-- to these roles only: a database restored or cloned gets PUBLIC's default CONNECT back.
CREATE OR REPLACE FUNCTION metastore.use_group_roles(p_app text DEFAULT NULL, p_reader text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_old_app    text;
    v_old_reader text;
    v_app        text;
    v_reader     text;
    v_role       text;
    v_from       text;
    v_to         text;
    v_kind       text;
    v_object     text;
    v_priv       text;
    v_moved      integer := 0;
BEGIN
    SELECT r.app_role, r.reader_role INTO STRICT v_old_app, v_old_reader FROM metastore.group_roles AS r FOR UPDATE;
    v_app := coalesce(p_app, v_old_app);
    v_reader := coalesce(p_reader, v_old_reader);
    IF v_app = v_reader THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('the app and reader roles must differ, not both %s', v_app);
    END IF;

    FOREACH v_role IN ARRAY ARRAY[v_app, v_reader] LOOP
        -- Names that need no quoting anywhere (SQL, libpq options, YAML) and are no reserved role.
        IF v_role !~ '^[a-z_][a-z0-9_]{0,62}$' OR v_role LIKE 'pg\_%' OR v_role = 'public' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('group role name %s is not valid: 1 to 63 lower-case ASCII letters, digits and _, '
                                 'not starting with a digit or pg_', quote_literal(v_role));
        END IF;
        IF NOT EXISTS (SELECT FROM pg_roles AS r WHERE r.rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE EXCEPTION USING
                    ERRCODE = '42501',
                    MESSAGE = format('group role %I does not exist and %I may not create it', v_role, current_user),
                    HINT = format('A DBA creates it first: CREATE ROLE %I NOLOGIN;', v_role);
            END;
        ELSIF EXISTS (SELECT FROM pg_roles AS r
                       WHERE r.rolname = v_role AND (r.rolcanlogin OR r.rolsuper OR r.rolbypassrls)) THEN
            -- A login role here would be the owner, a service or a person: each installation's
            -- privileges go to its own NOLOGIN groups, and logins are made members of them.
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('%I is a login, superuser or BYPASSRLS role; a group role must be NOLOGIN', v_role);
        END IF;
    END LOOP;

    -- Every privilege the old roles hold in this schema and on this database goes to the new ones.
    FOR v_from, v_to IN
        SELECT t.f, t.t FROM (VALUES (v_old_app, v_app), (v_old_reader, v_reader)) AS t (f, t)
         WHERE t.f <> t.t AND to_regrole(t.f) IS NOT NULL
    LOOP
        FOR v_kind, v_object, v_priv IN
            SELECT 'SCHEMA', quote_ident(n.nspname), a.privilege_type
              FROM pg_namespace AS n CROSS JOIN LATERAL aclexplode(n.nspacl) AS a
             WHERE n.nspname = 'metastore' AND a.grantee = to_regrole(v_from)
            UNION ALL
            SELECT CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text, a.privilege_type
              FROM pg_class AS c CROSS JOIN LATERAL aclexplode(c.relacl) AS a
             WHERE c.relnamespace = 'metastore'::regnamespace AND a.grantee = to_regrole(v_from)
            UNION ALL
            SELECT 'ROUTINE', p.oid::regprocedure::text, a.privilege_type
              FROM pg_proc AS p CROSS JOIN LATERAL aclexplode(p.proacl) AS a
             WHERE p.pronamespace = 'metastore'::regnamespace AND a.grantee = to_regrole(v_from)
            UNION ALL
            SELECT 'DATABASE', quote_ident(d.datname), a.privilege_type
              FROM pg_database AS d CROSS JOIN LATERAL aclexplode(d.datacl) AS a
             WHERE d.datname = current_database() AND a.grantee = to_regrole(v_from)
        LOOP
            EXECUTE format('GRANT %s ON %s %s TO %I', v_priv, v_kind, v_object, v_to);
            EXECUTE format('REVOKE %s ON %s %s FROM %I', v_priv, v_kind, v_object, v_from);
            v_moved := v_moved + 1;
        END LOOP;
    END LOOP;
    UPDATE metastore.group_roles SET app_role = v_app, reader_role = v_reader, chosen = true;

    -- Any role of the cluster may connect to a new database (PUBLIC's default): only this
    -- installation's roles may (the database owner and superusers always can).
    EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I, %I', current_database(), v_app, v_reader);
    IF has_database_privilege('public', current_database(), 'CONNECT') THEN
        RAISE WARNING USING
            MESSAGE = format('every role may still connect to database %I', current_database()),
            HINT = format('%I does not own the database; its owner runs: REVOKE CONNECT ON DATABASE %I FROM PUBLIC;',
                          current_user, current_database());
    END IF;
    RETURN jsonb_build_object('app_role', v_app, 'reader_role', v_reader, 'privileges_moved', v_moved);
END
$fn$;

COMMENT ON FUNCTION metastore.use_group_roles(text, text) IS
    'Makes p_app and p_reader (null: keep the recorded one) this installation''s group roles: creates them '
    'NOLOGIN when missing (needs CREATEROLE), moves every privilege the previous ones held in schema '
    'metastore and on the database to them, records them in metastore.group_roles, and lets only them '
    '(besides the owner) connect to the database. Returns {"app_role", "reader_role", "privileges_moved"}. '
    'Error codes: 22023 a name that is not valid, equal names, or an existing role that can log in; '
    '42501 a missing role the caller may not create.';

REVOKE ALL ON FUNCTION metastore.use_group_roles(text, text) FROM PUBLIC;
