-- Every writer takes dataset rows in (namespace, name) order: a single event in its upsert, a
-- batch here, up front, for all of its events. Without this, two batches touching the same
-- datasets in different orders deadlock (seen under load with two async writers): on existing
-- rows (row locks) as on new ones (waits on the unique index).
-- PL/pgSQL, not SQL: a SQL body is checked when created, and a deploy to a version before
-- change 5 (which makes name_key) applies this file too.
CREATE OR REPLACE FUNCTION metastore.lock_datasets(p_events metastore.valid_event[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    -- New datasets first, as placeholders that the events' own upserts complete in this
    -- transaction (least/greatest of the times, kind, counts): only events that are new can
    -- mention a dataset that does not exist yet, so every placeholder is completed.
    INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen, input_events, output_events)
    SELECT DISTINCT m.namespace, m.name, 'symlink', 'infinity'::timestamptz, '-infinity'::timestamptz, 0, 0
      FROM unnest(p_events) AS e
     CROSS JOIN LATERAL unnest(e.mentions) AS m
     ORDER BY m.namespace, m.name
    ON CONFLICT (name_key) DO NOTHING;

    PERFORM
       FROM metastore.datasets AS d
      WHERE d.name_key IN (SELECT sha256(metastore.dataset_key(m.namespace, m.name))
                             FROM unnest(p_events) AS e
                            CROSS JOIN LATERAL unnest(e.mentions) AS m)
      ORDER BY d.namespace, d.name
        FOR UPDATE OF d;
END
$fn$;

COMMENT ON FUNCTION metastore.lock_datasets(metastore.valid_event[]) IS
    'Creates the missing datasets the given events mention and locks them all, in (namespace, name) order, '
    'so that batches and single events cannot deadlock. Call it only with events about to be stored.';

REVOKE ALL ON FUNCTION metastore.lock_datasets(metastore.valid_event[]) FROM PUBLIC;
