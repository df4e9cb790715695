"""metastore.derive_lineage: schema versions, lineage edges and column lineage of stored events."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import psycopg

from tests.conftest import FIXTURES, fixture_files, ingest, load_fixture
from tests.db.stats import xact_stat
from tests.lineage_rules import derive


def fixture_events() -> list[dict[str, Any]]:
    """Every fixture event, the Marquez seed template with its placeholders filled as Marquez does."""
    events: list[dict[str, Any]] = []
    for path in fixture_files():
        if path.name == "metadata.template.json":
            text = re.sub(r"\{\{(\w+)\}\}", lambda m: f"2024-01-01T00:{len(m.group(1)) % 60:02d}:00Z", path.read_text())
            data = json.loads(text)
        else:
            data = load_fixture(path)
        events += [e for e in (data if isinstance(data, list) else [data]) if isinstance(e, dict)]
    return events


def _str(value: Any) -> bool:
    return isinstance(value, str)


def oracle_column_lineage(event: dict[str, Any]) -> set[tuple[Any, ...]]:
    """The facet's edges, read from the JSON independently of the SQL: (output namespace, name, field
    or None for the dataset-level list, input namespace, name, field, transformation type, subtype).
    Input datasets the event does not mention are not resolved (no dataset row to point at)."""
    mentioned = {(ns, name) for ns, name, _ in derive(event).links}
    edges: set[tuple[Any, ...]] = set()
    for output in event.get("outputs") or []:
        if not isinstance(output, dict):
            continue
        facets = output.get("facets")
        facet = facets.get("columnLineage") if isinstance(facets, dict) else None
        if not isinstance(facet, dict):
            continue
        lists: list[tuple[str | None, Any]] = []
        fields = facet.get("fields")
        if isinstance(fields, dict):
            lists += [
                (name, spec.get("inputFields") if isinstance(spec, dict) else None) for name, spec in fields.items()
            ]
        lists.append((None, facet.get("dataset")))
        for out_field, inputs in lists:
            if not isinstance(inputs, list):
                continue
            for item in inputs:
                if not (isinstance(item, dict) and _str(item.get("namespace")) and _str(item.get("name"))):
                    continue
                if not _str(item.get("field")):
                    continue
                if (item["namespace"], item["name"]) not in mentioned:
                    continue
                transformations = item.get("transformations")
                if not isinstance(transformations, list) or not transformations:
                    transformations = [{}]
                for t in transformations:
                    kind = t.get("type") if isinstance(t, dict) else None
                    sub = t.get("subtype") if isinstance(t, dict) else None
                    edges.add(
                        (
                            output["namespace"],
                            output["name"],
                            out_field or None,  # an empty name is the dataset-level list
                            item["namespace"],
                            item["name"],
                            item["field"],
                            kind if _str(kind) else "",
                            sub if _str(sub) else "",
                        )
                    )
    return edges


def stored_column_lineage(conn: psycopg.Connection[Any]) -> set[tuple[Any, ...]]:
    return set(
        conn.execute(
            "SELECT o.namespace, o.name, nullif(c.output_field, ''), i.namespace, i.name, c.input_field,"
            " c.transformation_type, c.transformation_subtype"
            " FROM metastore.column_lineage c"
            " JOIN metastore.datasets o ON o.id = c.output_dataset_id"
            " JOIN metastore.datasets i ON i.id = c.input_dataset_id"
        ).fetchall()
    )


def derived_snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The derived tables by natural keys (dataset ids aside)."""
    return {
        "schemas": conn.execute(
            "SELECT d.namespace, d.name, v.fields_sha256, v.fields, e.payload_sha256, v.first_seen, v.last_seen"
            " FROM metastore.dataset_schema_versions v JOIN metastore.datasets d ON d.id = v.dataset_id"
            " JOIN metastore.events e ON e.id = v.first_event_id ORDER BY 1, 2, 3"
        ).fetchall(),
        "edges": conn.execute(
            "SELECT u.namespace, u.name, w.namespace, w.name, e.job_namespace, e.job_name, e.first_seen, e.last_seen"
            " FROM metastore.lineage_edges e JOIN metastore.datasets u ON u.id = e.upstream_id"
            " JOIN metastore.datasets w ON w.id = e.downstream_id ORDER BY 1, 2, 3, 4, 5, 6"
        ).fetchall(),
        "columns": sorted(stored_column_lineage(conn), key=repr),
    }


def count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM metastore.{table}").fetchone()
    assert row is not None
    return int(row[0])


def test_column_lineage_of_every_fixture_equals_its_facets(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    expected: set[tuple[Any, ...]] = set()
    with_facet = 0
    for event in fixture_events():
        status = ingest(service, event)[0]
        if status != "stored":
            continue
        edges = oracle_column_lineage(event)
        with_facet += bool(edges)
        expected |= edges
    assert with_facet >= 8, "the fixtures with columnLineage were not all stored"
    assert stored_column_lineage(owner) == expected
    # Both forms of the facet are there: per field and the dataset-level list.
    assert any(e[2] is None for e in expected) and any(e[2] is not None for e in expected)
    assert any(e[6] == "INDIRECT" for e in expected) and any(e[6] == "" for e in expected)


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
        assert stored_column_lineage(owner) == oracle_column_lineage(event) != set()


def ctas(i: int, job: str, fields: list[dict[str, Any]] | None = None, when: str | None = None) -> dict[str, Any]:
    """The Trino CTAS COMPLETE, as a new query (run and time) each time."""
    event = copy.deepcopy(load_fixture(FIXTURES / "trino" / "04-ctas-complete.json"))
    event["eventTime"] = when or f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"
    event["run"]["runId"] = f"01900000-0000-7000-8000-{i:012d}"
    event["job"]["name"] = job
    if fields is not None:
        event["outputs"][0]["facets"]["schema"]["fields"] = fields
    return event


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
    from metastore import migrations

    dsn = empty_db.owner_dsn
    migrations.deploy(dsn)
    assert migrations.revert(dsn, 5) == sorted((c.version for c in migrations.changes() if c.version > 5), reverse=True)
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


def test_a_set_resolves_column_lineage_inputs_per_event(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """An input field of a dataset its event does not mention is skipped, also when another event
    of the same set mentions that dataset: a set derives what its events derive one by one (ingest
    takes sets, backfill takes a thousand events per call)."""
    stray = ctas(0, "stray")
    outputs = stray["outputs"][0]["facets"]["columnLineage"]["fields"]
    field = next(iter(outputs))
    outputs[field]["inputFields"].append({"namespace": "elsewhere", "name": "other.t", "field": "x"})
    mentions_it = ctas(1, "other")
    mentions_it["inputs"] = [{"namespace": "elsewhere", "name": "other.t"}]
    alone = oracle_column_lineage(stray) | oracle_column_lineage(mentions_it)
    assert not any(row[3] == "elsewhere" for row in alone)
    bodies = [json.dumps(e).encode() for e in (stray, mentions_it)]
    rows = service.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies,)).fetchall()
    assert rows == [("stored",), ("stored",)]
    assert stored_column_lineage(owner) == alone
    owner.execute("CALL metastore.backfill(1000)")
    assert stored_column_lineage(owner) == alone


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
