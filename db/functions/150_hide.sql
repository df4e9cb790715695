-- Hide a dataset, a job, or every dataset and job of a namespace from the read API and the view
-- (metastore.hidden): the owner's, never the service's. Nothing is deleted.
CREATE OR REPLACE FUNCTION metastore.hide(
    p_kind      text,
    p_namespace text,
    p_name      text DEFAULT NULL,
    p_reason    text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    -- A record, not metastore.hidden: db/functions is applied before change 9 too.
    v_entry   record;
    v_already boolean := false;
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('dataset', 'job', 'namespace') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('kind must be dataset, job or namespace, not %s', coalesce(p_kind, 'null'));
    END IF;
    IF p_namespace IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'a namespace is required';
    END IF;
    IF (p_kind = 'namespace') <> (p_name IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = CASE WHEN p_kind = 'namespace' THEN 'a namespace is hidden by its name alone: no name'
                           ELSE format('a %s is hidden by its namespace and name', p_kind) END;
    END IF;
    IF octet_length(p_reason) > 2000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'the reason must be at most 2000 bytes';
    END IF;
    INSERT INTO metastore.hidden AS h (kind, namespace, name, reason, hidden_by, hidden_at)
    VALUES (p_kind, p_namespace, p_name, p_reason, session_user, clock_timestamp())
    ON CONFLICT (kind, name_key) WHERE unhidden_at IS NULL DO NOTHING
    RETURNING h.* INTO v_entry;
    IF NOT FOUND THEN
        -- Hidden already: said so, the entry as it was recorded.
        v_already := true;
        SELECT h.* INTO STRICT v_entry FROM metastore.hidden AS h
         WHERE h.kind = p_kind AND h.name_key = sha256(metastore.dataset_key(p_namespace, coalesce(p_name, '')))
           AND h.unhidden_at IS NULL;
    END IF;
    RETURN jsonb_build_object(
        'hidden', to_jsonb(v_entry) - 'name_key',
        'already_hidden', v_already,
        -- What it hides now; a name nothing has yet is hidden from when something has it.
        'datasets', CASE p_kind
                        WHEN 'dataset' THEN (SELECT count(*) FROM metastore.datasets AS d
                                              WHERE d.name_key = v_entry.name_key)
                        WHEN 'namespace' THEN (SELECT count(*) FROM metastore.datasets AS d
                                                WHERE d.namespace = p_namespace)
                        ELSE 0 END,
        'jobs', CASE p_kind
                    WHEN 'job' THEN (SELECT count(*) FROM metastore.jobs AS j WHERE j.name_key = v_entry.name_key)
                    WHEN 'namespace' THEN (SELECT count(*) FROM metastore.jobs AS j WHERE j.namespace = p_namespace)
                    ELSE 0 END);
END
$fn$;

COMMENT ON FUNCTION metastore.hide(text, text, text, text) IS
    'Hides a dataset (p_kind dataset, namespace and name), a job (job, namespace and name) or every dataset and '
    'job of a namespace (namespace, no name) from every read function: lists, details (404), search, lineage, '
    'runs'' inputs and outputs, counts, namespaces. By name, so that it stays hidden when a rebuild or a new '
    'event makes its row again, until metastore.unhide. Records who (session_user), when and why (p_reason). '
    'The events stay, and the event feed serves them. Returns {"hidden": the entry, "already_hidden", '
    '"datasets", "jobs": how many it hides now}. Owner only. Error codes: 22023 an unknown kind, no namespace, '
    'a name missing (dataset, job) or given (namespace), a reason over 2000 bytes.';

REVOKE ALL ON FUNCTION metastore.hide(text, text, text, text) FROM PUBLIC;
