-- The end of a rebuild (metastore.backfill), for the datasets given: their activity of the new
-- generation replaces the values of a dataset of an older generation and is folded into one of
-- its own; their older activity goes. Rows are locked in (namespace, name) order, as every writer
-- takes them (roll_up_datasets, derive_datasets), and a row another transaction holds is skipped:
-- backfill sessions that run out of ranges at once fold different datasets, and a dataset skipped
-- for ingest keeps its activity (datasets_view adds it; one of an older generation is folded again
-- under the lock that ends the rebuild, when no ingest transaction holds anything).
CREATE OR REPLACE FUNCTION metastore.fold_rebuilt_datasets(p_ids bigint[], p_generation integer) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_folded bigint;
BEGIN
    WITH locked AS (
        SELECT d.id FROM metastore.datasets AS d
         WHERE d.id = ANY (p_ids) AND d.generation <= p_generation
           -- One of an older generation only once the new one has named it: until then it shows
           -- its old values, activity included.
           AND EXISTS (SELECT FROM metastore.dataset_activity AS a
                        WHERE a.dataset_id = d.id AND (a.generation = p_generation OR d.generation = p_generation))
         ORDER BY d.namespace, d.name
           FOR NO KEY UPDATE SKIP LOCKED
    ), moved AS (
        -- Activity of a newer generation (a rebuild started since p_generation was read) stays.
        DELETE FROM metastore.dataset_activity AS a USING locked AS l
         WHERE a.dataset_id = l.id AND a.generation <= p_generation
        RETURNING a.*
    ), sums AS (
        SELECT m.dataset_id, min(m.first_seen) AS first_seen, max(m.last_seen) AS last_seen,
               sum(m.input_events) AS input_events, sum(m.output_events) AS output_events,
               bool_or(m.direct) AS direct
          FROM moved AS m
         WHERE m.generation = p_generation
         GROUP BY m.dataset_id
    ), folded AS (
        UPDATE metastore.datasets AS d
           SET kind = CASE WHEN (d.generation = p_generation AND d.kind = 'dataset') OR s.direct THEN 'dataset'
                           ELSE 'symlink' END,
               first_seen = CASE WHEN d.generation = p_generation THEN least(d.first_seen, s.first_seen)
                                 ELSE s.first_seen END,
               last_seen = CASE WHEN d.generation = p_generation THEN greatest(d.last_seen, s.last_seen)
                                ELSE s.last_seen END,
               input_events = CASE WHEN d.generation = p_generation THEN d.input_events + s.input_events
                                   ELSE s.input_events END,
               output_events = CASE WHEN d.generation = p_generation THEN d.output_events + s.output_events
                                    ELSE s.output_events END,
               generation = p_generation
          FROM sums AS s
         WHERE d.id = s.dataset_id
        RETURNING d.id
    )
    SELECT count(*) INTO v_folded FROM folded;
    RETURN v_folded;
END
$fn$;

COMMENT ON FUNCTION metastore.fold_rebuilt_datasets(bigint[], integer) IS
    'For metastore.backfill when a rebuild ends: folds the dataset_activity of generation p_generation into '
    'the datasets p_ids (replacing the values of a dataset of an older generation, which then is of '
    'p_generation), drops their activity of older generations, and returns how many datasets it changed. A '
    'dataset of an older generation without such activity stays as it was, activity included: no event of '
    'the new generation has named it (yet). Rows another transaction holds are skipped.';

REVOKE ALL ON FUNCTION metastore.fold_rebuilt_datasets(bigint[], integer) FROM PUBLIC;
