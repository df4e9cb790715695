-- Brings the events and their links back onto the coordinator (a copy of every row: as long as
-- distributing took). Nothing to do on plain PostgreSQL.
--
-- Citus converts no table that has an identity column (undistribute_table raises 0A000: it has
-- no way to keep a sequence's state across the cluster). So the identity of events.id is taken off
-- the coordinator's table for the move (with DDL propagation off: Citus refuses that ALTER on a
-- distributed table, and the workers' copies go with the move) and put back afterwards, as V0001
-- made it, continuing after the last id handed out. All in the revert's transaction.
--
-- undistribute_table makes the tables anew and the views on them too, without their grants: those
-- are read before and given again. It runs its commands one connection per node (sequential), so
-- that the reverts after this one in the same transaction may still change functions.
DO $citus$
DECLARE
    v_next   bigint;
    v_grants text[];
    v_grant  text;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = 'metastore.events'::regclass) THEN
        RETURN;
    END IF;
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    SELECT pg_catalog.array_agg(pg_catalog.format('GRANT %s ON %I.%I TO %s', a.privilege_type, n.nspname, c.relname,
                                                  a.grantee::regrole))
      INTO v_grants
      FROM pg_catalog.pg_class AS c
      JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
     CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
     WHERE n.nspname = 'metastore' AND c.relkind IN ('v', 'm') AND a.grantee <> c.relowner AND a.grantee <> 0;
    PERFORM pg_catalog.undistribute_table('metastore.event_datasets');

    SELECT pg_catalog.max(e.id) INTO v_next FROM metastore.events AS e;
    v_next := COALESCE(
        GREATEST(v_next, pg_catalog.pg_sequence_last_value(
                             pg_catalog.pg_get_serial_sequence('metastore.events', 'id')::regclass)),
        0) + 1;
    PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
    ALTER TABLE metastore.events ALTER COLUMN id DROP IDENTITY;
    PERFORM pg_catalog.set_config('citus.enable_ddl_propagation', 'on', true);
    PERFORM pg_catalog.undistribute_table('metastore.events');
    EXECUTE pg_catalog.format('ALTER TABLE metastore.events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY '
                              '(START WITH %s)', v_next);
    FOREACH v_grant IN ARRAY COALESCE(v_grants, '{}') LOOP
        EXECUTE v_grant;
    END LOOP;
END
$citus$;
