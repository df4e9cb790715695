"""metastore.derive_lineage: schema versions, lineage edges and column lineage of stored events."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES, create_database, drop_database, ingest, load_fixture
from tests.lineage_rules import column_lineage, derive, lineage_edges
from tests.lineage_rules import state as lineage_state
from tests.support.derived import (
    derived_snapshot,
    stored_column_lineage,
)
from tests.support.lineage_events import (
    OUTPUT,
    SOURCE,
    TABLE,
    A,
    B,
    ctas,
    fixture_events,
    malformed_entries,
    spark_run,
    two_outputs,
)
from tests.support.rows import value
from tests.support.stats import xact_stat


def stored_edges(conn: psycopg.Connection[Any]) -> set[tuple[str, ...]]:
    return set(
        conn.execute(
            "SELECT u.namespace, u.name, w.namespace, w.name, e.job_namespace, e.job_name"
            " FROM metastore.lineage_edges e JOIN metastore.datasets u ON u.id = e.upstream_id"
            " JOIN metastore.datasets w ON w.id = e.downstream_id"
        ).fetchall()
    )


def count(conn: psycopg.Connection[Any], table: str) -> int:
    return int(value(conn, f"SELECT count(*) FROM metastore.{table}"))


def test_column_lineage_of_every_fixture_equals_its_facets(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    expected: set[tuple[Any, ...]] = set()
    expected_edges: set[tuple[str, ...]] = set()
    unlisted = 0
    with_facet = 0
    for event in fixture_events():
        status = ingest(service, event)[0]
        if status != "stored":
            continue
        edges = column_lineage(event)
        with_facet += bool(edges)
        expected |= edges
        expected_edges |= lineage_edges(event)
        listed = {(i["namespace"], i["name"]) for i in event.get("inputs") or []}
        unlisted += sum((e[3], e[4]) not in listed for e in edges)
    assert with_facet >= 8, "the fixtures with columnLineage were not all stored"
    assert stored_column_lineage(owner) == expected
    assert stored_edges(owner) == expected_edges
    # Both forms of the facet are there: per field and the dataset-level list; and an input field
    # whose dataset its event does not list among its inputs.
    assert any(e[2] is None for e in expected) and any(e[2] is not None for e in expected)
    assert any(e[6] == "INDIRECT" for e in expected) and any(e[6] == "" for e in expected)
    assert unlisted > 0


def test_each_fixture_alone_stores_exactly_its_facet(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    # The CLL fixture carries transformations with type and subtype; the Trino one none at all.
    for path in (
        FIXTURES / "openlineage" / "compatibility-tests" / "CLL" / "8.json",
        FIXTURES / "trino" / "04-ctas-complete.json",
    ):
        owner.execute("DELETE FROM metastore.column_lineage")
        event = load_fixture(path)
        event["eventTime"] = "2026-01-02T03:04:05Z" if "CLL" in str(path) else "2026-01-02T03:04:06Z"
        assert ingest(service, event)[0] == "stored"
        assert stored_column_lineage(owner) == column_lineage(event) != set()


def test_rows_grow_with_distinct_facts_not_with_events(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    assert ingest(service, ctas(0, "ctas"))[0] == "stored"
    before = {t: count(owner, t) for t in ("dataset_schema_versions", "lineage_edges", "column_lineage")}
    assert before == {"dataset_schema_versions": 2, "lineage_edges": 1, "column_lineage": 8}
    for i in range(1, 40):
        assert ingest(service, ctas(i, "ctas"))[0] == "stored"
    assert {t: count(owner, t) for t in before} == before
    # A resent event is a duplicate: nothing derived moves.
    snap = derived_snapshot(owner)
    assert ingest(service, ctas(39, "ctas"))[0] == "duplicate"
    assert derived_snapshot(owner) == snap
    # Trino names each query's job after the query: one edge per job, nothing else grows.
    for i in range(40, 60):
        assert ingest(service, ctas(i, f"query_{i}"))[0] == "stored"
    after = {t: count(owner, t) for t in before}
    assert after == {"dataset_schema_versions": 2, "lineage_edges": 21, "column_lineage": 8}
    # Seen again within the hour: not rewritten (last_seen is kept to the hour); later, it moves.
    seen = "SELECT min(last_seen)::text, max(last_seen)::text FROM metastore.column_lineage"
    assert owner.execute(seen).fetchone() == ("2026-01-01 00:00:00+00", "2026-01-01 00:00:00+00")
    assert ingest(service, ctas(99, "ctas", when="2026-01-01T05:00:00Z"))[0] == "stored"
    assert owner.execute(seen).fetchone() == ("2026-01-01 05:00:00+00", "2026-01-01 05:00:00+00")
    edge = "SELECT first_seen::text, last_seen::text FROM metastore.lineage_edges WHERE job_name = 'ctas'"
    assert owner.execute(edge).fetchone() == ("2026-01-01 00:00:00+00", "2026-01-01 05:00:00+00")


def test_schema_versions_and_current_fields(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    v1 = [{"name": "id", "type": "bigint"}]
    v2 = [{"name": "id", "type": "bigint"}, {"name": "address", "type": "row", "fields": [{"name": "city"}]}]
    for i, fields in enumerate([v1, v1, v2, v2]):
        assert ingest(service, ctas(i, "ctas", fields, f"2026-01-0{i + 1}T00:00:00Z"))[0] == "stored"
    out = owner.execute("SELECT id FROM metastore.datasets WHERE name = 'memory.default.nation_copy'").fetchone()
    assert out is not None
    page = service.execute("SELECT metastore.get_dataset(%s, 5)", (out[0],)).fetchone()
    assert page is not None
    dataset = page[0]
    assert dataset["fields"] == v2  # nested fields kept as sent
    assert [(v["field_count"], v["first_seen"][:10], v["last_seen"][:10]) for v in dataset["schema_versions"]] == [
        (2, "2026-01-03", "2026-01-04"),
        (1, "2026-01-01", "2026-01-02"),
    ]
    # An older event arriving late does not make its schema current.
    assert ingest(service, ctas(9, "ctas", v1, "2025-12-31T00:00:00Z"))[0] == "stored"
    page = service.execute("SELECT metastore.get_dataset(%s, 5)", (out[0],)).fetchone()
    assert page is not None and page[0]["fields"] == v2
    assert [v["first_seen"][:10] for v in page[0]["schema_versions"]] == ["2026-01-03", "2025-12-31"]
    first = owner.execute(
        "SELECT e.run_id FROM metastore.dataset_schema_versions v JOIN metastore.events e ON e.id = v.first_event_id"
        " WHERE v.dataset_id = %s AND jsonb_array_length(v.fields) = 1",
        (out[0],),
    ).fetchone()
    assert first == ("01900000-0000-7000-8000-000000000009",)
    # The dataset page: column lineage of its fields and one hop each way.
    cl = page[0]["column_lineage"]
    assert {(c["field"], c["input"]["name"], c["input_field"]) for c in cl} >= {
        ("name", "tpch.tiny.nation", "name"),
        (None, "tpch.tiny.nation", "regionkey"),
    }
    assert [(u["name"], u["jobs"]) for u in page[0]["upstream"]] == [("tpch.tiny.nation", 1)]
    assert page[0]["downstream"] == []


def test_backfill_rebuilds_the_same_derived_tables(
    owner: psycopg.Connection[Any], service: psycopg.Connection[Any]
) -> None:
    for event in fixture_events():
        ingest(service, event)
    for i in range(5):
        ingest(service, ctas(i, f"q{i % 2}", [{"name": f"c{i % 3}"}]))
    expected = derived_snapshot(owner)
    assert all(expected.values())
    owner.execute("DELETE FROM metastore.column_lineage")
    owner.execute("DELETE FROM metastore.lineage_edges WHERE job_name = 'q0'")
    owner.execute("UPDATE metastore.dataset_schema_versions SET last_seen = first_seen - interval '1 day'")
    owner.execute("CALL metastore.backfill(7)")
    assert derived_snapshot(owner) == expected


def test_datasets_are_found_by_key_not_by_a_scan(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Lineage, schema versions and column lineage of an event look its datasets up by name_key:
    with 100k datasets, storing a Trino CTAS scans no table of datasets or jobs."""
    owner.execute(
        "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)"
        " SELECT 'trino://seed:8080', 'seed.t' || i, 'dataset', now(), now() FROM generate_series(1, 100000) AS i"
    )
    owner.execute("ANALYZE metastore.datasets")
    assert ingest(service, ctas(0, "warm"))[0] == "stored"  # the same datasets exist: the steady state
    with service.transaction():
        assert ingest(service, ctas(1, "ctas"))[0] == "stored"
        assert ingest(service, ctas(2, "ctas"))[0] == "stored"
        scans = {t: xact_stat(service, t, "seq_scan") for t in ("datasets", "jobs", "runs")}
        assert scans == {"datasets": 0, "jobs": 0, "runs": 0}
    assert count(owner, "column_lineage") == 8


