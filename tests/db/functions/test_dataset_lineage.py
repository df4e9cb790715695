"""metastore.dataset_lineage: the graph around a dataset, across symlinks, bounded, cycle-safe."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.support.events import symlinked
from tests.support.lineage_graphs import NS, ids, load, run
from tests.support.rows import value


def lineage(conn: psycopg.Connection[Any], dataset_id: int, direction: str, depth: int, limit: int = 200) -> Any:
    return value(
        conn, "SELECT metastore.dataset_lineage(%s, %s, %s::int, %s::int)", (dataset_id, direction, depth, limit)
    )


def names(graph: Any) -> dict[str, tuple[str, int]]:
    return {n["name"]: (n["side"], n["depth"]) for n in graph["nodes"]}


def test_a_chain_up_and_down_to_the_depth_asked(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    load(service, [run(i, f"j{i}", [f"t{i}"], [f"t{i + 1}"]) for i in range(6)])
    t = ids(owner)
    assert names(lineage(service, t["t3"], "downstream", 2)) == {
        "t3": ("self", 0),
        "t4": ("downstream", 1),
        "t5": ("downstream", 2),
    }
    assert names(lineage(service, t["t3"], "upstream", 10)) == {
        "t3": ("self", 0),
        "t2": ("upstream", 1),
        "t1": ("upstream", 2),
        "t0": ("upstream", 3),
    }
    both = lineage(service, t["t3"], "both", 1)
    assert set(names(both)) == {"t2", "t3", "t4"} and both["truncated"] is False
    assert {(e["kind"], e["from"], e["to"], e["jobs"]) for e in both["edges"]} == {
        ("lineage", t["t2"], t["t3"], 1),
        ("lineage", t["t3"], t["t4"], 1),
    }


def test_lineage_crosses_symlinks(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    # Spark writes an S3 path that carries the Trino table's name; Trino then reads the table.
    path = symlinked("s3://bucket", "warehouse/orders", NS, "hive.sales.orders")
    load(service, [run(1, "spark", ["raw"], [path]), run(2, "trino", ["hive.sales.orders"], ["report"])])
    t = ids(owner)
    down = lineage(service, t["raw"], "downstream", 2)
    assert names(down) == {
        "raw": ("self", 0),
        "warehouse/orders": ("downstream", 1),
        "hive.sales.orders": ("downstream", 1),
        "report": ("downstream", 2),
    }
    assert ("symlink", t["warehouse/orders"], t["hive.sales.orders"]) in {
        (e["kind"], e["from"], e["to"]) for e in down["edges"]
    }
    up = lineage(service, t["report"], "upstream", 2)
    assert names(up)["raw"] == ("upstream", 2)
    # One hop on the dataset page crosses them too.
    page = service.execute("SELECT metastore.get_dataset(%s, 1)", (t["hive.sales.orders"],)).fetchone()
    assert page is not None
    assert [u["name"] for u in page[0]["upstream"]] == ["raw"]
    assert [d["name"] for d in page[0]["downstream"]] == ["report"]


def test_cycles_end(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    load(service, [run(1, "ab", ["a"], ["b"]), run(2, "ba", ["b"], ["a"]), run(3, "aa", ["a"], ["a"])])
    t = ids(owner)
    graph = lineage(service, t["a"], "both", 10)
    assert sorted(n["name"] for n in graph["nodes"]) == ["a", "b"]
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {(t["a"], t["b"]), (t["b"], t["a"]), (t["a"], t["a"])}


def test_the_node_limit_truncates(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    load(service, [run(1, "fan", ["hub"], [f"out{i:02d}" for i in range(30)])])
    t = ids(owner)
    graph = lineage(service, t["hub"], "downstream", 3, limit=10)
    assert len(graph["nodes"]) == 10 and graph["truncated"] is True
    assert len(lineage(service, t["hub"], "downstream", 3, limit=31)["nodes"]) == 31
    assert lineage(service, t["hub"], "downstream", 3, limit=31)["truncated"] is False


@pytest.mark.parametrize(
    ("direction", "depth", "limit"),
    [("sideways", 1, 10), (None, 1, 10), ("both", 0, 10), ("both", 11, 10), ("up", 1, 0), ("both", 1, 1001)],
)
def test_bad_arguments_are_22023(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], direction: Any, depth: int, limit: int
) -> None:
    load(service, [run(1, "j", ["x"], ["y"])])
    with pytest.raises(psycopg.Error) as caught:
        lineage(service, ids(owner)["x"], direction, depth, limit)
    assert caught.value.sqlstate == "22023"


def test_unknown_dataset_is_no_data_found(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        lineage(service, 987654, "both", 1)
    assert caught.value.sqlstate == "P0002"


def with_field(conn: psycopg.Connection[Any], field: Any, limit: int = 100) -> list[str]:
    row = conn.execute("SELECT metastore.datasets_with_field(%s, %s::int)", (field, limit)).fetchone()
    assert row is not None
    return [d["name"] for d in row[0]["datasets"]]


def test_datasets_by_current_field_name(service: psycopg.Connection[Any]) -> None:
    def schema(i: int, name: str, fields: list[str]) -> dict[str, Any]:
        event = run(i, f"w{i}", [], [name])
        event["outputs"][0]["facets"] = {"schema": {"fields": [{"name": f} for f in fields]}}
        return event

    load(service, [schema(1, "orders", ["id", "amount"]), schema(2, "users", ["id", "email"])])
    assert with_field(service, "id") == ["orders", "users"]
    assert with_field(service, "email") == ["users"]
    assert with_field(service, "id", limit=1) == ["orders"]
    # A newer schema without the field: it is not current any more.
    load(service, [schema(3, "users", ["user_id", "email"])])
    assert with_field(service, "id") == ["orders"]
    assert with_field(service, "user_id") == ["users"]
    assert with_field(service, "nested") == []
    for bad in ("", None):
        with pytest.raises(psycopg.Error) as caught:
            with_field(service, bad)
        assert caught.value.sqlstate == "22023"


def test_a_node_the_other_direction_listed_is_still_expanded(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """a <-> b both ways, then b -> c: b is upstream of a (listed first), and downstream of a too,
    so c, two hops down, is in the graph of both directions."""
    load(service, [run(1, "ab", ["a"], ["b"]), run(2, "ba", ["b"], ["a"]), run(3, "bc", ["b"], ["c"])])
    t = ids(owner)
    down = names(lineage(service, t["a"], "downstream", 3))
    both = lineage(service, t["a"], "both", 3)
    assert down["c"] == ("downstream", 2)
    assert names(both) == {"a": ("self", 0), "b": ("upstream", 1), "c": ("downstream", 2)}
    assert both["truncated"] is False
    # The node limit still counts each node once.
    assert len(lineage(service, t["a"], "both", 3, limit=3)["nodes"]) == 3
    cut = lineage(service, t["a"], "both", 3, limit=2)
    assert len(cut["nodes"]) == 2 and cut["truncated"] is True
