"""metastore.lineage_graph with p_include 'jobs': jobs as nodes between datasets (dataset -> job ->
dataset), bounded by depth and node limit, crossing symlinks; without it, what dataset_lineage gives."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import ingest
from tests.support.events import symlinked
from tests.support.lineage_graphs import NS, ids, load, run
from tests.support.rows import value


def graph(
    conn: psycopg.Connection[Any],
    dataset_id: int,
    direction: str = "both",
    depth: int = 3,
    limit: int = 200,
    include: str | None = "jobs",
) -> Any:
    return value(
        conn,
        "SELECT metastore.lineage_graph(%s, %s, %s::int, %s::int, %s)",
        (dataset_id, direction, depth, limit, include),
    )


def job_ids(owner: psycopg.Connection[Any]) -> dict[str, int]:
    return {name: i for i, name in owner.execute("SELECT id, name FROM metastore.jobs")}


def shape(g: Any, t: dict[str, int], j: dict[str, int]) -> tuple[set[Any], set[Any]]:
    """Nodes as (type, name, side, depth), edges as (kind, from name, to name)."""
    name_of = {("dataset", v): k for k, v in t.items()} | {("job", v): k for k, v in j.items()}
    nodes = {(n["type"], n["name"], n["side"], n["depth"]) for n in g["nodes"]}
    kinds = {"input": ("dataset", "job"), "output": ("job", "dataset"), "symlink": ("dataset", "dataset")}
    edges = set()
    for e in g["edges"]:
        a, b = kinds[e["kind"]]
        edges.add((e["kind"], name_of[(a, e["from"])], name_of[(b, e["to"])]))
    return nodes, edges


def test_jobs_sit_between_the_datasets_they_read_and_wrote(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    # t0 -> load -> t1 -> agg -> t2, a second job writing t1 from t0, and a query that only reads t2.
    load(
        service,
        [
            run(1, "load", ["t0"], ["t1"]),
            run(2, "reload", ["t0"], ["t1"]),
            run(3, "agg", ["t1"], ["t2"]),
            run(4, "select", ["t2"], []),
        ],
    )
    t, j = ids(owner), job_ids(owner)
    g = graph(service, t["t1"])
    nodes, edges = shape(g, t, j)
    assert nodes == {
        ("dataset", "t1", "self", 0),
        ("job", "load", "upstream", 1),
        ("job", "reload", "upstream", 1),
        ("dataset", "t0", "upstream", 1),
        ("job", "agg", "downstream", 1),
        ("dataset", "t2", "downstream", 1),
    }
    assert edges == {
        ("input", "t0", "load"),
        ("input", "t0", "reload"),
        ("output", "load", "t1"),
        ("output", "reload", "t1"),
        ("input", "t1", "agg"),
        ("output", "agg", "t2"),
    }
    # A query without outputs draws no lineage edge: it is not between datasets.
    assert "select" not in {n["name"] for n in g["nodes"]}
    job = next(n for n in g["nodes"] if n["name"] == "agg")
    assert job["id"] == j["agg"] and job["latest_run"]["state"] == "COMPLETE" and job["namespace"] == "jobs"
    assert all(n["type"] == "dataset" and "kind" in n for n in g["nodes"] if n["type"] != "job")
    assert g["truncated"] is False


def test_without_include_the_answer_is_dataset_lineage_s(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    load(service, [run(i, f"j{i}", [f"t{i}"], [f"t{i + 1}"]) for i in range(5)])
    t = ids(owner)
    for direction in ("upstream", "downstream", "both"):
        old = service.execute("SELECT metastore.dataset_lineage(%s, %s, 2, 3)", (t["t2"], direction)).fetchone()
        assert old is not None
        assert graph(service, t["t2"], direction, 2, 3, None) == old[0]
        assert all("type" not in n for n in old[0]["nodes"])


def test_jobs_count_against_the_node_limit_and_the_graph_stays_connected(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    # Trino names a job per query: 30 queries each wrote t1 from t0, 30 more wrote t2 from t1.
    load(service, [run(i, f"q{i:02d}", ["t0"], ["t1"]) for i in range(30)])
    load(service, [run(30 + i, f"p{i:02d}", ["t1"], ["t2"]) for i in range(30)])
    t = ids(owner)
    g = graph(service, t["t0"], "downstream", 3, 10)
    assert len(g["nodes"]) == 10 and g["truncated"] is True
    assert sum(n["type"] == "job" for n in g["nodes"]) == 9  # the room left after t0: jobs first, then cut
    full = graph(service, t["t0"], "downstream", 3, 200)
    assert len(full["nodes"]) == 63 and full["truncated"] is False
    listed = {(n["type"], n["id"]) for n in full["nodes"]}
    for e in full["edges"]:
        frm = "job" if e["kind"] == "output" else "dataset"
        to = "job" if e["kind"] == "input" else "dataset"
        assert (frm, e["from"]) in listed and (to, e["to"]) in listed
    # Each dataset past the first hangs on a job listed before it.
    depth2 = graph(service, t["t0"], "downstream", 2, 40)
    datasets = {n["name"] for n in depth2["nodes"] if n["type"] == "dataset"}
    assert datasets == {"t0", "t1"} and depth2["truncated"] is True


def test_jobs_mode_crosses_symlinks(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    path = symlinked("s3://bucket", "warehouse/orders", NS, "hive.sales.orders")
    load(service, [run(1, "spark", ["raw"], [path]), run(2, "trino", ["hive.sales.orders"], ["daily"])])
    t, j = ids(owner), job_ids(owner)
    nodes, edges = shape(graph(service, t["raw"], "downstream", 3), t, j)
    assert ("job", "trino", "downstream", 2) in nodes and ("dataset", "daily", "downstream", 2) in nodes
    assert ("symlink", "warehouse/orders", "hive.sales.orders") in edges


def test_a_cycle_lists_each_job_once(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    load(service, [run(1, "ab", ["a"], ["b"]), run(2, "ba", ["b"], ["a"])])
    t = ids(owner)
    g = graph(service, t["a"], "both", 5)
    assert sorted(n["name"] for n in g["nodes"]) == ["a", "ab", "b", "ba"]


@pytest.mark.parametrize("include", ["JOBS", "", "datasets"])
def test_an_unknown_include_is_22023(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], include: str
) -> None:
    ingest(service, run(1, "j", ["a"], ["b"]))
    with pytest.raises(psycopg.Error) as caught:
        graph(service, ids(owner)["a"], include=include)
    assert caught.value.sqlstate == "22023"