def test_an_edge_is_looked_up_alone_among_the_jobs_of_its_pair(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Trino names a job after its query: one table pair gains an edge per query. Deriving an event
    reads its own edges, not every job's edge of the pair, also in tables never analyzed, as in a
    fresh store (a backfill of such events was quadratic: backfill derives with the same statement)."""
    n = 80
    with service.transaction():
        for i in range(n):
            assert ingest(service, ctas(i, f"query_{i}"))[0] == "stored"
        assert xact_stat(service, "lineage_edges", "idx_tup_fetch") < 3 * n  # all of the pair's: n * (n - 1) / 2
    assert count(owner, "lineage_edges") == n


def test_ingest_goes_on_after_reverting_v0006_and_v0007(empty_db: Any) -> None:
    """A revert drops the layer's tables and the functions that derive into them; store_events (still
    the newer one until the older release deploys its functions) skips them and stores the event."""
    from metastore import ledger, migrations

    dsn = empty_db.owner_dsn
    migrations.deploy(dsn)
    # With every newer change, newest first.
    assert migrations.revert(dsn, 5) == sorted((c.version for c in ledger.changes() if c.version > 5), reverse=True)
    with psycopg.connect(dsn, autocommit=True) as owner:
        assert ingest(owner, ctas(0, "ctas"))[0] == "stored"
        gone = owner.execute(
            "SELECT to_regclass('metastore.column_lineage'), to_regclass('metastore.runs'),"
            " to_regprocedure('metastore.derive_lineage(bigint[], jsonb[], metastore.valid_event[], jsonb)'),"
            " to_regprocedure('metastore.derive_job_run(jsonb[], metastore.valid_event[])')"
        ).fetchone()
        assert gone == (None, None, None, None)
    migrations.deploy(dsn)
    with psycopg.connect(dsn, autocommit=True) as owner:
        owner.execute("CALL metastore.backfill()")
        assert count(owner, "column_lineage") == 8


def test_a_wide_event_on_a_young_store_looks_its_edges_up_by_key(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Edges are inputs x outputs. On a store of a hundred events, analyzed (autovacuum does so
    early), the plan checked each new edge with a scan of lineage_edges, rows just inserted
    included: quadratic in the edges (an event of 200 inputs and 200 outputs took 33 s)."""
    for i in range(100):
        event = ctas(i, f"small_{i}")
        event["inputs"] = [{"namespace": "n", "name": f"a{i}"}]
        event["outputs"] = [{"namespace": "n", "name": f"b{i}"}]
        assert ingest(service, event)[0] == "stored"
    owner.execute("ANALYZE")
    wide = ctas(100, "wide")
    wide["inputs"] = [{"namespace": "n", "name": f"in{k}"} for k in range(60)]
    wide["outputs"] = [{"namespace": "n", "name": f"out{k}"} for k in range(60)]
    with psycopg.connect(service.info.dsn, autocommit=True) as fresh, fresh.transaction():
        assert ingest(fresh, wide)[0] == "stored"
        tables = ("lineage_edges", "dataset_schema_versions", "column_lineage")
        assert {t: xact_stat(fresh, t, "seq_scan") for t in tables} == dict.fromkeys(tables, 0)
    assert count(owner, "lineage_edges") == 100 + 60 * 60


