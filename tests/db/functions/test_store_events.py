"""metastore.store_events: the one store path of every ingest function.

Writers of one dataset take its row in one order, whatever path they come by: a batch
(metastore.ingest_events) and a single event (metastore.ingest_event) racing on the same datasets
must never deadlock: one waits for the other.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from typing import Any

import psycopg
import pytest

from devtools.localpg import LocalPostgres
from tests.conftest import Database, create_database, drop_database
from tests.support.derived import derived_snapshot
from tests.support.lineage_events import ctas, fixture_events


def event(run: str, names: list[str]) -> bytes:
    return json.dumps(
        {
            "eventType": "COMPLETE",
            "eventTime": "2024-01-01T00:00:00Z",
            "producer": "https://example.com/test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/definitions/RunEvent",
            "run": {"runId": run},
            "job": {"namespace": "jobs", "name": "race"},
            "outputs": [{"namespace": "s3://race", "name": n} for n in names],
        }
    ).encode()


def test_a_batch_and_a_single_event_on_the_same_datasets_never_deadlock(database: Database) -> None:
    # "a" exists; each round a batch creates many datasets that sort after it, then locks "a". A single
    # event about "a" and the first of them arrives meanwhile: taking "a" first and then waiting for
    # the batch's new row, it deadlocked the batch when the batch took new rows before existing ones.
    with psycopg.connect(database.service_dsn, autocommit=True) as conn:
        conn.execute("SELECT metastore.ingest_event(%s::bytea)", (event(str(uuid.uuid4()), ["a"]),))
    errors: list[str] = []
    for _ in range(15):
        tag = uuid.uuid4().hex[:8]
        new = [f"b-{tag}-{i:04d}" for i in range(400)]
        batch = event(str(uuid.uuid4()), ["a", *new])
        single = event(str(uuid.uuid4()), ["a", new[0]])
        start = threading.Barrier(2)

        def run(sql: str, body: Any, start: threading.Barrier = start) -> None:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                start.wait()
                try:
                    rows = conn.execute(sql, (body,)).fetchall()
                    assert all(r[0] in ("stored", "duplicate") for r in rows), rows
                except psycopg.Error as exc:
                    errors.append(f"{exc.sqlstate}: {exc}")

        threads = [
            threading.Thread(target=run, args=("SELECT status FROM metastore.ingest_events(%s::bytea[])", [batch])),
            threading.Thread(target=run, args=("SELECT status FROM metastore.ingest_event(%s::bytea)", single)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert errors == [], errors


def _events(rng: random.Random) -> list[bytes]:
    """The fixtures, Trino CTAS queries over a few jobs, hours and field lists, resends, and refusals."""
    events = [json.dumps(e).encode() for e in fixture_events()]
    for i in range(120):
        fields = [{"name": f"c{i % 3}", "type": "varchar"}] if i % 4 else None
        when = f"2026-01-01T{i % 3:02d}:{i % 60:02d}:00Z"
        events.append(json.dumps(ctas(i, f"q{i % 5}", fields, when)).encode())
    events += [events[3], events[-7], b'{"eventTime": "2026-01-01T00:00:00Z"}', b"not json"]
    events += rng.sample(events, 10)
    rng.shuffle(events)
    return events


def _state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Everything ingest derives, by natural keys (ids aside)."""
    return {
        **derived_snapshot(conn),
        "datasets": conn.execute(
            "SELECT namespace, name, kind, first_seen, last_seen, input_events, output_events"
            " FROM metastore.datasets_view ORDER BY 1, 2"
        ).fetchall(),
        "links": conn.execute(
            "SELECT e.payload_sha256, d.namespace, d.name, l.direction FROM metastore.event_datasets l"
            " JOIN metastore.events e ON e.id = l.event_id AND e.event_time = l.event_time"  # co-located on Citus
            " JOIN metastore.datasets d ON d.id = l.dataset_id"
            " ORDER BY 1, 2, 3, 4"
        ).fetchall(),
        "symlinks": conn.execute(
            "SELECT c.namespace, c.name, s.namespace, s.name, l.type FROM metastore.dataset_symlinks l"
            " JOIN metastore.datasets c ON c.id = l.dataset_id JOIN metastore.datasets s ON s.id = l.symlink_id"
            " ORDER BY 1, 2, 3, 4, 5"
        ).fetchall(),
        "runs": conn.execute(
            "SELECT j.namespace, j.name, j.latest_sql, r.run_id, r.state, r.started_at, r.ended_at, r.event_count"
            " FROM metastore.runs r JOIN metastore.jobs j ON j.id = r.job_id ORDER BY 1, 2, 4"
        ).fetchall(),
        "rejected": conn.execute(
            "SELECT sqlstate, body_sha256 FROM metastore.rejected_events ORDER BY 1, 2"
        ).fetchall(),
    }


@pytest.mark.parametrize("seed", [1, 2])
def test_any_split_into_sets_stores_and_derives_what_one_by_one_does(
    pg_server: LocalPostgres, database: Database, seed: int
) -> None:
    rng = random.Random(seed)
    events = _events(rng)
    other = create_database(pg_server)
    try:
        with (
            psycopg.connect(database.service_dsn, autocommit=True) as one,
            psycopg.connect(other.service_dsn, autocommit=True) as sets,
        ):
            singles = [one.execute("SELECT status FROM metastore.ingest_event(%b)", (b,)).fetchone()[0] for b in events]  # type: ignore[index]
            grouped: list[str] = []
            start = 0
            while start < len(events):
                size = rng.choice([1, 2, 5, 17, 40])
                part = events[start : start + size]
                grouped += [r[0] for r in sets.execute("SELECT status FROM metastore.ingest_events(%s)", (part,))]
                start += size
            assert grouped == singles
            assert {"stored", "duplicate", "rejected"} <= set(singles)
        with (
            psycopg.connect(database.owner_dsn, autocommit=True) as a,
            psycopg.connect(other.owner_dsn, autocommit=True) as b,
        ):
            expected = _state(a)
            assert all(expected[k] for k in ("schemas", "edges", "columns", "datasets", "links", "symlinks", "runs"))
            assert _state(b) == expected
    finally:
        drop_database(other)
