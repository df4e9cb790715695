"""metastore.store_events: the one store path of every ingest function.

Writers of one dataset take its row in one order, whatever path they come by: a batch
(metastore.ingest_events) and a single event (metastore.ingest_event) racing on the same datasets
must never deadlock: one waits for the other.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import psycopg

from tests.conftest import Database


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
