-- Verifies V0005: datasets are unique on name_key, and no btree index holds a whole namespace or
-- name (of a dataset or a job), which would cap their length again.
SELECT id, namespace, name, name_key FROM metastore.datasets WHERE false;
SELECT dataset_id, first_seen, last_seen, input_events, output_events, generation, direct
  FROM metastore.dataset_activity WHERE false;
SELECT generation FROM metastore.datasets WHERE false;
SELECT generation FROM metastore.dataset_symlinks WHERE false;
SELECT low, high FROM metastore.rebuild_ranges WHERE false;

DO $verify$
DECLARE
    v_whole text;
BEGIN
    ASSERT metastore.dataset_key('a\b', 'c') = '\x615c620063'::bytea, 'metastore.dataset_key changed: it is frozen';
    ASSERT (SELECT pg_catalog.count(*) FROM metastore.derive_state AS s
             WHERE s.generation >= 1 AND s.rebuild IN ('none', 'starting', 'deriving', 'finishing')) = 1,
        'metastore.derive_state must hold exactly one row';
    -- Derived rows point at datasets without foreign keys (see the change): a key's check would lock
    -- the dataset's row for every link.
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_constraint AS c
                        WHERE c.contype = 'f' AND c.confrelid = 'metastore.datasets'::regclass),
        'a foreign key points at metastore.datasets';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_index AS x
                    WHERE x.indrelid = 'metastore.datasets'::regclass AND x.indisunique AND x.indnatts = 1
                      AND x.indkey[0] = (SELECT a.attnum FROM pg_catalog.pg_attribute AS a
                                          WHERE a.attrelid = x.indrelid AND a.attname = 'name_key')),
        'metastore.datasets lacks its unique index on name_key';
    ASSERT pg_catalog.to_regclass('metastore.datasets_order_idx') IS NOT NULL, 'metastore.datasets_order_idx is missing';
    SELECT pg_catalog.string_agg(x.indexrelid::regclass::text, ', ') INTO v_whole
      FROM pg_catalog.pg_index AS x
      JOIN pg_catalog.pg_attribute AS a ON a.attrelid = x.indrelid AND a.attnum = ANY (x.indkey::pg_catalog.int2[])
     WHERE x.indrelid IN ('metastore.datasets'::regclass, 'metastore.events'::regclass)
       AND a.attname IN ('namespace', 'name', 'job_namespace', 'job_name');
    ASSERT v_whole IS NULL, pg_catalog.format('indexes holding a whole namespace or name: %s', v_whole);
END
$verify$;
