"""The same events give the same tables and the same answer to every read call on Citus as on
plain PostgreSQL 15: each store gets the same ingest calls in the same order, as the service role;
then every read function is called with the same arguments on both, as the service role."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from bench.lineage import ctas
from bench.run import body, templates
from tests.conftest import Database, fixture_files
from tests.support.events import run_event
from tests.support.reads import VIEWS, read_calls, tables, view_rows, without_unequal

RESENT = 100


def day(offset: int, minute: int) -> str:
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=offset)
    return (start + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def events() -> list[bytes]:
    """About 700 events: every fixture (some refused), Trino CTAS events with column lineage, Trino
    events of 3 to 250 KB, and events over yesterday, today and a day of 2024 that has no partition,
    with symlinks, schemas, datasets shared between jobs, job and dataset events."""
    out = [path.read_bytes() for path in fixture_files()]
    out += [ctas(i) for i in range(150)]
    out += [body(t, f"0190c000-0000-7000-8000-{i:012d}") for i, t in enumerate(templates(60) * 3)]
    for i in range(300):
        when = day(-1 + i % 2, i * 4) if i % 10 else f"2024-03-0{1 + i % 3}T10:{i % 60:02d}:00Z"
        fields = [{"name": f"c{k}", "type": "varchar"} for k in range(i % 4 + 1)]
        inputs: list[Any] = [
            {
                "namespace": "trino://h:8080",
                "name": f"cat.s.t{i % 37}",
                "facets": {
                    "schema": {"fields": fields},
                    "symlinks": {"identifiers": [{"namespace": "hive://m", "name": f"s.t{i % 11}", "type": "TABLE"}]},
                },
            }
        ]
        event = run_event(
            f"0190d000-0000-7000-8000-{i:012d}",
            job=f"job{i % 23}",
            namespace=f"ns{i % 3}",
            inputs=inputs,
            outputs=[f"cat.s.out{i % 13}"],
            event_type=("START", "RUNNING", "COMPLETE", "FAIL")[i % 4],
            event_time=when,
        )
        if i % 25 == 0:
            event = {k: event[k] for k in ("eventTime", "producer", "job", "inputs")}  # a job event
        if i % 31 == 0:
            event = {"eventTime": when, "producer": "p", "dataset": {"namespace": "s3://b", "name": f"d{i}"}}
        out.append(json.dumps(event).encode())
    return out


def ingest_all(dsn: str, bodies: list[bytes]) -> list[tuple[Any, ...]]:
    """Singly, in sets (ingest_events) and as JSON arrays (ingest_batch), then RESENT of them again."""
    answers: list[tuple[Any, ...]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(0, len(bodies), 10):
            chunk = bodies[i : i + 10]
            if i % 30 == 0:
                for b in chunk:
                    answers.append(conn.execute("SELECT * FROM metastore.ingest_event(%b)", (b,)).fetchone() or ())
            elif i % 30 == 10:
                answers += conn.execute("SELECT * FROM metastore.ingest_events(%s::bytea[])", (chunk,)).fetchall()
            else:
                array = b"[" + b",".join(chunk) + b"]"
                answers.append(conn.execute("SELECT * FROM metastore.ingest_batch(%b)", (array,)).fetchone() or ())
        again = bodies[::7][:RESENT]
        answers += conn.execute("SELECT * FROM metastore.ingest_events(%s::bytea[])", (again,)).fetchall()
        for b in again[:20]:
            answers.append(conn.execute("SELECT * FROM metastore.ingest_event(%b)", (b,)).fetchone() or ())
    return answers


def test_the_same_events_give_the_same_tables_and_answers_as_plain_postgresql(
    database: Database, plain_db: Database
) -> None:
    bodies = events()
    assert len(bodies) > 650
    on_citus, on_plain = ingest_all(database.service_dsn, bodies), ingest_all(plain_db.service_dsn, bodies)
    assert without_unequal(on_citus) == without_unequal(on_plain)
    # ingest_batch answers a set of events with one summary: those are counted by the tables below.
    statuses = [a[0] for a in on_plain if a and a[0] in ("stored", "duplicate", "rejected")]
    assert statuses.count("duplicate") >= RESENT and statuses.count("rejected") > 0

    # What events add to a dataset waits in dataset_activity until a random roll-up folds it into
    # datasets: the split differs from run to run, the sum (datasets_view, among the read calls) not.
    on_plain_tables, on_citus_tables = tables(plain_db.owner_dsn), tables(database.owner_dsn)
    for split in ("datasets", "dataset_activity"):
        del on_plain_tables[split], on_citus_tables[split]
    # The feed's order on Citus (docs/events.md, "On Citus"): every stored event, numbered or pending.
    feed_order, feed_pending = on_citus_tables.pop("feed_order"), on_citus_tables.pop("feed_pending")
    assert len(feed_order) + len(feed_pending) == len(on_citus_tables["events"])
    assert on_citus_tables == on_plain_tables
    assert len(on_plain_tables["event_datasets"]) > len(on_plain_tables["events"]) > 500
    # Citus checks the privileges of a view's reader on the distributed tables under it, which only
    # the owner has: dataset_events_view (over events and their links) is the owner's there
    # (docs/scale.md, section 5), with the same rows.
    with (
        psycopg.connect(database.service_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT count(*) FROM metastore.dataset_events_view")
    with psycopg.connect(database.owner_dsn) as on_c, psycopg.connect(plain_db.owner_dsn) as on_p:
        rows = view_rows(on_c, "dataset_events_view")
        assert rows == view_rows(on_p, "dataset_events_view") and len(rows) > 500
    views = tuple(v for v in VIEWS if v != "dataset_events_view")
    citus_calls = list(read_calls(database.service_dsn, views))
    plain_calls = list(read_calls(plain_db.service_dsn, views))
    assert [name for name, _ in citus_calls] == [name for name, _ in plain_calls]
    assert len(citus_calls) > 500
    for (name, on_c), (_, on_p) in zip(citus_calls, plain_calls, strict=True):
        assert without_unequal(on_c) == without_unequal(on_p), name