def test_a_set_resolves_each_events_input_fields_as_the_event_alone_would(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """An input field names its dataset whether its event lists it or not, and another event of the
    same set listing it changes nothing: a set derives what its events derive one by one (ingest
    takes sets, backfill takes a thousand events per call)."""
    stray = ctas(0, "stray")
    outputs = stray["outputs"][0]["facets"]["columnLineage"]["fields"]
    field = next(iter(outputs))
    outputs[field]["inputFields"].append({"namespace": "elsewhere", "name": "other.t", "field": "x"})
    mentions_it = ctas(1, "other")
    mentions_it["inputs"] = [{"namespace": "elsewhere", "name": "other.t"}]
    alone = column_lineage(stray) | column_lineage(mentions_it)
    assert any(row[3] == "elsewhere" for row in column_lineage(stray))
    bodies = [json.dumps(e).encode() for e in (stray, mentions_it)]
    rows = service.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies,)).fetchall()
    assert rows == [("stored",), ("stored",)]
    expected = lineage_state([stray, mentions_it])
    assert stored_column_lineage(owner) == alone
    assert stored_state(owner) == expected
    owner.execute("CALL metastore.backfill(1000)")
    assert stored_state(owner) == expected


def test_fields_and_transformations_that_are_not_lists_are_ignored(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """SQL's AND does not stop at a false first operand: the length of an object was asked for and
    the event failed (400 in sync mode; in async mode a group that failed so was retried for ever)."""
    event = ctas(0, "odd")
    event["outputs"][0]["facets"]["schema"]["fields"] = {"name": "a"}
    cl = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    for field in cl.values():
        for inp in field["inputFields"]:
            inp["transformations"] = {"type": "DIRECT"}
    assert ingest(service, event)[0] == "stored"
    assert count(owner, "column_lineage") > 0
    versions = owner.execute("SELECT count(*) FROM metastore.dataset_schema_versions").fetchone()
    assert versions == (1,)  # the input's list; the output's object says nothing


def stored_state(conn: psycopg.Connection[Any]) -> dict[str, dict[Any, Any]]:
    """What tests.lineage_rules.state says a store holds, read from this one."""
    datasets = conn.execute(
        "SELECT namespace, name, kind, first_seen, last_seen, input_events, output_events"
        ' FROM metastore.datasets_view ORDER BY namespace COLLATE "C", name COLLATE "C"'
    ).fetchall()
    edges = conn.execute(
        "SELECT u.namespace, u.name, w.namespace, w.name, e.job_namespace, e.job_name, e.first_seen, e.last_seen"
        " FROM metastore.lineage_edges e JOIN metastore.datasets u ON u.id = e.upstream_id"
        " JOIN metastore.datasets w ON w.id = e.downstream_id"
    ).fetchall()
    columns = conn.execute(
        "SELECT o.namespace, o.name, nullif(c.output_field, ''), i.namespace, i.name, c.input_field,"
        " c.transformation_type, c.transformation_subtype, c.first_seen, c.last_seen"
        " FROM metastore.column_lineage c"
        " JOIN metastore.datasets o ON o.id = c.output_dataset_id"
        " JOIN metastore.datasets i ON i.id = c.input_dataset_id"
    ).fetchall()
    return {
        "datasets": {(r[0], r[1]): tuple(r[2:]) for r in datasets},
        "edges": {tuple(r[:6]): (r[6], r[7]) for r in edges},
        "columns": {tuple(r[:8]): (r[8], r[9]) for r in columns},
    }


def test_column_lineage_of_inputs_the_event_does_not_list(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A COMPLETE with empty inputs: the datasets its output's facet names are datasets like any other
    (kind, times, counts, links as inputs), the column edges are stored, and so are the dataset edges
    input -> output they imply, through the event's job."""
    done = spark_run("r1")[1]
    status, event_id, _, _ = ingest(service, done)
    assert status == "stored"
    expected = lineage_state([done])
    assert stored_state(owner) == expected
    assert len(expected["columns"]) == 3
    assert set(expected["edges"]) == {
        (SOURCE["namespace"], SOURCE["name"], OUTPUT["namespace"], OUTPUT["name"], "spark", "etl"),
        (TABLE["namespace"], TABLE["name"], OUTPUT["namespace"], OUTPUT["name"], "spark", "etl"),
    }
    assert expected["datasets"][(SOURCE["namespace"], SOURCE["name"])][0::3] == ("dataset", 1)
    links = owner.execute(
        "SELECT d.namespace, d.name, l.direction FROM metastore.event_datasets l"
        " JOIN metastore.datasets d ON d.id = l.dataset_id WHERE l.event_id = %s",
        (event_id,),
    ).fetchall()
    assert (
        set(links)
        == set(derive(done).links)
        == {
            (SOURCE["namespace"], SOURCE["name"], "input"),
            (TABLE["namespace"], TABLE["name"], "input"),
            (OUTPUT["namespace"], OUTPUT["name"], "output"),
        }
    )
    # The run's datasets are its events' links.
    run_datasets = owner.execute(
        "SELECT d.namespace, d.name, r.direction FROM metastore.run_datasets r"
        " JOIN metastore.datasets d ON d.id = r.dataset_id"
    ).fetchall()
    assert set(run_datasets) == set(links)
    # The dataset page of the output and the graph of the source show them.
    ids = dict(((ns, n), i) for i, ns, n in owner.execute("SELECT id, namespace, name FROM metastore.datasets"))
    page = service.execute("SELECT metastore.get_dataset(%s, 5)", (ids[(OUTPUT["namespace"], OUTPUT["name"])],))
    detail = page.fetchone()[0]  # type: ignore[index]
    assert {(c["input"]["name"], c["input_field"]) for c in detail["column_lineage"]} == {
        ("input_table", "stringCol"),
        ("input_table", "rowKey"),
        ("/data/in", "intCol"),
    }
    assert sorted(u["name"] for u in detail["upstream"]) == ["/data/in", "input_table"]
    source_id = ids[(SOURCE["namespace"], SOURCE["name"])]
    graph = service.execute("SELECT metastore.dataset_lineage(%s, 'downstream', 3, 200)", (source_id,))
    nodes = graph.fetchone()[0]["nodes"]  # type: ignore[index]
    assert sorted(n["name"] for n in nodes) == ["/data/out", "input_table"]


def test_inputs_in_the_start_event_only_give_the_same_store_in_any_order_and_split(
    pg_server: Any, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    events = spark_run("r1") + spark_run("r2", "2026-01-01T13:00:00Z", "2026-01-01T15:10:00Z")
    expected = lineage_state(events)
    for event in events:
        assert ingest(service, event)[0] == "stored"
    assert stored_state(owner) == expected
    # The START gave /data/in -> /data/out already; the COMPLETE widens it and adds the source's.
    assert [h.hour for h in expected["edges"][(*TABLE.values(), *OUTPUT.values(), "spark", "etl")]] == [10, 15]
    assert [h.hour for h in expected["edges"][(*SOURCE.values(), *OUTPUT.values(), "spark", "etl")]] == [12, 15]
    other = create_database(pg_server)
    try:
        with (
            psycopg.connect(other.service_dsn, autocommit=True) as conn,
            psycopg.connect(other.owner_dsn, autocommit=True) as other_owner,
        ):
            bodies = [json.dumps(e).encode() for e in reversed(events)]
            conn.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies[:3],)).fetchall()
            conn.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies[3:],)).fetchall()
            assert stored_state(other_owner) == expected
            other_owner.execute("CALL metastore.backfill(1)")
            assert stored_state(other_owner) == expected
    finally:
        drop_database(other)


