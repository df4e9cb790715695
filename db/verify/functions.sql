-- Verifies db/functions: each function exists, and only the intended roles may call it.
DO $verify$
DECLARE
    v_fn     text;
    v_role   text;
    -- This installation's group roles (metastore.group_roles), the cluster-wide ones before change 3.
    v_app    text := metastore.group_role('app');
    v_reader text := metastore.group_role('reader');
BEGIN
    -- Callable by the service.
    FOREACH v_fn IN ARRAY ARRAY['metastore.ingest_event(bytea, text, text)',
                                'metastore.ingest_batch(bytea, text, text)',
                                'metastore.ingest_events(bytea[], text, text)',
                                'metastore.list_datasets(integer, text, text, text, text, text)',
                                'metastore.get_dataset(bigint, integer)',
                                'metastore.write_probe()',
                                'metastore.reject_event(bytea, text, text, text, text)',
                                'metastore.ensure_partitions()',
                                'metastore.forward_claim(text, text, integer)',
                                'metastore.forward_ack(text, text, text, integer, integer, text)',
                                'metastore.forward_status()',
                                'metastore.list_jobs(integer, text, text, text)',
                                'metastore.get_job(bigint, integer)',
                                'metastore.get_run(bigint)',
                                'metastore.dataset_runs(bigint, integer)'] LOOP
        ASSERT pg_catalog.has_function_privilege(v_app, v_fn, 'EXECUTE'), v_fn;
        ASSERT NOT pg_catalog.has_function_privilege('public', v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    FOREACH v_fn IN ARRAY ARRAY['metastore.list_datasets(integer, text, text, text, text, text)',
                                'metastore.get_dataset(bigint, integer)',
                                'metastore.dataset_lineage(bigint, text, integer, integer)',
                                'metastore.datasets_with_field(text, integer)',
                                'metastore.dataset_summary(integer)',
                                'metastore.read_events(integer, text, text, text, text, text, text, text, text, text, text)',
                                'metastore.partitions_ahead()',
                                'metastore.list_jobs(integer, text, text, text)',
                                'metastore.get_job(bigint, integer)',
                                'metastore.get_run(bigint)',
                                'metastore.dataset_runs(bigint, integer)'] LOOP
        ASSERT pg_catalog.has_function_privilege(v_reader, v_fn, 'EXECUTE'), v_fn;
        ASSERT pg_catalog.has_function_privilege(v_app, v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    ASSERT NOT pg_catalog.has_function_privilege(v_reader, 'metastore.ingest_event(bytea, text, text)',
                                                 'EXECUTE');
    ASSERT pg_catalog.has_function_privilege(v_reader, 'metastore.forward_status()', 'EXECUTE');
    -- Writes: the service's only.
    FOREACH v_fn IN ARRAY ARRAY['metastore.reject_event(bytea, text, text, text, text)',
                                'metastore.ensure_partitions()',
                                'metastore.write_probe()',
                                'metastore.forward_ack(text, text, text, integer, integer, text)'] LOOP
        ASSERT NOT pg_catalog.has_function_privilege(v_reader, v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    -- Internal: reached only through the functions above, or by the owner.
    FOREACH v_role IN ARRAY ARRAY[v_app, v_reader, 'public'] LOOP
        FOREACH v_fn IN ARRAY ARRAY['metastore.store_event(jsonb, metastore.valid_event, text, text)',
                                    'metastore.derive_job_run(jsonb, text, timestamptz, text, text, text)',
                                    'metastore.backfill(integer)',
                                    'metastore.apply_retention(interval)',
                                    -- Any range of partitions, for the owner; the service has ensure_partitions.
                                    'metastore.create_partitions(date, integer)',
                                    'metastore.record_rejection(bytea, text, text, text, text)',
                                    'metastore.read_event(bytea)',
                                    'metastore.check_source(text, text)',
                                    'metastore.derive_lineage(bigint, timestamptz, jsonb, text, text, metastore.dataset_mention[])',
                                    'metastore.dataset_aliases(bigint[], integer)',
                                    'metastore.dataset_layer(bigint)'] LOOP
            ASSERT NOT pg_catalog.has_function_privilege(v_role, v_fn, 'EXECUTE'),
                pg_catalog.format('%s must not execute %s', v_role, v_fn);
        END LOOP;
    END LOOP;
    -- Every function in the schema runs with a pinned search_path.
    ASSERT NOT EXISTS (
        SELECT FROM pg_catalog.pg_proc AS p
         WHERE p.pronamespace = 'metastore'::regnamespace AND p.prokind = 'f'
           AND p.prosecdef AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=pg_catalog, pg_temp']),
        'a SECURITY DEFINER function lacks SET search_path = pg_catalog, pg_temp';
END
$verify$;

-- Owner code cannot be led astray by a search_path (issue 13, item 1; db/CONVENTIONS.md): every
-- function and procedure of the schema pins it, except the few below that cannot or must not
-- carry SET and instead qualify every function and operator they use.
DO $search_path$
DECLARE
    -- backfill: a procedure that commits cannot carry SET (it pins the path itself with
    -- set_config(..., true) at the start of each of its transactions). event_kind: a one-line
    -- SQL function that SET would keep from being inlined.
    c_qualified constant text[] := ARRAY['metastore.backfill(integer)', 'metastore.event_kind(jsonb)'];
    v_loose     text;
BEGIN
    SELECT pg_catalog.string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text)
      INTO v_loose
      FROM pg_catalog.pg_proc AS p
     WHERE p.pronamespace = 'metastore'::regnamespace
       AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=pg_catalog, pg_temp']
       AND p.oid::regprocedure::text <> ALL (c_qualified);
    ASSERT v_loose IS NULL, pg_catalog.format('without SET search_path = pg_catalog, pg_temp: %s', v_loose);

    -- The exceptions stay what makes them safe: no owner rights for others, and backfill pins.
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_proc AS p
                        WHERE p.oid::regprocedure::text = ANY (c_qualified) AND p.prosecdef),
        'a function without a pinned search_path must not be SECURITY DEFINER';
    ASSERT (SELECT pg_catalog.strpos(p.prosrc, 'pg_catalog.set_config(''search_path'', ''pg_catalog, pg_temp'', true)') > 0
              FROM pg_catalog.pg_proc AS p WHERE p.oid = 'metastore.backfill(integer)'::regprocedure),
        'metastore.backfill must pin its search_path with set_config';
END
$search_path$;
