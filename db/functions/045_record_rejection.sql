-- The one place that records a refused event: a bounded prefix, the size and the hash of the
-- body, never the whole body (issue: rejected bodies kept whole, forever).
CREATE OR REPLACE FUNCTION metastore.record_rejection(
    p_body             bytea,
    p_sqlstate         text,
    p_reason           text,
    p_source_kind      text,
    p_source_principal text
) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    c_prefix_bytes constant integer := 4096;
    v_cut          integer := c_prefix_bytes;
    v_prefix       bytea;
    v_text         text;
    v_codes        integer[] := '{}';
    v_i            integer := 0;
    v_n            integer;
    v_byte         integer;
    v_len          integer;
    v_code         integer;
BEGIN
    IF p_body IS NOT NULL THEN
        -- Cut at a character boundary: step back over the continuation bytes (10xxxxxx) that
        -- follow the cut, so that no character is split.
        WHILE v_cut > c_prefix_bytes - 3 AND v_cut < pg_catalog.octet_length(p_body)
              AND (pg_catalog.get_byte(p_body, v_cut) & 192) = 128 LOOP
            v_cut := v_cut - 1;
        END LOOP;
        v_prefix := pg_catalog.substr(p_body, 1, v_cut);
        BEGIN
            v_text := pg_catalog.convert_from(v_prefix, 'UTF8');
        EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
            v_text := NULL;
        END;
        IF v_text IS NULL THEN
            -- Not UTF-8 (or a NUL byte): decode leniently, one character at a time, each byte
            -- that does not start a well-formed character becoming U+FFFD.
            v_n := pg_catalog.octet_length(v_prefix);
            WHILE v_i < v_n LOOP
                v_byte := pg_catalog.get_byte(v_prefix, v_i);
                v_len := CASE WHEN v_byte BETWEEN 1 AND 127 THEN 1
                              WHEN v_byte BETWEEN 194 AND 223 THEN 2
                              WHEN v_byte BETWEEN 224 AND 239 THEN 3
                              WHEN v_byte BETWEEN 240 AND 244 THEN 4
                              ELSE 0 END;
                v_code := CASE v_len WHEN 1 THEN v_byte WHEN 2 THEN v_byte & 31 WHEN 3 THEN v_byte & 15
                                     WHEN 4 THEN v_byte & 7 END;
                IF v_len = 0 OR v_i + v_len > v_n THEN
                    v_len := 0;
                ELSE
                    FOR v_k IN 1 .. v_len - 1 LOOP
                        v_byte := pg_catalog.get_byte(v_prefix, v_i + v_k);
                        IF (v_byte & 192) <> 128 THEN
                            v_len := 0;
                            EXIT;
                        END IF;
                        v_code := (v_code << 6) | (v_byte & 63);
                    END LOOP;
                END IF;
                -- Overlong forms, surrogates and code points past U+10FFFF are not characters.
                IF v_len = 0 OR (v_len = 3 AND (v_code < 2048 OR v_code BETWEEN 55296 AND 57343))
                   OR (v_len = 4 AND (v_code < 65536 OR v_code > 1114111)) THEN
                    v_codes := v_codes || 65533;
                    v_i := v_i + 1;
                ELSE
                    v_codes := v_codes || v_code;
                    v_i := v_i + v_len;
                END IF;
            END LOOP;
            v_text := (SELECT pg_catalog.string_agg(pg_catalog.chr(c.code), '' ORDER BY c.o)
                         FROM pg_catalog.unnest(v_codes) WITH ORDINALITY AS c (code, o));
        END IF;
    END IF;

    INSERT INTO metastore.rejected_events (body_prefix, body_bytes, body_sha256, sqlstate, reason,
                                           source_kind, source_principal)
    VALUES (v_text, pg_catalog.octet_length(p_body),
            pg_catalog.sha256(p_body), p_sqlstate, p_reason, p_source_kind, p_source_principal);
END
$fn$;

COMMENT ON FUNCTION metastore.record_rejection(bytea, text, text, text, text) IS
    'Records a refused event in metastore.rejected_events: the first 4096 bytes of p_body as text (decoded '
    'leniently), its size and sha256 (all null when p_body is null), the SQLSTATE and reason, and the source '
    '(already checked by metastore.check_source). Internal: the ingest functions and metastore.reject_event '
    'call it.';

REVOKE ALL ON FUNCTION metastore.record_rejection(bytea, text, text, text, text) FROM PUBLIC;
