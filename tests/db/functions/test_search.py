"""metastore.search: dataset, job and field names in one search, ranked exact, prefix, substring;
with the trigram indexes (pg_trgm) and without them."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.conftest import ingest
from tests.support.events import run_event
from tests.support.rows import value

NS = "trino://h:8080"


def search(conn: psycopg.Connection[Any], q: str, limit: int = 50) -> Any:
    return value(conn, "SELECT metastore.search(%s, %s::int)", (q, limit))


def hits(answer: Any) -> list[tuple[str, str, str]]:
    return [(r["match"], r["type"], r.get("name") or r.get("field")) for r in answer["results"]]


def schema(*names: str) -> dict[str, Any]:
    return {"schema": {"fields": [{"name": n, "type": "varchar"} for n in names]}}


@pytest.fixture
def names(service: psycopg.Connection[Any]) -> None:
    datasets = [
        {"namespace": NS, "name": "hive.s.orders", "facets": schema("orders", "id")},
        {"namespace": "postgres://db:5432", "name": "orders", "facets": schema("orders_count")},
        {"namespace": NS, "name": "orders_archive"},
        {"namespace": NS, "name": "hive.s.orders_2020"},
        {"namespace": NS, "name": "hive.s.pre_orders"},
        {"namespace": NS, "name": "hive.s.preorders"},
        {"namespace": "s3://bucket", "name": "warehouse/Orders"},
        {"namespace": NS, "name": "hive.s.customers", "facets": schema("id", "name", "order_total")},
    ]
    ingest(service, run_event("r1", job="orders", namespace="airflow", inputs=datasets[:4], outputs=datasets[4:]))
    ingest(service, run_event("r2", job="dag.load_orders", namespace="airflow", inputs=[], outputs=[]))
    ingest(service, run_event("r3", job="20260720_101533_00005_xq7tm", namespace=NS, inputs=[], outputs=[]))


def test_ranked_exact_then_prefix_then_substring(service: psycopg.Connection[Any], names: None) -> None:
    got = hits(search(service, "orders"))
    tiers = [m for m, _, _ in got]
    assert tiers == sorted(tiers, key=["exact", "prefix", "substring"].index)
    assert set(got) == {
        ("exact", "dataset", "orders"),
        ("exact", "field", "orders"),
        ("exact", "job", "orders"),
        ("exact", "dataset", "hive.s.orders"),  # its last part
        ("exact", "dataset", "warehouse/Orders"),  # after the last /, any case
        ("prefix", "dataset", "orders_archive"),
        ("prefix", "dataset", "hive.s.orders_2020"),
        ("prefix", "field", "orders_count"),
        ("substring", "job", "dag.load_orders"),
        ("substring", "dataset", "hive.s.pre_orders"),
        ("substring", "dataset", "hive.s.preorders"),
    }
    # Among substrings, a word that starts with q comes before one that only holds it.
    substrings = [n for m, _, n in got if m == "substring"]
    assert substrings.index("hive.s.pre_orders") < substrings.index("hive.s.preorders")
    assert substrings.index("dag.load_orders") < substrings.index("hive.s.preorders")
    # Exact: the shorter name first, then by type; prefixes: the closer first (what starts with q,
    # the name or its last part, is shorter).
    assert got[:5] == [
        ("exact", "dataset", "orders"),
        ("exact", "field", "orders"),
        ("exact", "job", "orders"),
        ("exact", "dataset", "hive.s.orders"),
        ("exact", "dataset", "warehouse/Orders"),
    ]
    assert [n for m, _, n in got if m == "prefix"] == ["hive.s.orders_2020", "orders_count", "orders_archive"]


def test_results_carry_what_opens_them(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], names: None
) -> None:
    answer = search(service, "ORDERS ")
    assert answer["q"] == "ORDERS" and answer["partial"] is False
    by = {(r["type"], r.get("name") or r["field"]): r for r in answer["results"]}
    dataset = by[("dataset", "hive.s.orders")]
    row = owner.execute("SELECT id, kind FROM metastore.datasets WHERE name = 'hive.s.orders'").fetchone()
    assert row is not None and (dataset["id"], dataset["kind"], dataset["namespace"]) == (row[0], row[1], NS)
    job = by[("job", "orders")]
    row = owner.execute("SELECT id FROM metastore.jobs WHERE name = 'orders'").fetchone()
    assert row is not None and (job["id"], job["namespace"]) == (row[0], "airflow")
    field = by[("field", "orders")]
    assert [d["name"] for d in field["datasets"]] == ["hive.s.orders"] and field["more_datasets"] is False
    assert set(field["datasets"][0]) == {"id", "namespace", "name"}


def test_a_field_lists_five_datasets_and_says_there_are_more(service: psycopg.Connection[Any]) -> None:
    tables = [{"namespace": NS, "name": f"t{i}", "facets": schema("shared_col")} for i in range(7)]
    ingest(service, run_event("r1", inputs=tables, outputs=[]))
    (field,) = search(service, "shared_col")["results"]
    assert len(field["datasets"]) == 5 and field["more_datasets"] is True


def test_a_field_is_found_in_schema_versions_before_and_after_the_first_hundred(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A field's datasets come from a walk of the first 100 schema versions, then from the index of
    field names past them: each dataset once, wherever its version is."""
    extra = {10: ("edge_col",), 130: ("edge_col", "late_col")}
    tables = [
        {"namespace": NS, "name": f"t{i:03d}", "facets": schema("common_col", f"c{i}", *extra.get(i, ()))}
        for i in range(150)
    ]
    for i in range(0, 150, 50):
        ingest(service, run_event(f"r{i}", inputs=tables[i : i + 50], outputs=[]))
    walked = owner.execute(
        "SELECT d.name FROM (SELECT * FROM metastore.dataset_schema_versions"
        " ORDER BY dataset_id, fields_sha256 LIMIT 100) AS v JOIN metastore.datasets AS d ON d.id = v.dataset_id"
    ).fetchall()
    assert ("t010",) in walked and ("t130",) not in walked
    by = {r["field"]: r for r in search(service, "_col")["results"] if r["type"] == "field"}
    assert [d["name"] for d in by["edge_col"]["datasets"]] == ["t010", "t130"]
    assert [d["name"] for d in by["late_col"]["datasets"]] == ["t130"]
    assert len(by["common_col"]["datasets"]) == 5 and by["common_col"]["more_datasets"] is True
    assert by["edge_col"]["more_datasets"] is False and by["late_col"]["more_datasets"] is False


