"""A pod that is deleted (an upgrade, a drain, the secret-operator's restart before its certificate
expires) stores its spool first: on SIGTERM the service drains what waits on disk into the
database within METASTORE_SHUTDOWN_GRACE_S, and exits in time even when it cannot. The chart
derives the pod's grace period from that setting (docs/operations.md, "Shutdown")."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server

EVENTS = 40


def spool_events(server: Server, tag: str) -> None:
    with server.client() as http:
        for i in range(EVENTS):
            response = http.post("/api/v1/lineage", json=run_event(f"{tag}-{i}", job=tag))
            assert response.status_code == 202, response.text
    spooled = [line for line in server.metrics().splitlines() if line.startswith("metastore_spool_bytes ")]
    assert spooled and float(spooled[0].split()[1]) > 0, spooled


def stored(db: Database, tag: str) -> int:
    with psycopg.connect(db.owner_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",)).fetchone()
    return int(row[0]) if row else 0


def serve(db: Database, tls_files: TLSFiles, tmp_path: Path, log: str, grace_s: int) -> Server:
    return start_server(
        db.service_dsn,
        tls_files,
        tmp_path / log,
        METASTORE_INGEST_MODE="async",
        METASTORE_SPOOL_DIR=str(tmp_path / "spool"),
        METASTORE_DB_TIMEOUT_MS="1000",
        METASTORE_SHUTDOWN_GRACE_S=str(grace_s),
    )


@contextmanager
def sigterm_while_spooled(
    db: Database, tls_files: TLSFiles, tmp_path: Path, grace_s: int
) -> Iterator[tuple[Server, str, psycopg.Connection[Any], float]]:
    """A server (log server.log) whose events of a new tag wait in its spool (the database takes
    nothing: `blocker` holds its lock until rolled back) when it is sent SIGTERM; yields the server,
    the tag, the blocker and when the signal was sent."""
    tag = uuid.uuid4().hex[:8]
    server = serve(db, tls_files, tmp_path, "server.log", grace_s)
    with psycopg.connect(db.owner_dsn) as blocker:
        blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
        spool_events(server, tag)
        server.process.send_signal(signal.SIGTERM)
        yield server, tag, blocker, time.monotonic()


def test_sigterm_stores_the_spool_before_the_process_exits(
    database: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    with sigterm_while_spooled(database, tls_files, tmp_path, grace_s=30) as (server, tag, blocker, signalled):
        # The database comes back while the pod shuts down.
        threading.Timer(3, blocker.rollback).start()
        time.sleep(3.5)
    rc = server.process.wait(40)
    took = time.monotonic() - signalled
    assert rc == 0, server.log.read_text()[-3000:]
    assert took < 30, took
    assert stored(database, tag) == EVENTS  # stored by the pod that went, not left on its disk
    assert "shutdown: queue drained" in server.log.read_text()


def test_sigterm_with_the_database_away_exits_within_the_grace_and_keeps_the_spool(
    database: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    with sigterm_while_spooled(database, tls_files, tmp_path, grace_s=6) as (server, tag, blocker, signalled):
        rc = server.process.wait(30)
        took = time.monotonic() - signalled
        blocker.rollback()
    # Bounded by the grace (and the chart's grace period above it), however much waits.
    assert rc == 0 and took < 6 + 5, (rc, took)
    assert "stay in the spool for the next start" in server.log.read_text()
    assert stored(database, tag) == 0
    # The same volume, a new process (a restarted container): nothing was lost.
    again = serve(database, tls_files, tmp_path, "again.log", grace_s=6)
    try:
        eventually(
            lambda: stored(database, tag) >= EVENTS,
            timeout=30,
            interval=0.2,
            what="every event stored after the restart",
        )
        assert stored(database, tag) == EVENTS
    finally:
        assert again.stop() == 0
