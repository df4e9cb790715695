-- Verifies V0008: refusals are kept, failures counted, and every target is named by its key (no
-- credentials in any name).
SELECT target, event_id, cursor, status, body, refused_at FROM metastore.forward_refusals WHERE false;
SELECT failures, failing_since FROM metastore.forward_targets WHERE false;

DO $verify$
BEGIN
    ASSERT metastore.forward_key('https://u:p@h:1/x/api/v1/lineage/?token=t&flag#f') = 'https://h:1/x?token=***&***',
        'metastore.forward_key must drop user info, the ingest path and query values';
    ASSERT NOT EXISTS (SELECT FROM metastore.forward_targets AS t WHERE t.name <> metastore.forward_key(t.name)),
        'a forwarding target is named otherwise than by metastore.forward_key';
    ASSERT NOT pg_catalog.has_function_privilege(metastore.group_role('app'), 'metastore.forward_key(text)', 'EXECUTE')
       AND NOT pg_catalog.has_function_privilege(metastore.group_role('reader'), 'metastore.forward_key(text)', 'EXECUTE')
       AND NOT pg_catalog.has_function_privilege('public', 'metastore.forward_key(text)', 'EXECUTE'),
        'metastore.forward_key is reached only through the forwarding functions';
END
$verify$;
