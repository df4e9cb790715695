-- What is hidden (and, with p_all, what was), for the owner: metastore db hide --list.
CREATE OR REPLACE FUNCTION metastore.hidden_list(p_all boolean DEFAULT false) RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET "TimeZone" = 'UTC'
AS $fn$
BEGIN
    RETURN jsonb_build_object('hidden', (
        SELECT coalesce(jsonb_agg(to_jsonb(h) - 'name_key' ORDER BY h.id), '[]')
          FROM metastore.hidden AS h
         WHERE coalesce(p_all, false) OR h.unhidden_at IS NULL));
END
$fn$;

COMMENT ON FUNCTION metastore.hidden_list(boolean) IS
    'The entries of metastore.hidden in the order they were made: those hidden now, or with p_all every one, '
    'shown again or not (who and when for both). Owner only.';

REVOKE ALL ON FUNCTION metastore.hidden_list(boolean) FROM PUBLIC;
