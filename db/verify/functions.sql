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
                                'metastore.forward_page(text, integer, integer)',
                                'metastore.forward_refused(text, text, bigint, text, integer, text)',
                                'metastore.list_jobs(integer, text, text, text)',
                                'metastore.get_job(bigint, integer)',
                                'metastore.get_run(bigint)',
                                'metastore.dataset_runs(bigint, integer)',
                                'metastore.list_jobs(integer, text, text, text, text, text, text)',
                                'metastore.list_runs(integer, text, text, text, text, text, bigint, text, text)',
                                'metastore.lineage_graph(bigint, text, integer, integer, text)',
                                'metastore.field_lineage(bigint, text, text, integer, integer)',
                                'metastore.search(text, integer)',
                                'metastore.list_namespaces(integer)'] LOOP
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
                                'metastore.dataset_runs(bigint, integer)',
                                'metastore.list_jobs(integer, text, text, text, text, text, text)',
                                'metastore.list_runs(integer, text, text, text, text, text, bigint, text, text)',
                                'metastore.lineage_graph(bigint, text, integer, integer, text)',
                                'metastore.field_lineage(bigint, text, text, integer, integer)',
                                'metastore.search(text, integer)',
                                'metastore.list_namespaces(integer)',
                                -- Each reader of the feed runs the sequencer first (it only numbers what is stored).
                                'metastore.sequence_feed()'] LOOP
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
                                'metastore.forward_ack(text, text, text, integer, integer, text)',
                                'metastore.forward_refused(text, text, bigint, text, integer, text)',
                                'metastore.forward_page(text, integer, integer)'] LOOP
        ASSERT NOT pg_catalog.has_function_privilege(v_reader, v_fn, 'EXECUTE'), v_fn;
    END LOOP;
    -- Internal: reached only through the functions above, or by the owner.
    FOREACH v_role IN ARRAY ARRAY[v_app, v_reader, 'public'] LOOP
        FOREACH v_fn IN ARRAY ARRAY['metastore.store_events(jsonb[], metastore.valid_event[], text, text)',
                                    'metastore.ingest_checked(bytea[], jsonb[], metastore.checked_event[], text, text)',
                                    'metastore.derive_job_run(jsonb[], metastore.valid_event[])',
                                    'metastore.datasets_with_field_among(bigint[], text, integer)',
                                    'metastore.backfill(integer)',
                                    'metastore.apply_retention(interval)',
                                    'metastore.expiring_days(interval)',
                                    -- Any range of partitions, for the owner; the service has ensure_partitions.
                                    'metastore.create_partitions(date, integer)',
                                    'metastore.record_rejection(bytea, text, text, text, text)',
                                    'metastore.read_event(bytea)',
                                    'metastore.malformed_datasets(jsonb, jsonb)',
                                    'metastore.derive_datasets(bigint[], metastore.valid_event[], boolean)',
                                    'metastore.derive_generation()',
                                    'metastore.lock_events_briefly()',
                                    'metastore.fold_rebuilt_datasets(bigint[], integer)',
                                    'metastore.check_source(text, text)',
                                    'metastore.roll_up_datasets(bigint[])',
                                    'metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], jsonb)',
                                    'metastore.dataset_aliases(bigint[], integer)',
                                    'metastore.dataset_layer(bigint)',
                                    'metastore.derive_run_datasets(metastore.valid_event[], jsonb)',
                                    'metastore.hidden_names()',
                                    'metastore.search_substrings(text, text, integer, integer, integer, bigint[], bigint[], text[])',
                                    -- The hide list is the owner's (docs/operations.md, "Hiding").
                                    'metastore.hide(text, text, text, text)',
                                    'metastore.unhide(text, text, text)',
                                    'metastore.hidden_list(boolean)',
                                    'metastore.forward_position(text)',
                                    'metastore.feed_seq(text)',
                                    'metastore.feed_sequenced()',
                                    'metastore.read_sequenced_events(integer, text, timestamptz, timestamptz, timestamptz, timestamptz, text, text, text, text, text)',
                                    -- The owner's: a target that is no longer configured.
                                    'metastore.forward_remove(text)'] LOOP
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

