-- Reverts V0008: the functions that only it needs go first (they name its table and columns), then
-- the table, the columns and forward_key. The targets keep their names without credentials: those
-- are gone. A previous release names a target with credentials by its whole URL, so it sends to such
-- a target again from the first event (at least once: receivers answer a duplicate with 200).
DROP FUNCTION IF EXISTS metastore.forward_remove(text);
DROP FUNCTION IF EXISTS metastore.forward_refused(text, text, bigint, text, integer, text);
DROP FUNCTION IF EXISTS metastore.forward_page(text, integer, integer);
DROP FUNCTION IF EXISTS metastore.forward_position(text);
DROP TABLE metastore.forward_refusals;
ALTER TABLE metastore.forward_targets DROP COLUMN failures, DROP COLUMN failing_since;
DROP FUNCTION metastore.forward_key(text);
