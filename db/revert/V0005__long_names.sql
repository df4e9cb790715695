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

-- The activity not folded yet goes into the datasets first.
UPDATE metastore.datasets AS d
   SET first_seen = least(d.first_seen, a.first_seen), last_seen = greatest(d.last_seen, a.last_seen),
       input_events = d.input_events + a.input_events, output_events = d.output_events + a.output_events
  FROM (SELECT x.dataset_id, pg_catalog.min(x.first_seen) AS first_seen, pg_catalog.max(x.last_seen) AS last_seen,
               pg_catalog.sum(x.input_events) AS input_events, pg_catalog.sum(x.output_events) AS output_events
          FROM metastore.dataset_activity AS x GROUP BY x.dataset_id) AS a
 WHERE d.id = a.dataset_id;
DROP FUNCTION IF EXISTS metastore.roll_up_datasets(bigint[]);
CREATE OR REPLACE VIEW metastore.datasets_view AS
SELECT d.id, d.namespace, d.name, d.scheme, d.authority, d.kind, d.first_seen, d.last_seen,
       d.input_events, d.output_events
  FROM metastore.datasets AS d;
DROP TABLE metastore.dataset_activity;

DROP INDEX metastore.events_job_idx;
CREATE INDEX events_job_idx ON metastore.events (job_namespace, job_name) WHERE job_name IS NOT NULL;

DROP INDEX metastore.datasets_scheme_idx;
CREATE INDEX datasets_scheme_idx ON metastore.datasets (scheme, namespace, name);

ALTER TABLE metastore.datasets ADD CONSTRAINT datasets_namespace_name_key UNIQUE (namespace, name);
DROP INDEX metastore.datasets_order_idx;
ALTER TABLE metastore.datasets DROP COLUMN name_key;
DROP FUNCTION metastore.dataset_key(text, text);
