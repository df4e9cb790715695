"""Separate budgets: reads never starve ingest or readiness, and writers that cannot progress
turn the pod unready (and ready again once they can)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg

from tests.conftest import Database
from tests.support.checks import event, post_until_stored, stored_run_ids
from tests.support.eventually import eventually
from tests.support.service_fixtures import Serve


def test_reads_saturating_their_pool_never_fail_ingest_or_readiness(database: Database, serve: Serve) -> None:
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        # Enough datasets that a substring search is real work on every call.
        owner.execute(
            "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen) "
            "SELECT 'trino://h:8080', 'cat.s.t' || g, 'dataset', now(), now() FROM generate_series(1, 20000) AS g"
        )
    server = serve(
        METASTORE_READ_POOL_MAX="1",
        METASTORE_READ_TIMEOUT_MS="100",
    )
    stop = time.monotonic() + 6
    read_codes: list[int] = []
    lock = threading.Lock()

    def reader() -> None:
        with server.client() as http:
            while time.monotonic() < stop:
                code = http.get("/api/v1/datasets", params={"q": "9x"}).status_code
                with lock:
                    read_codes.append(code)

    readers = [threading.Thread(target=reader) for _ in range(12)]
    for t in readers:
        t.start()
    tag = uuid.uuid4().hex[:8]
    ingest_codes: list[int] = []
    ready_codes: list[int] = []
    try:
        with server.client() as http:
            i = 0
            while time.monotonic() < stop:
                ingest_codes.append(http.post("/api/v1/lineage", json=event(tag, i)).status_code)
                ready_codes.append(http.get("/readyz").status_code)
                i += 1
                time.sleep(0.05)
    finally:
        for t in readers:
            t.join(15)
        assert server.stop() == 0
    assert 503 in read_codes, "the reads never saturated their pool: the test proves nothing"
    assert set(ingest_codes) == {201} and len(ingest_codes) > 10
    assert set(ready_codes) == {200}
    assert len(stored_run_ids(database, tag)) == len(ingest_codes)


def test_stuck_writers_make_the_pod_unready_until_they_progress(database: Database, serve: Serve) -> None:
    server = serve(
        METASTORE_INGEST_MODE="async",
        METASTORE_DB_TIMEOUT_MS="500",
        METASTORE_WRITER_STUCK_S="2",
    )
    tag = uuid.uuid4().hex[:8]
    try:
        with server.client() as http, psycopg.connect(database.owner_dsn) as blocker:
            assert http.get("/readyz").status_code == 200
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            assert http.post("/api/v1/lineage", json=event(tag, 1)).status_code == 202
            deadline = time.monotonic() + 15
            while (ready := http.get("/readyz")).status_code == 200:
                assert time.monotonic() < deadline, "readiness never noticed the stuck writers"
                time.sleep(0.2)
            assert ready.status_code == 503 and ready.json()["status"] == "writers stuck"
            blocker.rollback()  # the lock goes: the writers store the event, readiness comes back
            eventually(
                lambda: http.get("/readyz").status_code == 200, timeout=15, interval=0.2, what="readiness coming back"
            )
        assert stored_run_ids(database, tag) == {f"{tag}-1"}
        # Nothing was set aside: a locked table is nobody's fault.
        with psycopg.connect(database.owner_dsn) as owner:
            assert owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone() == (0,)
    finally:
        assert server.stop() == 0


def test_made_up_methods_share_one_metrics_label(server: object, client: httpx.Client) -> None:
    for i in range(50):
        client.request(f"X{i}Y", "/api/v1/lineage")
    text = client.get("/metrics").text
    methods = {
        line.split('method="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("metastore_http_request_duration_seconds_count")
    }
    assert "other" in methods and not any(m.startswith("X") for m in methods)


def test_a_failing_database_is_not_waited_for_again_and_again(database: Database, serve: Serve) -> None:
    """Sync mode without a spool: after three requests that each waited out the budget, the next
    ones are answered 503 at once (one probe at a time tries the database), and all is well again
    once the database is."""
    server = serve(METASTORE_INGEST_TIMEOUT_MS="500")
    tag = uuid.uuid4().hex[:8]
    try:
        with server.client() as http, psycopg.connect(database.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            waited = []
            for i in range(3):
                started = time.monotonic()
                response = http.post("/api/v1/lineage", json=event(tag, i))
                waited.append(time.monotonic() - started)
                assert response.status_code == 503 and response.headers["Retry-After"] == "1"
            assert min(waited) > 0.4  # each waited out the budget
            started = time.monotonic()
            fast = http.post("/api/v1/lineage", json=event(tag, 3))
            assert fast.status_code == 503 and time.monotonic() - started < 0.3
            blocker.rollback()
            post_until_stored(http, event(tag, 4), what="the service trying the database again")
        assert stored_run_ids(database, tag) == {f"{tag}-4"}
    finally:
        assert server.stop() == 0


def test_with_a_spool_sync_mode_hands_a_slow_event_over_within_the_handoff(
    database: Database, tmp_path: Path, serve: Serve
) -> None:
    server = serve(
        METASTORE_SPOOL_DIR=str(tmp_path / "spool"),
        METASTORE_SPOOL_HANDOFF_MS="200",
    )
    tag = uuid.uuid4().hex[:8]
    try:
        with server.client() as http:
            assert http.post("/api/v1/lineage", json=event(tag, 0)).status_code == 201  # a healthy database
            with psycopg.connect(database.owner_dsn) as blocker:
                blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
                for i in range(1, 6):
                    started = time.monotonic()
                    response = http.post("/api/v1/lineage", json=event(tag, i))
                    assert response.status_code == 202 and time.monotonic() - started < 1.0
                blocker.rollback()
            eventually(
                lambda: len(stored_run_ids(database, tag)) >= 6,
                timeout=20,
                interval=0.2,
                what="the spooled events stored",
            )
    finally:
        assert server.stop() == 0
