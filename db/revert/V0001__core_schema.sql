-- Reverts V0001: removes the schema and everything in it (data included).
-- The group roles stay: they are cluster-wide and may serve other databases.
DROP SCHEMA metastore CASCADE;
