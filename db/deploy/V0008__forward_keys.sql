-- Forwarding targets are named without their credentials. A target was named by its whole URL,
-- user:password@ and query string included: a new password (or token) made another target, which
-- sent every event again from the first, and the old one stayed listed. The name is now the URL
-- without user info, with every query value replaced by *** and without the ingest path, so that a
-- new password, token, or the ingest URL given instead of the base URL keeps the target's cursor.
--
-- forward_key is defined here, not in db/functions: its results are stored (the names of
-- forward_targets, which forward_claim and forward_ack look up by it), so a change to it takes a
-- new change that renames the rows as well (db/CONVENTIONS.md).
CREATE FUNCTION metastore.forward_key(p_url text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_base  text := split_part(p_url, '#', 1);
    v_query text;
    v_part  text;
    v_cut   text;
    v_shown text[] := '{}';
BEGIN
    IF strpos(v_base, '?') > 0 THEN
        v_query := substr(v_base, strpos(v_base, '?') + 1);
        v_base := substr(v_base, 1, strpos(v_base, '?') - 1);
    END IF;
    -- User info: everything of the authority up to its last @.
    v_base := regexp_replace(v_base, '^([A-Za-z][A-Za-z0-9+.-]*://)[^/]*@', '\1');
    -- The ingest path and trailing slashes, until none is left (so that the key of a key is itself):
    -- the base URL and the ingest URL are one target.
    LOOP
        v_cut := regexp_replace(v_base, '(/api/v1/lineage)?/*$', '');
        EXIT WHEN v_cut = v_base;
        v_base := v_cut;
    END LOOP;
    -- Any query value may be a token: only the names stay (a part without = is all value).
    FOREACH v_part IN ARRAY coalesce(string_to_array(v_query, '&'), '{}') LOOP
        CONTINUE WHEN v_part = '';
        v_shown := v_shown || CASE WHEN strpos(v_part, '=') > 0 THEN split_part(v_part, '=', 1) || '=***'
                                   ELSE '***' END;
    END LOOP;
    RETURN v_base || CASE WHEN cardinality(v_shown) > 0 THEN '?' || array_to_string(v_shown, '&') ELSE '' END;
END
$fn$;

COMMENT ON FUNCTION metastore.forward_key(text) IS
    'The name of a forwarding target: its URL without user info, fragment, ingest path (/api/v1/lineage) '
    'and trailing slashes, each query value replaced by ***. Idempotent; service/metastore/outbound.py '
    'computes the same (target_key).';
REVOKE ALL ON FUNCTION metastore.forward_key(text) FROM PUBLIC;

ALTER TABLE metastore.forward_targets
    ADD COLUMN failures      integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    ADD COLUMN failing_since timestamptz;
COMMENT ON COLUMN metastore.forward_targets.failures IS
    'Attempts in a row that ended without an answer judging the event (no answer, 401, 403, 404, 408, 413, '
    '429, 5xx, a redirect not followed): retried with backoff; 0 once an attempt ends well.';
COMMENT ON COLUMN metastore.forward_targets.failing_since IS 'When the current run of failures began (null: none).';
COMMENT ON COLUMN metastore.forward_targets.refused IS
    'Events the target judged and refused (400 or 422): skipped, and kept in metastore.forward_refusals.';

-- The events a target judged and refused, with its answer, for the operator to act on. Bounded:
-- the body is cut to 2000 characters and forward_refused keeps the newest 1000 per target.
CREATE TABLE metastore.forward_refusals (
    target     text        NOT NULL REFERENCES metastore.forward_targets (name) ON UPDATE CASCADE ON DELETE CASCADE,
    event_id   bigint      NOT NULL,
    cursor     text        NOT NULL,
    status     integer     NOT NULL CHECK (status IN (400, 422)),
    body       text        NOT NULL CHECK (pg_catalog.length(body) <= 2000),
    refused_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    PRIMARY KEY (target, event_id)
);
COMMENT ON TABLE metastore.forward_refusals IS
    'Events a forwarding target refused with 400 or 422 (the answers that judge an event): its status and the '
    'start of its body (credentials of the URL replaced by ***), the newest 1000 per target. Written by '
    'metastore.forward_refused.';

-- Existing targets take their new names. Rows that now share a name (the same target under two
-- passwords) become one: the cursor furthest in the feed (the events before it reached the target
-- under one password or the other), the counts added up. An error stored under a name that held
-- credentials may quote them: it is dropped.
CREATE TEMPORARY TABLE forward_rekey ON COMMIT DROP AS
SELECT t.name,
       metastore.forward_key(t.name) AS key,
       pg_catalog.row_number() OVER (PARTITION BY metastore.forward_key(t.name)
                                     ORDER BY p.xact DESC NULLS LAST, p.id DESC NULLS LAST, t.updated_at DESC) AS n,
       pg_catalog.sum(t.sent) OVER w AS sent,
       pg_catalog.sum(t.refused) OVER w AS refused,
       t.name ~ '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@' OR pg_catalog.strpos(t.name, '?') > 0 AS had_credentials
  FROM metastore.forward_targets AS t
  LEFT JOIN LATERAL (
      SELECT pg_catalog.split_part(c.pos, ':', 1)::numeric AS xact, pg_catalog.split_part(c.pos, ':', 2)::bigint AS id
        FROM (SELECT pg_catalog.convert_from(pg_catalog.decode(pg_catalog.translate(t.cursor, '-_', '+/'), 'base64'),
                                             'UTF8') AS pos) AS c
  ) AS p ON t.cursor IS NOT NULL
WINDOW w AS (PARTITION BY metastore.forward_key(t.name));

DELETE FROM metastore.forward_targets AS t USING forward_rekey AS r WHERE t.name = r.name AND r.n > 1;
UPDATE metastore.forward_targets AS t
   SET name = r.key,
       sent = r.sent,
       refused = r.refused,
       last_error = CASE WHEN r.had_credentials THEN NULL ELSE t.last_error END,
       last_error_at = CASE WHEN r.had_credentials THEN NULL ELSE t.last_error_at END
  FROM forward_rekey AS r
 WHERE t.name = r.name AND r.n = 1;
