"""Operating the service: SIGTERM under load, readiness and recovery when PostgreSQL stops or
freezes, statement deadlines, the async queue when full, metrics, logs and certificate reload."""

from __future__ import annotations

import json
import re
import signal
import socket
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import psycopg.sql
import pytest
import trustme
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.checks import event, post_until_stored, stored_run_ids
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server, wait_until_serving


@pytest.fixture
def db(database: Database) -> Database:
    return database


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sigterm_under_load_loses_no_acknowledged_event(
    mode: str, db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    server = start_server(
        db.service_dsn, tls_files, tmp_path / "server.log", METASTORE_INGEST_MODE=mode, METASTORE_ASYNC_BATCH_SIZE="20"
    )
    tag = uuid.uuid4().hex[:8]
    acknowledged: list[str] = []
    statuses: list[int] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + 30

    def client(worker: int) -> None:
        i = 0
        with server.client() as http:
            while time.monotonic() < stop_at:
                i += 1
                run_id = f"{worker}x{i}"
                try:
                    response = http.post("/api/v1/lineage", json=event(tag, 0) | {"run": {"runId": f"{tag}-{run_id}"}})
                except httpx.TransportError:
                    if server.process.poll() is not None:
                        return
                    continue
                with lock:
                    statuses.append(response.status_code)
                    if 200 <= response.status_code < 300:
                        acknowledged.append(f"{tag}-{run_id}")

    threads = [threading.Thread(target=client, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # well past start-up; load is flowing
    server.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    rc = server.process.wait(30)
    # Busy keep-alive connections are told to close, so shutdown does not wait out the grace period.
    assert time.monotonic() - signalled < 8, server.log.read_text()[-2000:]
    for t in threads:
        t.join(35)
    assert rc == 0, server.log.read_text()[-3000:]
    assert len(acknowledged) > 50
    expected = 202 if mode == "async" else 201
    assert expected in statuses
    missing = set(acknowledged) - stored_run_ids(db, tag)
    assert not missing, f"{len(missing)} acknowledged events are not stored"


def test_readiness_and_ingest_when_postgres_stops_and_comes_back(
    own_pg: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    server = start_server(own_pg.service_dsn, tls_files, tmp_path / "server.log", METASTORE_INGEST_TIMEOUT_MS="1000")
    try:
        with server.client() as http:
            assert http.get("/readyz").status_code == 200
            own_pg.server.stop("immediate")
            started = time.monotonic()
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.json()["status"] == "database unavailable"
            assert time.monotonic() - started < 2.0
            started = time.monotonic()
            posted = http.post("/api/v1/lineage", json=event("down", 1))
            assert posted.status_code == 503 and time.monotonic() - started < 4.0
            assert http.get("/healthz").status_code == 200  # liveness does not depend on the database

            own_pg.server.start()
            eventually(
                lambda: http.get("/readyz").status_code == 200, timeout=30, interval=0.2, what="readiness recovering"
            )
            recovered = time.monotonic() - started
            assert http.post("/api/v1/lineage", json=event("down", 2)).status_code == 201
            assert recovered < 30
    finally:
        assert server.stop() == 0


def test_readiness_is_bounded_when_postgres_is_frozen(own_pg: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    server = start_server(own_pg.service_dsn, tls_files, tmp_path / "server.log", METASTORE_INGEST_TIMEOUT_MS="1500")
    try:
        with server.client() as http:
            assert http.get("/readyz").status_code == 200
            own_pg.server.signal_all(signal.SIGSTOP)
            try:
                for _ in range(3):
                    started = time.monotonic()
                    assert http.get("/readyz").status_code == 503
                    assert time.monotonic() - started < 1.5
                started = time.monotonic()
                response = http.post("/api/v1/lineage", json=event("frozen", 1))
                assert response.status_code == 503
                assert time.monotonic() - started < 3.0  # the 1.5 s deadline, not Trino's 5 s
            finally:
                own_pg.server.signal_all(signal.SIGCONT)
            eventually(
                lambda: http.get("/readyz").status_code == 200, timeout=30, interval=0.2, what="readiness recovering"
            )
            assert http.post("/api/v1/lineage", json=event("frozen", 2)).status_code == 201
    finally:
        assert server.stop() == 0


def test_a_statement_past_its_deadline_is_cancelled_with_a_503(
    db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    server = start_server(db.service_dsn, tls_files, tmp_path / "server.log", METASTORE_INGEST_TIMEOUT_MS="500")
    try:
        with server.client() as http, psycopg.connect(db.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            started = time.monotonic()
            response = http.post("/api/v1/lineage", json=event("slow", 1))
            elapsed = time.monotonic() - started
            assert response.status_code == 503 and response.json()["error"]["code"] == "57014"
            assert elapsed < 1.5
            # Cancelled on the server, not left waiting (the service's sessions name themselves
            # metastore-server-<pool>; the blocker's transaction would see one snapshot only).
            with psycopg.connect(db.owner_dsn, autocommit=True) as eye:
                deadline = time.monotonic() + 2
                while True:
                    waiting = eye.execute(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE application_name LIKE 'metastore-server-%' AND wait_event_type = 'Lock'"
                    ).fetchone()
                    if waiting == (0,) or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
            assert waiting == (0,)
            blocker.rollback()
            assert http.post("/api/v1/lineage", json=event("slow", 1)).status_code == 201
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(("policy", "full_status"), [("reject", 503), ("wait", 503)])
def test_a_full_async_queue_answers_as_configured_and_loses_nothing(
    policy: str, full_status: int, db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    server = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_INGEST_MODE="async",
        METASTORE_ASYNC_QUEUE_SIZE="3",
        METASTORE_ASYNC_BATCH_SIZE="1",
        METASTORE_ASYNC_WRITERS="1",
        METASTORE_ASYNC_QUEUE_FULL=policy,
        METASTORE_ASYNC_QUEUE_WAIT_MS="300",
        METASTORE_DB_TIMEOUT_MS="60000",
    )
    tag = uuid.uuid4().hex[:8]
    try:
        with server.client() as http, psycopg.connect(db.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            codes = [http.post("/api/v1/lineage", json=event(tag, i)).status_code for i in range(8)]
            # The queue's bound counts what the writer holds too: one in its hands, two waiting.
            assert codes[:3] == [202] * 3
            assert set(codes[3:]) == {full_status}
            blocker.rollback()
            eventually(lambda: len(stored_run_ids(db, tag)) >= 3, timeout=10, interval=0.1, what="the 3 events stored")
            assert stored_run_ids(db, tag) == {f"{tag}-{i}" for i in range(3)}
            families = {f.name: f for f in text_string_to_metric_families(http.get("/metrics").text)}
            full = {
                s.labels["action"]: s.value
                for s in families["metastore_async_queue_full"].samples
                if s.name.endswith("_total")
            }
            assert full == {"rejected": 5.0}
    finally:
        assert server.stop() == 0


def test_a_full_async_queue_falls_back_to_storing_at_once(db: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    server = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_INGEST_MODE="async",
        METASTORE_ASYNC_QUEUE_SIZE="1",
        METASTORE_ASYNC_WRITERS="1",
        METASTORE_ASYNC_QUEUE_FULL="sync",
    )
    tag = uuid.uuid4().hex[:8]
    try:
        with server.client() as http:
            codes = {http.post("/api/v1/lineage", json=event(tag, i)).status_code for i in range(40)}
            assert codes <= {201, 202} and 202 in codes
            eventually(
                lambda: len(stored_run_ids(db, tag)) >= 40, timeout=10, interval=0.1, what="the 40 events stored"
            )
    finally:
        assert server.stop() == 0


def test_metrics_count_what_happened(server: Server, client: httpx.Client) -> None:
    def families() -> dict[str, Any]:
        return {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}

    def events(outcome: str) -> float:
        return sum(
            s.value
            for s in families()["metastore_events"].samples
            if s.name == "metastore_events_total" and s.labels["outcome"] == outcome
        )

    before = {o: events(o) for o in ("stored", "duplicate", "rejected")}
    tag = uuid.uuid4().hex[:8]
    client.post("/api/v1/lineage", json=event(tag, 1))
    client.post("/api/v1/lineage", json=event(tag, 1))
    client.post("/api/v1/lineage", content=b"{nope")
    after = {o: events(o) for o in ("stored", "duplicate", "rejected")}
    # Each event once, at its outcome.
    assert {o: after[o] - before[o] for o in after} == {"stored": 1, "duplicate": 1, "rejected": 1}
    fams = families()
    rejected = [s for s in fams["metastore_events"].samples if s.labels.get("reason") == "22P02"]
    assert rejected and rejected[0].labels["outcome"] == "rejected"
    routes = {s.labels["route"] for s in fams["metastore_http_request_duration_seconds"].samples}
    assert "/api/v1/lineage" in routes
    assert any(s.labels["query"] == "ingest_event" for s in fams["metastore_db_call_duration_seconds"].samples)
    pools = {(s.labels["pool"], s.labels["state"]) for s in fams["metastore_db_pool_connections"].samples}
    assert pools >= {(p, st) for p in ("ingest", "read", "health", "writer") for st in ("idle", "busy")}


def test_logs_are_json_lines_with_request_ids(server: Server, client: httpx.Client) -> None:
    response = client.post("/api/v1/lineage", content=b'{"eventTime": 5}', headers={"X-Request-ID": "req-42-abc"})
    assert response.status_code == 400 and response.headers["X-Request-ID"] == "req-42-abc"
    time.sleep(0.2)
    entries = [json.loads(line) for line in server.log_lines()]
    for entry in entries:
        assert {"asctime", "levelname", "name", "message"} <= set(entry)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}", entry["asctime"])
    mine = [e for e in entries if e.get("request_id") == "req-42-abc"]
    assert mine and "rejected" in mine[0]["message"]
    assert not any('"eventTime": 5' in line for line in server.log_lines())  # no bodies in the log


def test_a_renewed_certificate_is_served_without_a_restart(db: Database, tmp_path: Path) -> None:
    ca = trustme.CA()
    files = TLSFiles(tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))

    def issue() -> bytes:
        leaf = ca.issue_cert("localhost", "127.0.0.1")
        leaf.private_key_pem.write_to_path(str(files.key))
        leaf.cert_chain_pems[0].write_to_path(str(files.cert))
        return leaf.cert_chain_pems[0].bytes()

    issue()
    server = start_server(db.service_dsn, files, tmp_path / "server.log", METASTORE_TLS_RELOAD_S="1")
    port = int(server.url.rsplit(":", 1)[1])

    def served_certificate() -> bytes:
        context = ssl.create_default_context(cafile=str(files.ca))
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
            context.wrap_socket(sock, server_hostname="localhost") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return ssl.DER_cert_to_PEM_cert(der).encode()

    try:
        first = served_certificate()
        renewed = issue()
        eventually(
            lambda: served_certificate() != first, timeout=10, interval=0.3, what="the renewed certificate picked up"
        )
        assert served_certificate().strip() == renewed.strip()
        wait_until_serving(server)
    finally:
        assert server.stop() == 0


def test_async_sigkill_loses_at_most_the_queue(db: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    """The documented bound without a spool: a SIGKILL in async mode loses at most the queue (which counts
    what the writers hold), no more."""
    queue_size, batch, writers = 20, 5, 2
    server = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_INGEST_MODE="async",
        METASTORE_ASYNC_QUEUE_SIZE=str(queue_size),
        METASTORE_ASYNC_BATCH_SIZE=str(batch),
        METASTORE_ASYNC_WRITERS=str(writers),
        METASTORE_ASYNC_QUEUE_FULL="reject",
        METASTORE_DB_TIMEOUT_MS="60000",
    )
    tag = uuid.uuid4().hex[:8]
    with server.client() as http:
        accepted = [i for i in range(30) if http.post("/api/v1/lineage", json=event(tag, i)).status_code == 202]
        # Let some batches commit, then hold the rest in memory and kill the process.
        eventually(lambda: len(stored_run_ids(db, tag)) >= 10, timeout=10, interval=0.05, what="10 events stored")
        with psycopg.connect(db.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            accepted += [
                i for i in range(30, 60) if http.post("/api/v1/lineage", json=event(tag, i)).status_code == 202
            ]
            server.stop(signal.SIGKILL)
    lost = {f"{tag}-{i}" for i in accepted} - stored_run_ids(db, tag)
    print(f"async SIGKILL: {len(accepted)} accepted, {len(lost)} lost (bound {queue_size})")
    assert 0 < len(lost) <= queue_size


def test_pool_exhaustion_gives_503s_within_the_ingest_budget(db: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    """Waiting for a connection is part of the ingest budget: a request answers within it, used or not."""
    server = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_POOL_MIN="1",
        METASTORE_POOL_MAX="1",
        METASTORE_INGEST_TIMEOUT_MS="1500",
    )
    tag = uuid.uuid4().hex[:8]
    results: list[tuple[int, float]] = []
    try:
        with psycopg.connect(db.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")

            def post(i: int) -> None:
                with server.client() as http:
                    started = time.monotonic()
                    code = http.post("/api/v1/lineage", json=event(tag, i)).status_code
                    results.append((code, time.monotonic() - started))

            # The first request holds the only connection (waiting for the lock); the rest find none free.
            threads = [threading.Thread(target=post, args=(i,)) for i in range(5)]
            for t in threads:
                t.start()
                time.sleep(0.1)
            for t in threads:
                t.join(10)
            assert [code for code, _ in results] == [503] * 5
            assert all(seconds < 2.0 for _, seconds in results), results
            blocker.rollback()
        with server.client() as http:
            # The circuit breaker opened after those failures; its probe finds the database back.
            post_until_stored(
                http, event(tag, 9), what="an event stored once the breaker's probe finds the database back"
            )
        assert stored_run_ids(db, tag) == {f"{tag}-9"}
    finally:
        assert server.stop() == 0


def test_a_missing_grant_is_the_services_fault_not_the_clients(
    db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    server = start_server(db.service_dsn, tls_files, tmp_path / "server.log")
    try:
        with psycopg.connect(db.owner_dsn, autocommit=True) as owner:
            row = owner.execute("SELECT metastore.group_role('app')").fetchone()
            assert row is not None
            owner.execute(
                psycopg.sql.SQL("REVOKE EXECUTE ON FUNCTION metastore.ingest_event(bytea, text, text) FROM {}").format(
                    psycopg.sql.Identifier(row[0])
                )
            )
        with server.client() as http:
            response = http.post("/api/v1/lineage", json=event("grant", 1))
            assert response.status_code == 503 and response.json()["error"]["code"] == "42501"
            rejected = [
                line
                for line in http.get("/metrics").text.splitlines()
                if line.startswith("metastore_events_total") and 'outcome="rejected"' in line
            ]
            assert not rejected  # not counted as the client's mistake
        time.sleep(0.2)
        errors = [json.loads(line) for line in server.log_lines() if '"ERROR"' in line]
        assert any("grant" in e["message"] for e in errors)
    finally:
        assert server.stop() == 0
