-- Says what is wrong with an event's inputs, outputs or DatasetEvent dataset, by raising it: the
-- slow path of metastore.extract_datasets, which calls it only when its own checks found a member
-- it cannot read. It walks the members in extract_datasets' order (inputs, outputs, dataset; each
-- item's namespace before its name) and raises the first fault, so the message does not depend on
-- the order in which a plan happened to evaluate the items.
-- p_item, the item extract_datasets could not read, is not needed to find the fault: it is there so
-- that no call has only constant arguments. The planner evaluates a stable call whose arguments are
-- all constants while it plans (estimating a selectivity), even in a branch of a CASE that never
-- runs for that event, and so raised for a valid event sent as a literal. VOLATILE would avoid that
-- too, but would keep the planner from flattening extract_datasets into its caller.
CREATE OR REPLACE FUNCTION metastore.malformed_datasets(p_payload jsonb, p_item jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    v_key  text;
    v_list jsonb;
    v_item jsonb;
    v_pos  bigint;
    v_path text;
BEGIN
    FOREACH v_key IN ARRAY ARRAY['inputs', 'outputs', 'dataset'] LOOP
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
            PERFORM metastore.json_text(v_item -> 'namespace', v_path || '.namespace', NULL),
                    metastore.json_text(v_item -> 'name', v_path || '.name', NULL);
        END LOOP;
    END LOOP;
    -- extract_datasets saw a fault that this walk does not: the two disagree on the rules.
    RAISE EXCEPTION USING
        ERRCODE = 'XX000',
        MESSAGE = 'metastore.extract_datasets found a malformed dataset that metastore.malformed_datasets does not';
END
$fn$;

COMMENT ON FUNCTION metastore.malformed_datasets(jsonb, jsonb) IS
    'Raises what is wrong with the inputs, outputs or DatasetEvent dataset of p_payload (the first fault, '
    'in order; p_item, the item extract_datasets could not read, is unused); never returns. Called by metastore.extract_datasets only for an event its checks refuse. '
    'Error codes: 22023 a member that is not an array of objects with non-empty string namespace and name; '
    'XX000 no such fault (the two functions disagree).';

REVOKE ALL ON FUNCTION metastore.malformed_datasets(jsonb, jsonb) FROM PUBLIC;
