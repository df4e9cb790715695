-- Verifies V0004: events carry the storing transaction's id, defaulted and indexed with id on
-- every partition.
SELECT id, xact_id FROM metastore.events WHERE false;
SELECT name, cursor, sent, refused, lease_owner, lease_until, last_error, last_error_at, updated_at
  FROM metastore.forward_targets WHERE false;

DO $verify$
BEGIN
    ASSERT (SELECT a.atttypid = 'xid8'::regtype AND a.attnotnull
              FROM pg_catalog.pg_attribute AS a
             WHERE a.attrelid = 'metastore.events'::regclass AND a.attname = 'xact_id'),
        'metastore.events.xact_id must be xid8 NOT NULL';
    ASSERT (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid)
              FROM pg_catalog.pg_attrdef AS d
              JOIN pg_catalog.pg_attribute AS a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
             WHERE d.adrelid = 'metastore.events'::regclass AND a.attname = 'xact_id') = 'pg_current_xact_id()',
        'metastore.events.xact_id must default to pg_current_xact_id()';
    ASSERT NOT EXISTS (
        SELECT FROM pg_catalog.pg_inherits AS i
         WHERE i.inhparent = 'metastore.events'::regclass
           AND NOT EXISTS (SELECT FROM pg_catalog.pg_index AS x
                            WHERE x.indrelid = i.inhrelid
                              AND x.indkey::text = (SELECT pg_catalog.string_agg(a.attnum::text, ' ' ORDER BY k.n)
                                                      FROM pg_catalog.unnest(ARRAY['xact_id', 'id']) WITH ORDINALITY AS k(c, n)
                                                      JOIN pg_catalog.pg_attribute AS a
                                                        ON a.attrelid = i.inhrelid AND a.attname = k.c))),
        'a partition of metastore.events lacks the (xact_id, id) index';
END
$verify$;
