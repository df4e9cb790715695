-- The generation every derivation writes with (metastore.derive_state): read once per set, after the
-- set's events are inserted. metastore.backfill starts a rebuild under a SHARE lock on
-- metastore.events, so a writer that inserted its events after the rebuild began also reads the new
-- generation here (READ COMMITTED: this statement's snapshot is newer than that commit).
CREATE OR REPLACE FUNCTION metastore.derive_generation() RETURNS integer
-- VOLATILE: FOR SHARE below; and a call must never be evaluated once for a whole statement.
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_generation integer;
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        SELECT s.generation INTO v_generation FROM metastore.derive_state AS s;
    ELSE
        -- A snapshot older than the transaction could miss a rebuild that started after it: the
        -- row lock makes such a transaction fail with 40001 (retry) instead of deriving with the
        -- generation the rebuild replaces.
        SELECT s.generation INTO v_generation FROM metastore.derive_state AS s FOR SHARE;
    END IF;
    IF v_generation IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '55000', MESSAGE = 'metastore.derive_state has no row: the deploy makes it, see V0005';
    END IF;
    RETURN v_generation;
END
$fn$;

COMMENT ON FUNCTION metastore.derive_generation() IS
    'The generation that derived rows are written with now (metastore.derive_state.generation). '
    'Error codes: 55000 metastore.derive_state has no row; 40001 (outside READ COMMITTED) a rebuild started '
    'after the transaction''s snapshot.';

REVOKE ALL ON FUNCTION metastore.derive_generation() FROM PUBLIC;
