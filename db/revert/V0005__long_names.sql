-- Reverts V0005. The previous release refuses names over 1000 bytes and could not even rebuild
-- the datasets of events that hold one (its backfill would stop at them): with such names stored,
-- the revert refuses (55000) rather than leave a store that release cannot run. The functions
-- of this release stay until the previous release's deploy re-applies its own (deploy it next).
DO $check$
BEGIN
    IF EXISTS (SELECT FROM metastore.datasets AS d
                WHERE pg_catalog.octet_length(d.namespace) > 1000 OR pg_catalog.octet_length(d.name) > 1000)
       OR EXISTS (SELECT FROM metastore.events AS e
                   WHERE pg_catalog.octet_length(e.job_namespace) > 1000 OR pg_catalog.octet_length(e.job_name) > 1000) THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000',
            MESSAGE = 'cannot revert change 5: datasets or jobs with names over 1000 bytes are stored, '
                      'which the previous release refuses',
            HINT = 'Remove those events (metastore.apply_retention) and run metastore.backfill first.';
    END IF;
END
$check$;

-- A rebuild under way holds rows of two generations: it must end first.
DO $rebuild$
BEGIN
    IF EXISTS (SELECT FROM metastore.derive_state AS s WHERE s.rebuild <> 'none') THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000',
            MESSAGE = 'cannot revert change 5 while a rebuild of the derived tables is under way',
            HINT = 'Let CALL metastore.backfill() finish it, then revert.';
    END IF;
END
$rebuild$;

-- The activity not folded yet goes into the datasets first (the dataset's own generation only:
-- older rows are what a rebuild replaced).
UPDATE metastore.datasets AS d
   SET first_seen = least(d.first_seen, a.first_seen), last_seen = greatest(d.last_seen, a.last_seen),
       input_events = d.input_events + a.input_events, output_events = d.output_events + a.output_events
  FROM (SELECT x.dataset_id, pg_catalog.min(x.first_seen) AS first_seen, pg_catalog.max(x.last_seen) AS last_seen,
               pg_catalog.sum(x.input_events) AS input_events, pg_catalog.sum(x.output_events) AS output_events
          FROM metastore.dataset_activity AS x
          JOIN metastore.datasets AS y ON y.id = x.dataset_id AND x.generation = y.generation
         GROUP BY x.dataset_id) AS a
 WHERE d.id = a.dataset_id;
DROP FUNCTION IF EXISTS metastore.roll_up_datasets(bigint[]);
-- This release's functions that the previous one lacks (its verify lists functions exactly).
DROP FUNCTION IF EXISTS metastore.derive_datasets(bigint[], metastore.valid_event[], boolean);
DROP FUNCTION IF EXISTS metastore.fold_rebuilt_datasets(bigint[], integer);
DROP FUNCTION IF EXISTS metastore.derive_generation();
DROP FUNCTION IF EXISTS metastore.lock_events_briefly();
DROP FUNCTION IF EXISTS metastore.malformed_datasets(jsonb, jsonb);
CREATE OR REPLACE VIEW metastore.datasets_view AS
SELECT d.id, d.namespace, d.name, d.scheme, d.authority, d.kind, d.first_seen, d.last_seen,
       d.input_events, d.output_events
  FROM metastore.datasets AS d;
DROP TABLE metastore.dataset_activity;
DROP TABLE metastore.rebuild_ranges, metastore.derive_state;
ALTER TABLE metastore.dataset_symlinks DROP COLUMN generation;
ALTER TABLE metastore.dataset_symlinks
    ADD CONSTRAINT dataset_symlinks_dataset_id_fkey FOREIGN KEY (dataset_id) REFERENCES metastore.datasets (id),
    ADD CONSTRAINT dataset_symlinks_symlink_id_fkey FOREIGN KEY (symlink_id) REFERENCES metastore.datasets (id);
ALTER TABLE metastore.event_datasets
    ADD CONSTRAINT event_datasets_dataset_id_fkey FOREIGN KEY (dataset_id) REFERENCES metastore.datasets (id);
ALTER TABLE metastore.datasets DROP COLUMN generation;

DROP INDEX metastore.events_job_idx;
CREATE INDEX events_job_idx ON metastore.events (job_namespace, job_name) WHERE job_name IS NOT NULL;

DROP INDEX metastore.datasets_scheme_idx;
CREATE INDEX datasets_scheme_idx ON metastore.datasets (scheme, namespace, name);

ALTER TABLE metastore.datasets ADD CONSTRAINT datasets_namespace_name_key UNIQUE (namespace, name);
DROP INDEX metastore.datasets_order_idx;
ALTER TABLE metastore.datasets DROP COLUMN name_key;
DROP FUNCTION metastore.dataset_key(text, text);
