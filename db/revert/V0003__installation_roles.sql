-- Reverts V0003: the privileges go back to the cluster-wide roles of change 1 (created when
-- missing, which needs CREATEROLE), and every role may connect again, as before.
SELECT metastore.use_group_roles('metastore_app', 'metastore_reader');
DO $connect$
BEGIN
    EXECUTE pg_catalog.format('GRANT CONNECT ON DATABASE %I TO PUBLIC', pg_catalog.current_database());
END
$connect$;
DROP FUNCTION metastore.use_group_roles(text, text);
DROP TABLE metastore.group_roles;