def test_an_input_field_reaches_only_the_output_whose_facet_names_it(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Listed inputs reach every output of their event; a facet's input reaches its own output only."""
    event = two_outputs()
    assert ingest(service, event)[0] == "stored"
    assert (
        set(stored_state(owner)["edges"])
        == lineage_edges(event)
        == {
            (*TABLE.values(), *A.values(), "j", "split"),
            (*TABLE.values(), *B.values(), "j", "split"),
            (*SOURCE.values(), *A.values(), "j", "split"),
            (*OUTPUT.values(), *B.values(), "j", "split"),
        }
    )


def test_malformed_input_fields_are_skipped_and_the_event_kept(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The facet is free-form: an entry extraction cannot read is skipped (the raw event keeps it for a
    later backfill) as a malformed symlink identifier is, and the entries next to it are derived."""
    event = malformed_entries()
    status, _, code, message = ingest(service, event)
    assert status == "stored", (code, message)
    expected = lineage_state([event])
    assert set(expected["columns"]) == {(*OUTPUT.values(), "f", *SOURCE.values(), "ok", "", "")}
    assert stored_state(owner) == expected
    mentions = owner.execute("SELECT * FROM metastore.extract_datasets(%s::jsonb)", (json.dumps(event),)).fetchall()
    assert mentions[-1] == (*SOURCE.values(), "input", None, None, None) and len(mentions) == 5


def test_a_malformed_output_is_refused_as_before_whatever_its_facet_says(service: psycopg.Connection[Any]) -> None:
    """Extraction reads the facets' input fields of the outputs list it refuses too: the error stays
    the one of the malformed member (22023, the first in order), never one of reading the facet."""
    facet = {"columnLineage": {"fields": {"f": {"inputFields": [{**SOURCE, "field": "f"}]}}}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"outputs": [{"namespace": "n", "name": 7, "facets": facet}]}, '"outputs[0].name"'),
        ({"outputs": [{**OUTPUT, "facets": facet}, 5]}, '"outputs[1]"'),
        ({"outputs": [{**OUTPUT, "facets": facet}, {"namespace": "", "name": "t"}]}, '"outputs[1].namespace"'),
        ({"outputs": [{**OUTPUT, "facets": facet}], "inputs": "not a list"}, '"inputs"'),
        ({"outputs": [{**OUTPUT, "facets": facet}], "inputs": [{**SOURCE, "name": None}]}, '"inputs[0].name"'),
    ]
    event = {"eventTime": "2026-01-01T00:00:00Z", "run": {"runId": "r"}, "job": {"namespace": "j", "name": "n"}}
    for members, path in cases:
        status, _, code, message = ingest(service, {**event, **members})
        assert (status, code) == ("rejected", "22023"), (status, code, message)
        assert message is not None and message.startswith(path), message


# Few names, so that events share datasets, and a facet names what another event lists, or what the
# same event lists, or a symlink identifier.
pool = st.tuples(st.sampled_from(["gs://b", "bigtable://p"]), st.sampled_from(["t1", "t2", "t3"]))


def _named(where: tuple[str, str], **more: Any) -> dict[str, Any]:
    return {"namespace": where[0], "name": where[1], **more}


entry = st.one_of(
    st.builds(
        lambda where, field, kinds: _named(where, field=field, **({"transformations": kinds} if kinds else {})),
        pool,
        st.sampled_from(["a", "b"]),
        st.one_of(st.none(), st.lists(st.fixed_dictionaries({"type": st.sampled_from(["DIRECT", "INDIRECT"])}))),
    ),
    st.builds(lambda where: _named(where), pool),  # no field: skipped
)
facet = st.fixed_dictionaries(
    {
        "fields": st.dictionaries(
            st.sampled_from(["x", "y"]), st.builds(lambda e: {"inputFields": e}, st.lists(entry, max_size=3))
        )
    },
    optional={"dataset": st.lists(entry, max_size=2)},
)
symlinked = st.builds(
    lambda where, to: _named(where, facets={"symlinks": {"identifiers": [_named(to, type="TABLE")]}}), pool, pool
)
listed = st.one_of(st.builds(_named, pool), symlinked)
written = st.one_of(
    st.builds(_named, pool), st.builds(lambda where, f: _named(where, facets={"columnLineage": f}), pool, facet)
)
run_or_job = st.fixed_dictionaries(
    {
        "eventTime": st.sampled_from(
            ["2024-05-01T10:05:00Z", "2024-05-01T10:59:59Z", "2024-05-01T13:00:00Z", "2024-05-01T12:30:00+02:00"]
        ),
        "eventType": st.sampled_from(["START", "COMPLETE"]),
        "job": st.fixed_dictionaries({"namespace": st.just("j"), "name": st.sampled_from(["a", "b"])}),
        "inputs": st.lists(listed, max_size=2),
        "outputs": st.lists(written, min_size=1, max_size=2),
    },
    optional={"run": st.just({})},
)
dataset_event = st.builds(lambda d: {"eventTime": "2024-05-01T09:00:00Z", "dataset": d}, written)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=st.lists(st.one_of(run_or_job, run_or_job, dataset_event), min_size=1, max_size=8),
    sizes=st.lists(st.integers(1, 4), min_size=8, max_size=8),
    backfill_set=st.integers(1, 5),
)
def test_any_split_and_a_backfill_derive_what_the_rules_say(
    pg_server: Any, batch: list[dict[str, Any]], sizes: list[int], backfill_set: int
) -> None:
    """Events whose facets name inputs listed in the same event, in another one, as a symlink, or
    nowhere, in sets of any size and then rebuilt by backfill: the store is what tests.lineage_rules
    says, each time."""
    events = [
        {**e, "producer": f"p{i}"} | ({"run": {"runId": f"r{i}"}} if "run" in e else {}) for i, e in enumerate(batch)
    ]
    expected = lineage_state(events)
    db = create_database(pg_server)
    try:
        with (
            psycopg.connect(db.service_dsn, autocommit=True) as service,
            psycopg.connect(db.owner_dsn, autocommit=True) as owner,
        ):
            bodies, start = [json.dumps(e).encode() for e in events], 0
            for size in sizes:
                part = bodies[start : start + size]
                if part:
                    rows = service.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (part,))
                    assert [r[0] for r in rows] == ["stored"] * len(part)
                start += size
            if start < len(bodies):
                rows = service.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies[start:],))
                assert {r[0] for r in rows} == {"stored"}
            assert stored_state(owner) == expected
            owner.execute("CALL metastore.backfill(%s)", (backfill_set,))
            assert stored_state(owner) == expected
    finally:
        drop_database(db)
