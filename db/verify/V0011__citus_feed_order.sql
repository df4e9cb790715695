-- Verifies V0011: with the citus extension, the feed's order tables exist on the coordinator (not
-- Citus tables), with no privilege for any other role (the functions reach them as the owner);
-- without it, neither exists.
DO $verify$
DECLARE
    v_table text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension AS x WHERE x.extname = 'citus') THEN
        ASSERT pg_catalog.to_regclass('metastore.feed_order') IS NULL
               AND pg_catalog.to_regclass('metastore.feed_pending') IS NULL,
            'metastore.feed_order and feed_pending exist only where the citus extension is';
        RETURN;
    END IF;
    PERFORM o.seq, o.event_id, o.event_time FROM metastore.feed_order AS o WHERE false;
    PERFORM p.event_id, p.event_time FROM metastore.feed_pending AS p WHERE false;
    FOREACH v_table IN ARRAY ARRAY['metastore.feed_order', 'metastore.feed_pending'] LOOP
        ASSERT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition AS p WHERE p.logicalrelid = v_table::regclass),
            pg_catalog.format('%s must stay a table of the coordinator', v_table);
        ASSERT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class AS c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
                            WHERE c.oid = v_table::regclass AND a.grantee <> c.relowner),
            pg_catalog.format('only the owner may use %s', v_table);
    END LOOP;
    ASSERT (SELECT a.attidentity = 'a' FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = 'metastore.feed_order'::regclass AND a.attname = 'seq'),
        'metastore.feed_order.seq must be GENERATED ALWAYS AS IDENTITY';
END
$verify$;
