"""metastore.list_datasets: keyset pages and filters, as the app role."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.conftest import READER_ROLE, ingest


def page(
    conn: psycopg.Connection[Any],
    limit: int = 100,
    cursor: str | None = None,
    namespace: str | None = None,
    scheme: str | None = None,
    kind: str | None = None,
    q: str | None = None,
) -> dict[str, Any]:
    row = conn.execute(
        "SELECT metastore.list_datasets(%s::int, %s, %s, %s, %s, %s)", (limit, cursor, namespace, scheme, kind, q)
    ).fetchone()
    assert row is not None
    return dict(row[0])


def seed(conn: psycopg.Connection[Any], n: int) -> list[tuple[str, str]]:
    datasets = [
        {"namespace": ns, "name": f"schema.table_{i:03d}"} for i in range(n) for ns in ("trino://h:8080", "S3://bucket")
    ]
    datasets[0]["facets"] = {"symlinks": {"identifiers": [{"namespace": "hive://m", "name": "x.y", "type": "TABLE"}]}}
    event = {
        "eventTime": "2024-01-01T00:00:00Z",
        "run": {"runId": "r"},
        "job": {"namespace": "j", "name": "n"},
        "inputs": datasets,
    }
    assert ingest(conn, event)[0] == "stored"
    return sorted([(d["namespace"], d["name"]) for d in datasets] + [("hive://m", "x.y")])


def test_pages_walk_every_dataset_once_in_order(service: psycopg.Connection[Any]) -> None:
    expected = seed(service, 25)
    seen: list[tuple[str, str]] = []
    cursor = None
    pages = 0
    while True:
        result = page(service, limit=7, cursor=cursor)
        seen += [(d["namespace"], d["name"]) for d in result["datasets"]]
        pages += 1
        cursor = result["next_cursor"]
        if cursor is None:
            break
    assert seen == expected
    assert pages == -(-len(expected) // 7)


def test_filters(service: psycopg.Connection[Any]) -> None:
    seed(service, 12)
    by_scheme = page(service, scheme="s3")["datasets"]
    assert len(by_scheme) == 12
    assert {d["scheme"] for d in by_scheme} == {"s3"}
    assert {d["authority"] for d in by_scheme} == {"bucket"}
    assert [d["name"] for d in page(service, kind="symlink")["datasets"]] == ["x.y"]
    assert len(page(service, namespace="trino://h:8080")["datasets"]) == 12
    assert [d["name"] for d in page(service, q="TABLE_01", namespace="trino://h:8080")["datasets"]] == [
        f"schema.table_{i:03d}" for i in range(10, 12)
    ]
    assert page(service, q="nothing like it") == {"datasets": [], "next_cursor": None}


def test_every_dataset_has_the_documented_fields(service: psycopg.Connection[Any]) -> None:
    seed(service, 1)
    first = page(service, limit=1)["datasets"][0]
    assert set(first) == {
        "id",
        "namespace",
        "name",
        "scheme",
        "authority",
        "kind",
        "first_seen",
        "last_seen",
        "input_events",
        "output_events",
        "symlink_relations",
    }
    assert first["first_seen"] == "2024-01-01T00:00:00+00:00"


def test_a_page_with_filters_continues_with_the_same_filters(service: psycopg.Connection[Any]) -> None:
    seed(service, 10)
    first = page(service, limit=4, scheme="trino")
    second = page(service, limit=4, scheme="trino", cursor=first["next_cursor"])
    names = [d["name"] for d in first["datasets"] + second["datasets"]]
    assert names == [f"schema.table_{i:03d}" for i in range(8)]


@pytest.mark.parametrize(
    ("kwargs", "sqlstate"),
    [
        ({"limit": 0}, "22023"),
        ({"limit": 1001}, "22023"),
        ({"kind": "table"}, "22023"),
        ({"cursor": "not a cursor"}, "22023"),
        ({"cursor": "WzEsMl0="}, "22023"),
    ],  # base64 of [1,2]
)
def test_bad_parameters_are_refused(kwargs: dict[str, Any], sqlstate: str, service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        page(service, **kwargs)
    assert caught.value.sqlstate == sqlstate


def test_the_reader_role_may_list_but_not_ingest(database: Any, pg_server: Any) -> None:
    with psycopg.connect(pg_server.dsn, autocommit=True) as su:
        su.execute(
            "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cockpit') THEN "
            f"CREATE ROLE cockpit LOGIN IN ROLE {READER_ROLE}; END IF; END$$"
        )
    with psycopg.connect(pg_server.dsn_for("cockpit", database.name), autocommit=True) as reader:
        assert page(reader)["datasets"] == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute("SELECT metastore.ingest_event(%b)", (json.dumps({}).encode(),))


def test_counts_of_reads_writes_and_symlinks(service: psycopg.Connection[Any]) -> None:
    table = {
        "namespace": "hdfs://nn",
        "name": "/w/t",
        "facets": {"symlinks": {"identifiers": [{"namespace": "hive://m", "name": "s.t", "type": "TABLE"}]}},
    }
    for run, direction in (("r1", "inputs"), ("r2", "inputs"), ("r3", "outputs")):
        event = {
            "eventTime": "2024-01-01T00:00:00Z",
            "run": {"runId": run},
            "job": {"namespace": "j", "name": "n"},
            direction: [table, table],
        }
        ingest(service, event)
        ingest(service, event)  # a resend counts nothing
    rows = {
        d["name"]: (d["input_events"], d["output_events"], d["symlink_relations"]) for d in page(service)["datasets"]
    }
    assert rows == {"/w/t": (2, 1, 1), "s.t": (2, 1, 1)}


def test_summary_counts_schemes_and_namespaces(service: psycopg.Connection[Any]) -> None:
    seed(service, 3)
    row = service.execute("SELECT metastore.dataset_summary()").fetchone()
    assert row is not None
    summary = row[0]
    assert summary["datasets"] == 7
    assert summary["schemes"] == [
        {"scheme": "hive", "datasets": 1},
        {"scheme": "s3", "datasets": 3},
        {"scheme": "trino", "datasets": 3},
    ]
    assert [n["namespace"] for n in summary["namespaces"]] == ["S3://bucket", "hive://m", "trino://h:8080"]
