-- The extraction rules, in one place: live ingest and backfill both call this.
CREATE OR REPLACE FUNCTION metastore.extract_datasets(p_payload jsonb)
RETURNS SETOF metastore.dataset_mention
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_key       text;
    v_direction text;
    v_list      jsonb;
    v_item      jsonb;
    v_pos       bigint;
    v_path      text;
    v_ident     jsonb;
    v_row       metastore.dataset_mention;
BEGIN
    FOR v_key, v_direction IN
        SELECT k, d FROM (VALUES ('inputs', 'input'), ('outputs', 'output'), ('dataset', 'none')) AS t (k, d)
    LOOP
        v_list := p_payload -> v_key;
        CONTINUE WHEN v_list IS NULL OR jsonb_typeof(v_list) = 'null';
        IF v_key = 'dataset' THEN
            -- Only a DatasetEvent's dataset counts; a stray "dataset" key elsewhere is ignored.
            CONTINUE WHEN metastore.event_kind(p_payload) IS DISTINCT FROM 'dataset';
            v_list := jsonb_build_array(v_list);
        ELSIF jsonb_typeof(v_list) <> 'array' THEN
            RAISE EXCEPTION USING
                ERRCODE = '22023',
                MESSAGE = format('"%s" must be an array of datasets, not a JSON %s', v_key, jsonb_typeof(v_list));
        END IF;

        FOR v_item, v_pos IN SELECT a.e, a.o - 1 FROM jsonb_array_elements(v_list) WITH ORDINALITY AS a (e, o) LOOP
            v_path := CASE WHEN v_key = 'dataset' THEN 'dataset' ELSE format('%s[%s]', v_key, v_pos) END;
            IF jsonb_typeof(v_item) <> 'object' THEN
                RAISE EXCEPTION USING
                    ERRCODE = '22023',
                    MESSAGE = format('"%s" must be an object with "namespace" and "name"', v_path);
            END IF;
            -- Of any length: no index holds a whole name (change 5, metastore.dataset_key).
            v_row := ROW(metastore.json_text(v_item -> 'namespace', v_path || '.namespace', NULL),
                         metastore.json_text(v_item -> 'name', v_path || '.name', NULL),
                         v_direction, NULL, NULL, NULL);
            RETURN NEXT v_row;

            -- Facets are free-form: a malformed identifier is skipped rather than
            -- costing the whole event (the raw event keeps it for a later backfill).
            CONTINUE WHEN jsonb_typeof(v_item #> '{facets,symlinks,identifiers}') IS DISTINCT FROM 'array';
            v_row.symlink_of_namespace := v_row.namespace;
            v_row.symlink_of_name := v_row.name;
            FOR v_ident IN SELECT jsonb_array_elements(v_item #> '{facets,symlinks,identifiers}') LOOP
                CONTINUE WHEN jsonb_typeof(v_ident) IS DISTINCT FROM 'object'
                    OR jsonb_typeof(v_ident -> 'namespace') IS DISTINCT FROM 'string'
                    OR jsonb_typeof(v_ident -> 'name') IS DISTINCT FROM 'string'
                    OR v_ident ->> 'namespace' = '' OR v_ident ->> 'name' = ''
                    OR (v_ident ->> 'namespace' = v_row.symlink_of_namespace
                        AND v_ident ->> 'name' = v_row.symlink_of_name);
                v_row.namespace := v_ident ->> 'namespace';
                v_row.name := v_ident ->> 'name';
                v_row.symlink_type := CASE WHEN jsonb_typeof(v_ident -> 'type') = 'string'
                                           THEN left(v_ident ->> 'type', 200) ELSE '' END;
                RETURN NEXT v_row;
            END LOOP;
        END LOOP;
    END LOOP;
END
$fn$;

COMMENT ON FUNCTION metastore.extract_datasets(jsonb) IS
    'The datasets an OpenLineage event mentions, one row per mention: its inputs (direction input), '
    'its outputs (output), a DatasetEvent''s dataset (none), and every symlinks-facet identifier of those '
    '(same direction, with symlink_of_* naming the dataset that carries it). Nothing else. '
    'Namespaces and names may be of any length. Error codes: 22023 malformed inputs/outputs/dataset.';

REVOKE ALL ON FUNCTION metastore.extract_datasets(jsonb) FROM PUBLIC;
