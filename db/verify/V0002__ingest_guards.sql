-- Verifies V0002: the settings (one row, owner-only), the bounded shape of rejected_events, and
-- the trigram index where pg_trgm is installed. Run in a transaction that is rolled back.
SELECT event_time_past, event_time_future, max_batch_events FROM metastore.settings WHERE false;
SELECT id, body_prefix, body_bytes, body_sha256, sqlstate, reason, received_at, source_kind, source_principal
  FROM metastore.rejected_events WHERE false;

DO $verify$
DECLARE
    v_role text;
    v_priv text;
BEGIN
    ASSERT (SELECT pg_catalog.count(*) FROM metastore.settings) = 1, 'metastore.settings must hold one row';
    ASSERT (SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger
             WHERE tgrelid = 'metastore.settings'::regclass AND NOT tgisinternal AND tgenabled = 'O') = 2,
        'metastore.settings must keep its row (settings_keep_row triggers)';
    FOREACH v_role IN ARRAY ARRAY['metastore_app', 'metastore_reader', 'public'] LOOP
        FOREACH v_priv IN ARRAY ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'] LOOP
            ASSERT NOT pg_catalog.has_table_privilege(v_role, 'metastore.settings', v_priv),
                pg_catalog.format('%s must not have %s on metastore.settings', v_role, v_priv);
        END LOOP;
    END LOOP;

    -- Bodies are not kept whole any more; provenance follows the rules of metastore.events.
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                        WHERE attrelid = 'metastore.rejected_events'::regclass AND attname = 'payload'
                          AND NOT attisdropped),
        'metastore.rejected_events must not keep whole bodies (payload)';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint
                    WHERE conrelid = 'metastore.rejected_events'::regclass
                      AND conname = 'rejected_events_source_kind_check' AND convalidated),
        'metastore.rejected_events.source_kind must be checked';
    ASSERT EXISTS (SELECT FROM pg_catalog.pg_constraint
                    WHERE conrelid = 'metastore.rejected_events'::regclass
                      AND conname = 'rejected_events_principal_needs_kind' AND convalidated),
        'metastore.rejected_events.source_principal must need a kind';

    ASSERT EXISTS (SELECT FROM pg_catalog.pg_statistic_ext
                    WHERE stxrelid = 'metastore.datasets'::regclass AND stxname = 'datasets_lower_name'),
        'metastore.datasets_lower_name statistics are missing (the plan of a name search depends on them)';
    -- The trigram index is optional (pg_trgm may be missing); when there, it must be usable.
    ASSERT NOT EXISTS (SELECT FROM pg_catalog.pg_index
                        WHERE indexrelid = pg_catalog.to_regclass('metastore.datasets_name_trgm_idx')
                          AND NOT (indisvalid AND indisready)),
        'metastore.datasets_name_trgm_idx is not valid: drop it and CREATE INDEX CONCURRENTLY it again';
END
$verify$;
