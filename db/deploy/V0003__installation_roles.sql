-- Per-installation group roles. Change 1 granted to the cluster-wide metastore_app and
-- metastore_reader, so every installation of one PostgreSQL cluster shared them: one
-- installation's service role could use another's database. The names now live here, and
-- `metastore db deploy` moves the privileges to this installation's roles
-- (metastore.use_group_roles); an existing installation keeps the names it had.
CREATE TABLE metastore.group_roles (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    app_role    text    NOT NULL,
    reader_role text    NOT NULL,
    chosen      boolean NOT NULL,
    CHECK (app_role <> reader_role)
);
COMMENT ON TABLE metastore.group_roles IS
    'This installation''s two NOLOGIN group roles (one row): app_role (ingest and read) and reader_role '
    '(read only). Function grants go to them; set by `metastore db deploy --app-role/--reader-role`. '
    'chosen is false until a deploy has set them on a new installation (it then derives them from '
    'the database''s name).';

-- The roles change 1 granted to. A new installation (change 1 applied in this same deploy: no
-- function of db/functions exists yet) has not chosen them; an existing one keeps them.
INSERT INTO metastore.group_roles (app_role, reader_role, chosen)
VALUES ('metastore_app', 'metastore_reader',
        pg_catalog.to_regprocedure('metastore.ingest_event(bytea, text, text)') IS NOT NULL);
