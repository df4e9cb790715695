-- Folds metastore.dataset_activity (what events added to existing datasets) into the datasets.
-- metastore.store_events calls it now and then; datasets_view adds what waits, so no reader sees
-- a difference.
CREATE OR REPLACE FUNCTION metastore.roll_up_datasets(p_dataset_ids bigint[] DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_folded bigint;
BEGIN
    -- Rows in (namespace, name) order, as every writer takes them (metastore.store_events); a
    -- concurrent roll-up of the same datasets waits here, then deletes only what is left.
    PERFORM
       FROM metastore.datasets AS d
      WHERE CASE WHEN p_dataset_ids IS NULL
                 THEN d.id IN (SELECT a.dataset_id FROM metastore.dataset_activity AS a)
                 ELSE d.id = ANY (p_dataset_ids) END
      ORDER BY d.namespace, d.name
        FOR NO KEY UPDATE OF d;

    -- Activity of the dataset's own generation is folded in; of an older one (what a rebuild
    -- replaced) dropped; of a newer one (a rebuild under way) left for the rebuild to fold when it
    -- ends (metastore.backfill).
    WITH moved AS (
        DELETE FROM metastore.dataset_activity AS a
         USING metastore.datasets AS d
         WHERE d.id = a.dataset_id AND a.generation <= d.generation
           AND (p_dataset_ids IS NULL OR a.dataset_id = ANY (p_dataset_ids))
        RETURNING a.*, a.generation = d.generation AS same_generation
    ), sums AS (
        SELECT m.dataset_id, min(m.first_seen) AS first_seen, max(m.last_seen) AS last_seen,
               sum(m.input_events) AS input_events, sum(m.output_events) AS output_events,
               bool_or(m.direct) AS direct, count(*) AS n
          FROM moved AS m
         WHERE m.same_generation
         GROUP BY m.dataset_id
    ), folded AS (
        UPDATE metastore.datasets AS d
           SET kind = CASE WHEN s.direct THEN 'dataset' ELSE d.kind END,
               first_seen = least(d.first_seen, s.first_seen), last_seen = greatest(d.last_seen, s.last_seen),
               input_events = d.input_events + s.input_events, output_events = d.output_events + s.output_events
          FROM sums AS s
         WHERE d.id = s.dataset_id
        RETURNING s.n
    )
    SELECT coalesce(sum(f.n), 0) INTO v_folded FROM folded AS f;
    RETURN v_folded;
END
$fn$;

COMMENT ON FUNCTION metastore.roll_up_datasets(bigint[]) IS
    'Folds metastore.dataset_activity of each dataset''s own generation into metastore.datasets (counts, '
    'first_seen, last_seen) for the given datasets, or all of them when null, drops activity of older '
    'generations, and returns how many activity rows it folded. metastore.datasets_view '
    'reads the same before and after.';

REVOKE ALL ON FUNCTION metastore.roll_up_datasets(bigint[]) FROM PUBLIC;