-- Owner code cannot be led astray by a search_path (db/CONVENTIONS.md): every
-- function and procedure of the schema pins it, except the few below that cannot or must not
-- carry SET and instead qualify every function and operator they use.
DO $search_path$
DECLARE
    -- backfill: a procedure that commits cannot carry SET (it pins the path itself with
    -- set_config(..., true) at the start of each of its transactions). event_kind,
    -- extract_datasets, dataset_key, search_key, name_tail, facet_text, mention_key,
    -- generation_least and generation_greatest: SQL functions that SET would keep from being inlined.
    c_qualified constant text[] := ARRAY['metastore.backfill(integer)', 'metastore.event_kind(jsonb)',
                                         'metastore.extract_datasets(jsonb)', 'metastore.dataset_key(text,text)',
                                         'metastore.search_key(text)', 'metastore.name_tail(text)',
                                         'metastore.facet_text(jsonb)', 'metastore.mention_key(text,text)',
                                         'metastore.generation_least(integer,integer,timestamp with time zone,timestamp with time zone)',
                                         'metastore.generation_greatest(integer,integer,timestamp with time zone,timestamp with time zone)'];
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

-- The exact set of functions and procedures of schema metastore, each with its signature (names,
-- types, defaults and OUT parameters of its arguments, and its result): a function added, dropped
-- or changed without this list following is reported, by name. Add a new function here (and to
-- tests/db/test_search_path.py); what a signature change requires is in db/CONVENTIONS.md.
DO $exact$
DECLARE
    -- db/functions: every deploy applies all of them, whatever the version it deploys to.
    c_functions constant text[] := ARRAY[
        'metastore.apply_retention(p_keep interval) -> jsonb',
        'metastore.backfill(IN p_batch_size integer DEFAULT 10000)',
        'metastore.check_event(p_payload jsonb) -> metastore.checked_event',
        'metastore.check_source(p_source_kind text, p_source_principal text) -> text',
        'metastore.create_partitions(p_from date DEFAULT (CURRENT_DATE - 1), p_days_ahead integer DEFAULT 14) -> integer',
        'metastore.dataset_aliases(p_ids bigint[], p_limit integer) -> bigint[]',
        'metastore.dataset_layer(p_id bigint) -> jsonb',
        'metastore.dataset_lineage(p_id bigint, p_direction text DEFAULT ''both''::text, p_depth integer DEFAULT 3, p_node_limit integer DEFAULT 200) -> jsonb',
        'metastore.dataset_runs(p_dataset_id bigint, p_limit integer DEFAULT 20) -> jsonb',
        'metastore.dataset_summary(p_namespaces_limit integer DEFAULT 500) -> jsonb',
        'metastore.datasets_with_field(p_field text, p_limit integer DEFAULT 100) -> jsonb',
        'metastore.datasets_with_field_among(p_ids bigint[], p_field text, p_limit integer) -> jsonb',
        'metastore.derive_datasets(p_event_ids bigint[], p_events metastore.valid_event[], p_roll_up boolean) -> jsonb',
        'metastore.derive_generation() -> integer',
        'metastore.derive_job_run(p_payloads jsonb[], p_events metastore.valid_event[]) -> void',
        'metastore.derive_lineage(p_event_ids bigint[], p_payloads jsonb[], p_events metastore.valid_event[], p_dataset_ids jsonb DEFAULT NULL::jsonb) -> void',
        'metastore.derive_run_datasets(p_events metastore.valid_event[], p_dataset_ids jsonb) -> void',
        'metastore.ensure_partitions() -> integer',
        'metastore.fold_rebuilt_datasets(p_ids bigint[], p_generation integer) -> bigint',
        'metastore.generation_greatest(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) -> timestamp with time zone',
        'metastore.generation_least(p_stored_generation integer, p_generation integer, p_stored timestamp with time zone, p_new timestamp with time zone) -> timestamp with time zone',
        'metastore.event_kind(p_payload jsonb) -> text',
        'metastore.expiring_days(p_keep interval) -> TABLE(day date, time_from timestamp with time zone, time_to timestamp with time zone)',
        'metastore.extract_datasets(p_payload jsonb) -> SETOF metastore.dataset_mention',
        'metastore.feed_seq(p_cursor text) -> bigint',
        'metastore.feed_sequenced() -> boolean',
        'metastore.facet_text(p_value jsonb) -> text',
        'metastore.forward_ack(p_target text, p_owner text, p_cursor text, p_sent integer, p_refused integer DEFAULT 0, p_error text DEFAULT NULL::text) -> boolean',
        'metastore.forward_claim(p_target text, p_owner text, p_lease_seconds integer DEFAULT 30) -> TABLE(claimed boolean, cursor text)',
        'metastore.field_lineage(p_id bigint, p_field text, p_direction text DEFAULT ''both''::text, p_depth integer DEFAULT 3, p_node_limit integer DEFAULT 200) -> jsonb',
        'metastore.forward_status() -> jsonb',
        'metastore.forward_page(p_cursor text, p_limit integer DEFAULT 100, p_max_bytes integer DEFAULT 4194304) -> TABLE(cursor text, event_id bigint, payload text)',
        'metastore.forward_position(p_cursor text, OUT xact_id xid8, OUT event_id bigint) -> record',
        'metastore.forward_refused(p_target text, p_owner text, p_event_id bigint, p_cursor text, p_status integer, p_body text) -> boolean',
        'metastore.forward_remove(p_target text) -> boolean',
        'metastore.get_dataset(p_id bigint, p_events_limit integer DEFAULT 50) -> jsonb',
        'metastore.get_job(p_id bigint, p_runs_limit integer DEFAULT 50) -> jsonb',
        'metastore.get_run(p_id bigint) -> jsonb',
        'metastore.group_role(p_kind text) -> text',
        'metastore.hidden_list(p_all boolean DEFAULT false) -> jsonb',
        'metastore.hidden_names(OUT dataset_ids bigint[], OUT job_ids bigint[], OUT job_edge_keys bytea[], OUT namespaces text[]) -> record',
        'metastore.hide(p_kind text, p_namespace text, p_name text DEFAULT NULL::text, p_reason text DEFAULT NULL::text) -> jsonb',
        'metastore.ingest_checked(p_bodies bytea[], p_payloads jsonb[], p_checked metastore.checked_event[], p_source_kind text, p_source_principal text) -> TABLE(status text, event_id bigint, error_code text, error_message text, event_type text)',
        'metastore.ingest_batch(p_body bytea, p_source_kind text DEFAULT ''unauthenticated''::text, p_source_principal text DEFAULT NULL::text, OUT status text, OUT result jsonb) -> record',
        'metastore.ingest_event(p_body bytea, p_source_kind text DEFAULT ''unauthenticated''::text, p_source_principal text DEFAULT NULL::text, OUT status text, OUT event_id bigint, OUT error_code text, OUT error_message text, OUT event_type text) -> record',
        'metastore.ingest_events(p_bodies bytea[], p_source_kind text DEFAULT ''unauthenticated''::text, p_source_principal text DEFAULT NULL::text) -> TABLE(status text, event_id bigint, error_code text, error_message text, event_type text)',
        'metastore.json_has_unique_keys(p_json text, p_parsed jsonb) -> boolean',
        'metastore.json_text(p_value jsonb, p_path text, p_max_bytes integer, p_required boolean DEFAULT true) -> text',
        'metastore.lineage_graph(p_id bigint, p_direction text, p_depth integer, p_node_limit integer, p_include text) -> jsonb',
        'metastore.list_datasets(p_limit integer DEFAULT 100, p_cursor text DEFAULT NULL::text, p_namespace text DEFAULT NULL::text, p_scheme text DEFAULT NULL::text, p_kind text DEFAULT NULL::text, p_q text DEFAULT NULL::text) -> jsonb',
        'metastore.lock_events_briefly() -> bigint',
        'metastore.mention_key(p_namespace text, p_name text) -> text',
        'metastore.list_jobs(p_limit integer DEFAULT 100, p_cursor text DEFAULT NULL::text, p_namespace text DEFAULT NULL::text, p_q text DEFAULT NULL::text) -> jsonb',
        'metastore.list_jobs(p_limit integer, p_cursor text, p_namespace text, p_q text, p_sort text, p_state text, p_user text) -> jsonb',
        'metastore.list_namespaces(p_limit integer DEFAULT 1000) -> jsonb',
        'metastore.list_runs(p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL::text, p_state text DEFAULT NULL::text, p_user text DEFAULT NULL::text, p_source text DEFAULT NULL::text, p_job_namespace text DEFAULT NULL::text, p_dataset_id bigint DEFAULT NULL::bigint, p_from text DEFAULT NULL::text, p_to text DEFAULT NULL::text) -> jsonb',
        'metastore.malformed_datasets(p_payload jsonb, p_item jsonb) -> jsonb',
        'metastore.partitions_ahead() -> integer',
        'metastore.read_event(p_body bytea, OUT payload jsonb, OUT checked metastore.checked_event) -> record',
        'metastore.read_sequenced_events(p_limit integer, p_cursor text, p_event_time_from timestamp with time zone, p_event_time_to timestamp with time zone, p_received_from timestamp with time zone, p_received_to timestamp with time zone, p_job_namespace text, p_job_name text, p_dataset_namespace text, p_dataset_name text, p_event_type text) -> TABLE(event text, cursor text, more boolean)',
        'metastore.read_events(p_limit integer DEFAULT 100, p_cursor text DEFAULT NULL::text, p_event_time_from text DEFAULT NULL::text, p_event_time_to text DEFAULT NULL::text, p_received_from text DEFAULT NULL::text, p_received_to text DEFAULT NULL::text, p_job_namespace text DEFAULT NULL::text, p_job_name text DEFAULT NULL::text, p_dataset_namespace text DEFAULT NULL::text, p_dataset_name text DEFAULT NULL::text, p_event_type text DEFAULT NULL::text) -> TABLE(event text, cursor text, more boolean)',
        'metastore.record_rejection(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) -> void',
        'metastore.reject_event(p_body bytea, p_sqlstate text, p_reason text, p_source_kind text, p_source_principal text) -> void',
        'metastore.roll_up_datasets(p_dataset_ids bigint[] DEFAULT NULL::bigint[]) -> bigint',
        'metastore.schema_version() -> bigint',
        'metastore.sequence_feed() -> integer',
        'metastore.search(p_q text, p_limit integer DEFAULT 20) -> jsonb',
        'metastore.search_substrings(p_lq text, p_like text, p_sample integer, p_scan integer, p_scan_jobs integer, p_hidden_datasets bigint[], p_hidden_jobs bigint[], p_hidden_namespaces text[]) -> TABLE(type text, id bigint, namespace text, name text, kind text, lname text)',
        'metastore.store_events(p_payloads jsonb[], p_events metastore.valid_event[], p_source_kind text DEFAULT ''unauthenticated''::text, p_source_principal text DEFAULT NULL::text) -> TABLE(event_id bigint, duplicate boolean)',
        'metastore.unhide(p_kind text, p_namespace text, p_name text DEFAULT NULL::text) -> jsonb',
        'metastore.use_group_roles(p_app text DEFAULT NULL::text, p_reader text DEFAULT NULL::text) -> jsonb',
        'metastore.validate_event(p_payload jsonb) -> metastore.valid_event',
        'metastore.write_probe() -> boolean'
    ];
    v_expected text[];
    v_missing  text;
    v_extra    text;
