-- A run's inputs and outputs as the runs timeline shows them, bounded: a run that read thousands of
-- files lists the first 100 of each side.
CREATE OR REPLACE FUNCTION metastore.run_datasets_of(
    p_run_id            bigint,
    p_hidden_datasets   bigint[],
    p_hidden_namespaces text[]
) RETURNS jsonb
-- PL/pgSQL, not SQL: db/functions are applied at every version, also before change 11 made the table.
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN (
        SELECT jsonb_build_object(
                   'inputs', coalesce(jsonb_agg(jsonb_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                                                ORDER BY x.namespace COLLATE "C", x.name COLLATE "C", x.id)
                                          FILTER (WHERE x.direction = 'input' AND x.n <= 100), '[]'),
                   'outputs', coalesce(jsonb_agg(jsonb_build_object('id', x.id, 'namespace', x.namespace, 'name', x.name)
                                                 ORDER BY x.namespace COLLATE "C", x.name COLLATE "C", x.id)
                                           FILTER (WHERE x.direction = 'output' AND x.n <= 100), '[]'),
                   'datasets_truncated', coalesce(bool_or(x.n > 100), false))
          FROM (SELECT s.*, row_number() OVER (PARTITION BY s.direction ORDER BY s.id) AS n
                  FROM (VALUES ('input'), ('output')) AS k (direction)
                 CROSS JOIN LATERAL (
                        -- 101 of each side, along the run's key: enough to say it was cut.
                        SELECT rd.direction, d.id, d.namespace, d.name
                          FROM metastore.run_datasets AS rd
                          JOIN metastore.datasets AS d ON d.id = rd.dataset_id
                         WHERE rd.run_id = p_run_id AND rd.direction = k.direction
                           AND d.id <> ALL (p_hidden_datasets) AND d.namespace <> ALL (p_hidden_namespaces)
                         ORDER BY rd.dataset_id
                         LIMIT 101) AS s) AS x);
END
$fn$;

COMMENT ON FUNCTION metastore.run_datasets_of(bigint, bigint[], text[]) IS
    'For the runs timeline: {"inputs", "outputs", "datasets_truncated"}, the datasets run p_run_id read and wrote '
    '(metastore.run_datasets), at most 100 of each (the smallest ids) in (namespace, name) order, without the '
    'hidden ones given; datasets_truncated: a side had more.';

REVOKE ALL ON FUNCTION metastore.run_datasets_of(bigint, bigint[], text[]) FROM PUBLIC;
