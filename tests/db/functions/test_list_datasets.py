"""metastore.list_datasets: keyset pages and filters, as the app role."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest

from tests.conftest import READER_ROLE, ingest
from tests.support.events import symlinked
from tests.support.rows import document


def page(
    conn: psycopg.Connection[Any],
    limit: int = 100,
    cursor: str | None = None,
    namespace: str | None = None,
    scheme: str | None = None,
    kind: str | None = None,
    q: str | None = None,
) -> dict[str, Any]:
    return document(
        conn, "SELECT metastore.list_datasets(%s::int, %s, %s, %s, %s, %s)", (limit, cursor, namespace, scheme, kind, q)
    )


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
    table = symlinked("hdfs://nn", "/w/t", "hive://m", "s.t")
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


def test_q_is_a_literal_case_insensitive_substring(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    names = ["a%b.t", "axb.t", "a_b.t", "a\\b.t", "A\\B_%.T", "Ünïcode.Tåble", "plain.t"]
    event = {
        "eventTime": "2024-01-01T00:00:00Z",
        "run": {"runId": "r"},
        "job": {"namespace": "j", "name": "n"},
        "inputs": [{"namespace": "ns", "name": n} for n in names],
    }
    assert ingest(service, event)[0] == "stored"

    def found(q: str) -> list[str]:
        return sorted(d["name"] for d in page(service, q=q)["datasets"])

    # %, _ and \ match themselves only, not as LIKE wildcards or escapes.
    assert found("%") == ["A\\B_%.T", "a%b.t"]
    assert found("_") == ["A\\B_%.T", "a_b.t"]
    assert found("\\") == ["A\\B_%.T", "a\\b.t"]
    assert found("a\\b") == ["A\\B_%.T", "a\\b.t"]
    assert found("B_%") == ["A\\B_%.T"]
    assert found("ÜNÏCODE.tå") == ["Ünïcode.Tåble"]
    assert found("") == sorted(names)


def test_a_rare_q_is_served_by_the_trigram_index_and_a_common_one_by_walking_the_names(
    database: Any, owner: psycopg.Connection[Any]
) -> None:
    if owner.execute("SELECT to_regclass('metastore.datasets_name_trgm_idx')").fetchone() == (None,):
        pytest.skip("pg_trgm is not available on this server")
    owner.execute(
        "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen) "
        "SELECT 'trino://h:8080', 'hive.sales.orders_' || md5(g::text), 'dataset', now(), now() "
        "FROM generate_series(1, 30000) AS g"
    )
    owner.execute("ANALYZE metastore.datasets")

    def index_scans() -> dict[str, int]:
        owner.execute("SELECT pg_stat_clear_snapshot()")
        rows = owner.execute(
            "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = 'datasets' "
            "AND indexrelname IN ('datasets_name_trgm_idx', 'datasets_order_idx')"
        ).fetchall()
        return dict(rows)

    def used_by(q: str) -> set[str]:
        before = index_scans()
        # A backend reports its statistics when it ends: one connection per call.
        with psycopg.connect(database.service_dsn, autocommit=True) as conn:
            assert page(conn, q=q)["datasets"]
        for _ in range(50):
            after = index_scans()
            if after != before:
                break
            time.sleep(0.1)
        return {name for name, scans in after.items() if scans > before[name]}

    rare = owner.execute("SELECT substr(md5('4242'), 3, 10)").fetchone()
    assert rare is not None
    assert used_by(rare[0]) == {"datasets_name_trgm_idx"}
    assert used_by("SALES.orders") == {"datasets_order_idx"}

    # Without pg_trgm the statistics of lower(name) still tell a common q from a rare one: a
    # common one walks the names instead of sorting the whole table.
    owner.execute("DROP INDEX metastore.datasets_name_trgm_idx")
    owner.execute("ANALYZE metastore.datasets")
    assert used_by("SALES.orders") == {"datasets_order_idx"}


def test_names_of_10_kb_are_paged_in_order_even_when_their_first_kilobytes_tie(
    service: psycopg.Connection[Any],
) -> None:
    # datasets_order_idx holds the first 1024 bytes of (namespace, name): names that share more
    # than that are ordered by the rest, across pages; a long namespace is filtered exactly.
    shared = "p" * 2000
    long_ns = "hdfs://" + "n" * 3000
    datasets = [{"namespace": "s3://b", "name": shared + f"{i:02d}" * 4000} for i in range(9, -1, -1)]
    datasets += [{"namespace": "s3://b", "name": f"short_{i}"} for i in range(5)]
    datasets += [{"namespace": long_ns + suffix, "name": "t"} for suffix in ("", "x", "/")]
    event = {"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": "r"}, "job": {"namespace": "j", "name": "n"}}
    assert ingest(service, {**event, "inputs": datasets})[0] == "stored"
    assert ingest(service, {**event, "run": {"runId": "again"}, "outputs": datasets[:3]})[0] == "stored"

    def walk(**filters: Any) -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        cursor = None
        while True:
            result = page(service, limit=3, cursor=cursor, **filters)
            seen += [(d["namespace"], d["name"]) for d in result["datasets"]]
            cursor = result["next_cursor"]
            if cursor is None:
                return seen

    everything = sorted((d["namespace"], d["name"]) for d in datasets)
    assert walk() == everything
    assert walk(namespace=long_ns) == [(long_ns, "t")]
    assert walk(namespace="s3://b") == [d for d in everything if d[0] == "s3://b"]
    assert walk(scheme="HDFS") == [d for d in everything if d[0].startswith("hdfs")]
    assert walk(q="P" * 30) == [d for d in everything if d[1].startswith(shared)]
