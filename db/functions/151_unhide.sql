-- Show again what metastore.hide hid: the entry stays, with who showed it again and when.
CREATE OR REPLACE FUNCTION metastore.unhide(
    p_kind      text,
    p_namespace text,
    p_name      text DEFAULT NULL
) RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
DECLARE
    v_entry record;  -- not metastore.hidden: db/functions is applied before change 9 too
BEGIN
    IF p_kind IS NULL OR p_kind NOT IN ('dataset', 'job', 'namespace') THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('kind must be dataset, job or namespace, not %s', coalesce(p_kind, 'null'));
    END IF;
    IF p_namespace IS NULL OR (p_kind = 'namespace') <> (p_name IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'a namespace is named alone; a dataset or a job by its namespace and name';
    END IF;
    UPDATE metastore.hidden AS h
       SET unhidden_by = session_user, unhidden_at = clock_timestamp()
     WHERE h.kind = p_kind AND h.name_key = sha256(metastore.dataset_key(p_namespace, coalesce(p_name, '')))
       AND h.unhidden_at IS NULL
    RETURNING h.* INTO v_entry;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002',
            MESSAGE = format('no %s %s is hidden', p_kind,
                             CASE WHEN p_name IS NULL THEN p_namespace ELSE p_namespace || ' ' || p_name END);
    END IF;
    RETURN jsonb_build_object('unhidden', to_jsonb(v_entry) - 'name_key');
END
$fn$;

COMMENT ON FUNCTION metastore.unhide(text, text, text) IS
    'Shows again a dataset, job or namespace metastore.hide hid (same arguments), recording who (session_user) '
    'and when. Returns {"unhidden": the entry}. Owner only. Error codes: 22023 an unknown kind, no namespace, '
    'a name missing or given where it must not be; P0002 it is not hidden.';

REVOKE ALL ON FUNCTION metastore.unhide(text, text, text) FROM PUBLIC;
