"""metastore.field_lineage: one field's lineage across hops, with the transformation on every edge,
crossing symlinks, bounded like the dataset graph."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import ingest
from tests.support.lineage_graphs import NS, derive, ds, ids
from tests.support.rows import value


def lineage(
    conn: psycopg.Connection[Any],
    dataset_id: int,
    field: str,
    direction: str = "both",
    depth: int = 5,
    limit: int = 200,
) -> Any:
    return value(
        conn,
        "SELECT metastore.field_lineage(%s, %s, %s, %s::int, %s::int)",
        (dataset_id, field, direction, depth, limit),
    )


def shape(g: Any) -> tuple[set[Any], set[Any]]:
    """Nodes as (name, field, side, depth); edges as (kind, from name.field, to name.field, transformation)."""
    by_id = {n["id"]: f"{n['name']}.{n['field']}" for n in g["nodes"]}
    nodes = {(n["name"], n["field"], n["side"], n["depth"]) for n in g["nodes"]}
    edges = set()
    for e in g["edges"]:
        t = e.get("transformation")
        edges.add((e["kind"], by_id[e["from"]], by_id[e["to"]], None if t is None else (t["type"], t["subtype"])))
    return nodes, edges


@pytest.fixture
def chain(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> dict[str, int]:
    """raw.amount -> orders.amount -> daily.total -> kpi.revenue over three jobs; orders carries an S3
    identifier, which Spark reads (its amount) to write out.amt; daily is also filtered by raw.region
    (the facet's dataset-level list, not followed)."""
    raw, daily, kpi = ds("raw"), ds("daily"), ds("kpi")
    orders = ds("orders", symlinks={"identifiers": [{"namespace": "s3://b", "name": "w/orders", "type": "TABLE"}]})
    s3, out = ds("s3://b|w/orders"), ds("s3://b|out")
    events = [
        derive(1, "load", [raw], orders, {"amount": [(raw, "amount", "DIRECT", "IDENTITY")]}),
        derive(
            2,
            "agg",
            [orders],
            daily,
            {"total": [(orders, "amount", "DIRECT", "TRANSFORMATION"), (orders, "amount", "INDIRECT", "FILTER")]},
            dataset_level=[(orders, "region", "INDIRECT", "FILTER")],
        ),
        derive(3, "kpi", [daily], kpi, {"revenue": [(daily, "total", "INDIRECT", "AGGREGATION")]}),
        derive(4, "spark", [s3], out, {"amt": [(s3, "amount")]}),
    ]
    for event in events:
        assert ingest(service, event)[0] == "stored"
    return ids(owner)


def test_downstream_across_three_hops_and_a_symlink(service: psycopg.Connection[Any], chain: dict[str, int]) -> None:
    g = lineage(service, chain["raw"], "amount", "downstream")
    nodes, edges = shape(g)
    assert nodes == {
        ("raw", "amount", "self", 0),
        ("orders", "amount", "downstream", 1),
        ("w/orders", "amount", "downstream", 1),  # the same field of the symlink, beside it
        ("daily", "total", "downstream", 2),
        ("out", "amt", "downstream", 2),
        ("kpi", "revenue", "downstream", 3),
    }
    assert edges == {
        ("lineage", "raw.amount", "orders.amount", ("DIRECT", "IDENTITY")),
        ("symlink", "orders.amount", "w/orders.amount", None),
        ("lineage", "orders.amount", "daily.total", ("DIRECT", "TRANSFORMATION")),
        ("lineage", "orders.amount", "daily.total", ("INDIRECT", "FILTER")),
        ("lineage", "w/orders.amount", "out.amt", None),  # no transformation sent
        ("lineage", "daily.total", "kpi.revenue", ("INDIRECT", "AGGREGATION")),
    }
    assert g["nodes"][0] == {
        "id": 1,
        "dataset_id": chain["raw"],
        "namespace": NS,
        "name": "raw",
        "field": "amount",
        "depth": 0,
        "side": "self",
    }
    assert g["truncated"] is False and (g["field"], g["direction"], g["depth"]) == ("amount", "downstream", 5)


def test_upstream_to_the_depth_asked_and_from_the_symlink(
    service: psycopg.Connection[Any], chain: dict[str, int]
) -> None:
    nodes, _ = shape(lineage(service, chain["kpi"], "revenue", "upstream", 2))
    assert nodes == {
        ("kpi", "revenue", "self", 0),
        ("daily", "total", "upstream", 1),
        ("orders", "amount", "upstream", 2),
    }
    nodes, edges = shape(lineage(service, chain["out"], "amt", "upstream"))
    assert ("raw", "amount", "upstream", 2) in nodes and ("w/orders", "amount", "upstream", 1) in nodes
    assert ("symlink", "orders.amount", "w/orders.amount", None) in edges
    # Both ways from the middle; the dataset-level list (region) is not followed.
    nodes, _ = shape(lineage(service, chain["daily"], "total", "both", 1))
    assert {(n[0], n[1]) for n in nodes} == {("daily", "total"), ("orders", "amount"), ("kpi", "revenue")}


def test_bounded_by_the_node_limit(service: psycopg.Connection[Any], chain: dict[str, int]) -> None:
    g = lineage(service, chain["raw"], "amount", "downstream", 5, 3)
    assert len(g["nodes"]) == 3 and g["truncated"] is True
    assert all(e["from"] <= 3 and e["to"] <= 3 for e in g["edges"])


def test_a_cycle_ends(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    a, b = ds("a"), ds("b")
    ingest(service, derive(1, "ab", [a], b, {"y": [(a, "x", "DIRECT", "IDENTITY")]}))
    ingest(service, derive(2, "ba", [b], a, {"x": [(b, "y", "DIRECT", "IDENTITY")]}))
    nodes, edges = shape(lineage(service, ids(owner)["a"], "x", "both", 10))
    assert {(n[0], n[1]) for n in nodes} == {("a", "x"), ("b", "y")}
    assert len(edges) == 2


def test_a_field_without_lineage_is_itself_alone(service: psycopg.Connection[Any], chain: dict[str, int]) -> None:
    g = lineage(service, chain["raw"], "no such field")
    assert [n["field"] for n in g["nodes"]] == ["no such field"] and g["edges"] == []


@pytest.mark.parametrize(
    ("field", "direction", "depth", "limit"),
    [
        ("", "both", 3, 10),
        ("x" * 1001, "both", 3, 10),
        ("x", "sideways", 3, 10),
        ("x", None, 3, 10),
        ("x", "both", 0, 10),
        ("x", "both", 11, 10),
        ("x", "both", 3, 0),
        ("x", "both", 3, 1001),
    ],
)
def test_bad_arguments_are_22023(
    service: psycopg.Connection[Any], chain: dict[str, int], field: str, direction: str, depth: int, limit: int
) -> None:
    with pytest.raises(psycopg.Error) as caught:
        lineage(service, chain["raw"], field, direction, depth, limit)
    assert caught.value.sqlstate == "22023"


def test_an_unknown_dataset_is_p0002(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        lineage(service, 999_999_999, "x")
    assert caught.value.sqlstate == "P0002"
