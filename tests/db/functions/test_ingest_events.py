"""metastore.ingest_events: separately received bodies in one call, one result per body, in order."""

from __future__ import annotations

import json
from typing import Any

import psycopg


def test_one_result_per_body_in_order(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    good = {
        "eventTime": "2024-01-01T00:00:00Z",
        "eventType": "START",
        "run": {"runId": "r"},
        "job": {"namespace": "j", "name": "n"},
    }
    bodies = [
        json.dumps(good).encode(),
        b"{broken",
        json.dumps({"eventTime": "x", "eventType": "FAIL"}).encode(),
        json.dumps(good).encode(),
    ]
    rows = service.execute(
        "SELECT status, error_code, event_type FROM metastore.ingest_events(%s::bytea[])", (bodies,)
    ).fetchall()
    assert rows == [
        ("stored", None, "START"),
        ("rejected", "22P02", None),
        ("rejected", "22023", "FAIL"),
        ("duplicate", None, "START"),
    ]
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (1,)
    assert owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone() == (1,)


def test_an_empty_array_gives_no_rows(service: psycopg.Connection[Any]) -> None:
    assert service.execute("SELECT * FROM metastore.ingest_events(%s::bytea[])", ([],)).fetchall() == []


def test_concurrent_batches_over_the_same_datasets_do_not_deadlock(database: Any) -> None:
    """Two writers storing batches that touch the same datasets in opposite orders (as two async
    writers do) must not deadlock: every batch locks its datasets in one global order."""
    import threading

    tables = [{"namespace": "trino://h:8080", "name": f"s.t{i}"} for i in range(20)]

    def batch(tag: str, order: list[dict[str, str]]) -> list[bytes]:
        return [
            json.dumps(
                {
                    "eventTime": "2024-01-01T00:00:00Z",
                    "run": {"runId": f"{tag}-{i}"},
                    "job": {"namespace": "j", "name": "n"},
                    "inputs": [t],
                }
            ).encode()
            for i, t in enumerate(order)
        ]

    errors: list[BaseException] = []

    def writer(name: str, order: list[dict[str, str]]) -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                for round_ in range(15):
                    conn.execute(
                        "SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (batch(f"{name}{round_}", order),)
                    )
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=("a", tables)),
        threading.Thread(target=writer, args=("b", list(reversed(tables)))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
