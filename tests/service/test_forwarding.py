"""Live forwarding from a durable outbox: a store forwards every stored event to a second store,
across a restart of the receiver and of the forwarding service, losing nothing, in order per run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, create_database, drop_database
from tests.server_fixtures import Server, TLSFiles, start_server


def wait_for(check: Callable[[], bool], timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def payloads(db: Database) -> list[str]:
    with psycopg.connect(db.owner_dsn) as conn:
        return sorted(r[0] for r in conn.execute("SELECT payload::text FROM metastore.events"))


def run_order(db: Database, order_by: str) -> dict[str, list[str]]:
    with psycopg.connect(db.owner_dsn) as conn:
        rows = conn.execute(f"SELECT run_id, event_type FROM metastore.events ORDER BY {order_by}").fetchall()
    out: dict[str, list[str]] = {}
    for run, kind in rows:
        out.setdefault(run, []).append(kind)
    return out


def post_runs(server: Server, count: int) -> None:
    with server.client() as client:
        for _ in range(count):
            run = str(uuid.uuid4())
            for i, kind in enumerate(("START", "RUNNING", "COMPLETE")):
                event = {
                    "eventTime": f"2024-08-01T10:00:0{i}Z",
                    "eventType": kind,
                    "producer": "https://example.com/tests",
                    "run": {"runId": run},
                    "job": {"namespace": "fwd", "name": f"job-{run[:6]}"},
                    "outputs": [{"namespace": "s3://fwd", "name": f"out/{run[:6]}"}],
                }
                assert client.post("/api/v1/lineage", json=event).status_code == 201


def restart_on_same_port(old: Server, dsn: str, tls: TLSFiles, log: Path, **env: str) -> Server:
    assert old.stop() == 0
    return start_server(dsn, tls, log, port=old.port, **env)


def test_forwarding_survives_restarts_of_the_receiver_and_of_the_sender(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    source_db, receiver_db = create_database(pg_server), create_database(pg_server)
    receiver = start_server(receiver_db.service_dsn, tls_files, tmp_path / "receiver.log")
    forward_env = {"METASTORE_FORWARD_URL": receiver.url, "METASTORE_FORWARD_CA": str(tls_files.ca)}
    source = start_server(source_db.service_dsn, tls_files, tmp_path / "source.log", **forward_env)
    try:
        post_runs(source, 10)
        wait_for(lambda: len(payloads(receiver_db)) == 30, what="the first 30 events to arrive")
        with source.client() as client:
            status = client.get("/api/v1/forwarding").json()["targets"]
            assert [(t["target"], t["sent"], t["lag_seconds"]) for t in status] == [(receiver.url, 30, 0)]
            lag_line = f'metastore_forward_lag_seconds{{target="{receiver.url}"}} 0.0'
            assert lag_line in client.get("/metrics").text

        # The receiver goes away: events wait in the outbox, the lag grows, the error is reported.
        assert receiver.stop() == 0
        post_runs(source, 10)
        with source.client() as client:
            wait_for(
                lambda: client.get("/api/v1/forwarding").json()["targets"][0]["last_error"] is not None,
                what="the failure to be recorded",
            )
            time.sleep(1.0)
            lagging = client.get("/api/v1/forwarding").json()["targets"][0]
        assert lagging["sent"] == 30 and lagging["lag_seconds"] > 0.5

        receiver = restart_on_same_port(receiver, receiver_db.service_dsn, tls_files, tmp_path / "receiver2.log")
        wait_for(lambda: len(payloads(receiver_db)) == 60, what="the waiting events after the receiver's restart")

        # The sender restarts: it resumes from the stored cursor, not from memory.
        source = restart_on_same_port(source, source_db.service_dsn, tls_files, tmp_path / "source2.log", **forward_env)
        post_runs(source, 10)
        wait_for(lambda: len(payloads(receiver_db)) == 90, what="events stored after the sender's restart")
        with source.client() as client:
            wait_for(lambda: client.get("/api/v1/forwarding").json()["targets"][0]["lag_seconds"] == 0, what="lag 0")
            final = client.get("/api/v1/forwarding").json()["targets"][0]
        assert final["sent"] >= 90 and final["refused"] == 0

        assert payloads(receiver_db) == payloads(source_db)
        # In order per run: the receiver stored each run's events in the order the source did.
        assert run_order(receiver_db, "id") == run_order(source_db, "xact_id, id")

        # A forwarder that lost its progress (as after a crash before its cursor was saved) sends
        # again: the receiver answers 200 duplicate, counted as sent, and stores nothing twice.
        with psycopg.connect(source_db.owner_dsn, autocommit=True) as conn:
            conn.execute("UPDATE metastore.forward_targets SET cursor = NULL, sent = 0")
        with source.client() as client:
            wait_for(lambda: client.get("/api/v1/forwarding").json()["targets"][0]["sent"] >= 90, what="the resend")
            again = client.get("/api/v1/forwarding").json()["targets"][0]
        assert again["refused"] == 0 and again["lag_seconds"] == 0
        assert payloads(receiver_db) == payloads(source_db)
    finally:
        source.stop()
        receiver.stop()
        drop_database(source_db)
        drop_database(receiver_db)


def test_the_credentials_of_the_forwarding_url_are_shown_nowhere(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """GET /api/v1/forwarding and /metrics answer anyone: a user:password@ in METASTORE_FORWARD_URL
    (basic auth for the downstream) must not reach them, nor the log, nor the stored error."""
    source_db, receiver_db = create_database(pg_server), create_database(pg_server)
    receiver = start_server(receiver_db.service_dsn, tls_files, tmp_path / "receiver.log")
    scheme, rest = receiver.url.split("://")
    url = f"{scheme}://lineage-bot:s3cret-pw@{rest}"
    forward_env = {"METASTORE_FORWARD_URL": url, "METASTORE_FORWARD_CA": str(tls_files.ca)}
    source = start_server(source_db.service_dsn, tls_files, tmp_path / "source.log", **forward_env)
    try:
        post_runs(source, 2)
        wait_for(lambda: len(payloads(receiver_db)) == 6, what="the events to arrive")
        assert receiver.stop() == 0
        post_runs(source, 1)
        with source.client() as client:
            wait_for(
                lambda: client.get("/api/v1/forwarding").json()["targets"][0]["last_error"] is not None,
                what="the failure to be recorded",
            )
            status = client.get("/api/v1/forwarding").text
            metrics = client.get("/metrics").text
        assert receiver.url in status and f'target="{receiver.url}"' in metrics
        # The cursor's key keeps the whole URL: forwarding resumed where it was, nothing restarted.
        with psycopg.connect(source_db.owner_dsn) as conn:
            assert conn.execute("SELECT name FROM metastore.forward_targets").fetchall() == [(url,)]
        # An error that quotes the URL, as a client library's may, is shown without them too.
        with psycopg.connect(source_db.owner_dsn, autocommit=True) as conn:
            conn.execute("UPDATE metastore.forward_targets SET last_error = %s", (f"event 7: cannot reach {url}",))
        with source.client() as client:
            quoted = client.get("/api/v1/forwarding").text
        assert source.stop() == 0
        for text in (status, metrics, quoted, source.log.read_text()):
            assert "s3cret-pw" not in text and "lineage-bot:" not in text
    finally:
        source.stop()
        receiver.stop()
        drop_database(source_db)
        drop_database(receiver_db)