def test_substrings_of_common_and_rare_names_among_thousands(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The first 3000 dataset names are walked first: a substring 60 of them hold is answered from
    the walk, one past them from the trigram index; each name once."""
    names = [f"t{i:04d}" + ("_xneedle" if 10 <= i < 70 else "_yneedle" if i == 3090 else "") for i in range(3100)]
    for start in range(0, 3100, 100):
        ingest(service, run_event(f"r{start}", inputs=names[start : start + 100], outputs=[]))
    assert owner.execute("SELECT count(*) FROM metastore.datasets").fetchone() == (3100,)
    common = hits(search(service, "xneedle", 30))
    assert len(common) == 30 and len(set(common)) == 30
    assert all(m == "substring" and t == "dataset" and n.endswith("_xneedle") for m, t, n in common)
    assert hits(search(service, "yneedle")) == [("substring", "dataset", "t3090_yneedle")]
    assert hits(search(service, "needle", 100))[-1] == ("substring", "dataset", "t3090_yneedle")


def test_a_field_no_current_schema_has_is_not_a_result(service: psycopg.Connection[Any]) -> None:
    old = {"namespace": NS, "name": "t", "facets": schema("dropped_col", "kept_col")}
    new = {"namespace": NS, "name": "t", "facets": schema("kept_col")}
    ingest(service, run_event("r1", inputs=[old], outputs=[], event_time="2024-05-01T12:00:00Z"))
    ingest(service, run_event("r2", inputs=[new], outputs=[], event_time="2024-05-02T12:00:00Z"))
    assert hits(search(service, "_col")) == [("substring", "field", "kept_col")]


def test_like_characters_are_taken_literally(service: psycopg.Connection[Any]) -> None:
    ingest(service, run_event("r1", inputs=["a_b", "axb", "c%d", "cxd"], outputs=[]))
    assert {n for _, _, n in hits(search(service, "a_b"))} == {"a_b"}
    assert {n for _, _, n in hits(search(service, "%"))} == {"c%d"}


def test_the_limit(service: psycopg.Connection[Any]) -> None:
    ingest(service, run_event("r1", inputs=[f"tab{i:02d}" for i in range(30)], outputs=[]))
    assert len(search(service, "tab", 7)["results"]) == 7
    assert [n for _, _, n in hits(search(service, "tab", 3))] == ["tab00", "tab01", "tab02"]


def test_without_trigram_indexes_substrings_are_still_found(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], names: None
) -> None:
    with_indexes = search(service, "orders")
    for index in ("datasets_name_trgm_idx", "jobs_name_trgm_idx", "field_names_name_trgm_idx"):
        owner.execute(f"DROP INDEX IF EXISTS metastore.{index}")  # type: ignore[arg-type]
    without = search(service, "orders")
    assert without == with_indexes and without["partial"] is False
    # A table too large to look through whole: the answer says the substring search was partial.
    owner.execute("INSERT INTO metastore.field_names (name) SELECT 'filler_' || i FROM generate_series(1, 100500) i")
    owner.execute("ANALYZE metastore.field_names")
    assert search(service, "reord")["partial"] is True
    assert hits(search(service, "reord")) == [("substring", "dataset", "hive.s.preorders")]


def test_a_substring_of_a_job_name_is_looked_for_among_the_newest_2000_jobs(
    service: psycopg.Connection[Any],
) -> None:
    bodies = [json.dumps(run_event("r-old", job="old_needle_job", inputs=[], outputs=[])).encode()]
    bodies += [json.dumps(run_event(f"r{i}", job=f"q{i:05d}", inputs=[], outputs=[])).encode() for i in range(2000)]
    for start in range(0, len(bodies), 500):
        service.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies[start : start + 500],))
    # 2000 newer jobs: the old one is past the look, and the answer says so.
    answer = search(service, "needle")
    assert hits(answer) == [] and answer["partial"] is True
    # Exact and prefix matches come from the index, however old the job.
    assert hits(search(service, "old_needle_job")) == [("exact", "job", "old_needle_job")]
    assert hits(search(service, "old_nee")) == [("prefix", "job", "old_needle_job")]
    ingest(service, run_event("r-new", job="new_needle_job", inputs=[], outputs=[]))
    assert hits(search(service, "needle")) == [("substring", "job", "new_needle_job")]


@pytest.mark.parametrize(("q", "limit"), [("", 10), ("   ", 10), ("x" * 1001, 10), ("x", 0), ("x", 101), (None, 10)])
def test_bad_arguments_are_22023(service: psycopg.Connection[Any], q: str | None, limit: int) -> None:
    with pytest.raises(psycopg.Error) as caught:
        service.execute("SELECT metastore.search(%s, %s::int)", (q, limit))
    assert caught.value.sqlstate == "22023"
