"""metastore.ingest_events: separately received bodies in one call, one result per body, in order."""

from __future__ import annotations

import json
import time
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
    # Only well-formed JSON is recorded, as the bytes received.
    assert owner.execute("SELECT body_prefix, sqlstate FROM metastore.rejected_events").fetchall() == [
        (bodies[2].decode(), "22023")
    ]


def test_a_poison_event_among_good_ones_is_refused_quickly_and_the_others_stored(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    def event(i: int, **extra: Any) -> bytes:
        base = {"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": f"r{i}"}, "job": {"namespace": "j", "name": "n"}}
        return json.dumps({**base, **extra}).encode()

    # 5000 numbers of 131,072 digits each, were they printed: about 650 MB of text.
    numbers = b", ".join([b"1e131071"] * 5000)
    poison = event(0).replace(b'"job"', b'"facets": {"x": [' + numbers + b'], "y": "z"}, "job"')
    bodies = [event(1), poison, event(2)]
    started = time.perf_counter()
    rows = service.execute("SELECT status, error_code FROM metastore.ingest_events(%s::bytea[])", (bodies,)).fetchall()
    elapsed = time.perf_counter() - started
    assert rows == [("stored", None), ("rejected", "22003"), ("stored", None)]
    # Printing the numbers took about 10 s; refusing them takes milliseconds. Only the order is asserted.
    assert elapsed < 3, elapsed
    kept = owner.execute("SELECT body_bytes, sqlstate FROM metastore.rejected_events").fetchall()
    assert kept == [(len(poison), "22003")]


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