BEGIN
    -- Types print qualified unless in pg_catalog: the same text whatever path the caller has.
    PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
    -- Functions of the migrations, from the change that makes each.
    SELECT c_functions || pg_catalog.array_agg(m.f) INTO v_expected
      FROM (VALUES (1, 'metastore.forbid_change() -> trigger'),
                   (2, 'metastore.settings_keep_row() -> trigger'),
                   (5, 'metastore.dataset_key(p_namespace text, p_name text) -> bytea'),
                   (8, 'metastore.forward_key(p_url text) -> text'),
                   (9, 'metastore.note_field_names() -> trigger'),
                   (9, 'metastore.search_key(p_text text) -> bytea'),
                   (9, 'metastore.name_tail(p_name text) -> text')) AS m (v, f)
     WHERE m.v IN (SELECT s.version FROM metastore_migrations.schema_version AS s);
    WITH actual AS (
        SELECT 'metastore.' || p.proname || '(' || pg_catalog.pg_get_function_arguments(p.oid) || ')'
               || coalesce(' -> ' || pg_catalog.pg_get_function_result(p.oid), '') AS f
          FROM pg_catalog.pg_proc AS p
         WHERE p.pronamespace = 'metastore'::regnamespace)
    SELECT (SELECT pg_catalog.string_agg(e.f, '; ' ORDER BY e.f) FROM pg_catalog.unnest(v_expected) AS e (f)
             WHERE e.f NOT IN (SELECT a.f FROM actual AS a)),
           (SELECT pg_catalog.string_agg(a.f, '; ' ORDER BY a.f) FROM actual AS a
             WHERE a.f <> ALL (v_expected))
      INTO v_missing, v_extra;
    ASSERT v_missing IS NULL AND v_extra IS NULL,
        pg_catalog.format('the functions of schema metastore are not this release''s (db/verify/functions.sql): '
                          'missing or changed: %s; not in the list: %s',
                          coalesce(v_missing, 'none'), coalesce(v_extra, 'none'));
END
$exact$;
