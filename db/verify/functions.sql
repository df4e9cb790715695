-- Verifies db/functions: each function exists, and only the intended roles may call it.
DO $verify$
DECLARE
    v_fn   text;
    v_role text;
BEGIN
    -- Callable by the service.
    FOREACH v_fn IN ARRAY ARRAY['metastore.ingest_event(bytea, text, text)',
                                'metastore.ingest_batch(bytea, text, text)',
                                'metastore.ingest_events(bytea[], text, text)',
                                'metastore.list_datasets(integer, text, text, text, text, text)',
                                'metastore.get_dataset(bigint, integer)',
                                'metastore.reject_event(bytea, text, text, text, text)',
                                'metastore.ensure_partitions()'] LOOP
        ASSERT pg_catalog.has_function_privilege('metastore_app', v_fn, 'EXECUTE'), v_fn;
        ASSERT NOT pg_catalog.has_function_privilege('public', v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    FOREACH v_fn IN ARRAY ARRAY['metastore.list_datasets(integer, text, text, text, text, text)',
                                'metastore.get_dataset(bigint, integer)',
                                'metastore.dataset_summary(integer)'] LOOP
        ASSERT pg_catalog.has_function_privilege('metastore_reader', v_fn, 'EXECUTE'), v_fn;
        ASSERT pg_catalog.has_function_privilege('metastore_app', v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    ASSERT NOT pg_catalog.has_function_privilege('metastore_reader', 'metastore.ingest_event(bytea, text, text)',
                                                 'EXECUTE');
    -- Writes: the service's only.
    FOREACH v_fn IN ARRAY ARRAY['metastore.reject_event(bytea, text, text, text, text)',
                                'metastore.ensure_partitions()'] LOOP
        ASSERT NOT pg_catalog.has_function_privilege('metastore_reader', v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    -- Internal: reached only through the functions above, or by the owner.
    FOREACH v_role IN ARRAY ARRAY['metastore_app', 'metastore_reader', 'public'] LOOP
        FOREACH v_fn IN ARRAY ARRAY['metastore.store_event(jsonb, metastore.valid_event, text, text)',
                                    'metastore.backfill(integer)',
                                    'metastore.apply_retention(interval)',
                                    -- Any range of partitions, for the owner; the service has ensure_partitions.
                                    'metastore.create_partitions(date, integer)',
                                    'metastore.record_rejection(bytea, text, text, text, text)',
                                    'metastore.read_event(bytea)',
                                    'metastore.check_source(text, text)'] LOOP
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
