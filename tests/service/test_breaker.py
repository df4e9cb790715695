"""The ingest circuit breaker and the writers' sorting of failures (service/metastore/ingest/)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import psycopg

from bench import floods
from bench.heavy_senders import heavy_body
from metastore.errors import ApiError
from metastore.ingest import Breaker
from metastore.ingest import environmental as _environmental
from tests.conftest import Database
from tests.support.checks import metric, stored_run_ids
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.service_fixtures import Serve

DEADLINE = ApiError(503, "the database did not answer within 1.5 s; retry later", "57014")


def test_a_probe_whose_client_left_lets_the_next_one_probe() -> None:
    """A probe cancelled mid-call (its client hung up) reported nothing: the breaker stayed open for
    good, answering every POST 503 while the database was well."""
    breaker = Breaker(threshold=3, cooldown_s=0.05)
    for _ in range(3):
        assert breaker.allow()
        breaker.failed(time.monotonic(), DEADLINE)
    assert not breaker.allow() and breaker.refusing()
    time.sleep(0.06)
    assert not breaker.refusing()  # asking takes no probe
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # one at a time
    breaker.abandon()
    assert breaker.allow()  # another request finds out
    breaker.answered()
    assert all(breaker.allow() for _ in range(5))


def test_failures_while_the_database_answers_others_do_not_open_it() -> None:
    """Two senders of events that could not be stored in time opened the breaker for everyone:
    only failures during which the database answered nobody count, and never a large event's own
    deadline."""
    breaker = Breaker(threshold=3, cooldown_s=10)
    for _ in range(10):
        started = time.monotonic()
        breaker.answered()  # another request was answered while this one waited
        breaker.failed(started, DEADLINE)
    for _ in range(10):
        breaker.failed(time.monotonic(), DEADLINE, large=True)
    assert breaker.allow() and not breaker.refusing()
    # The database answering nobody: three in a row open it, whatever the failure.
    for error in (DEADLINE, ApiError(503, "no database connection is available; retry later"), DEADLINE):
        assert breaker.allow()
        breaker.failed(time.monotonic(), error)
    assert breaker.refusing() and not breaker.allow()
    # A large event's connection failing is the store's trouble too.
    breaker = Breaker(threshold=1, cooldown_s=10)
    breaker.failed(time.monotonic(), ApiError(503, "the database could not complete the request", "08006"), large=True)
    assert breaker.refusing()


def test_a_data_error_of_a_group_is_an_events_not_the_environments() -> None:
    """Sorted as environmental, a group that fails with 400 was retried as is, for ever: the
    writers stopped storing every event behind it."""
    assert not _environmental(ApiError(400, "cannot get array length of a non-array", "22023"))
    assert not _environmental(ApiError(409, "conflict", "23505"))
    for code in ("08006", "53300", "55P03", "57P01", "40001", "42501"):
        assert _environmental(ApiError(503, "down", code)), code
    assert _environmental(ApiError(503, "pool", None))


def test_two_senders_of_events_that_cannot_be_stored_in_time_take_nobody_down(database: Database, serve: Serve) -> None:
    """Two clients posting 1.5 MB events the database could not store within the budget (20 000
    input datasets each) made the breaker refuse a third of everyone else's posts with 503. Each heavy
    event now fails alone (503, 57014: its own deadline, recorded in a metric and a log line), on
    the large events' own connection, while normal clients' events are stored and none of them is
    refused by the breaker."""
    server = serve()
    # 40 000 input datasets: about 4 s of the database's time alone, against the 1.5 s budget.
    heavy = heavy_body("fanout", 3_000_000)
    stop = threading.Event()
    normal: Counter[str] = Counter()
    heavies: Counter[str] = Counter()
    large_backends: list[int] = []

    def outcome(response: httpx.Response) -> str:
        code = response.json().get("error", {}).get("code") if response.status_code >= 400 else None
        return f"{response.status_code} {code or response.json().get('error', {}).get('message', '')}".strip()

    def heavy_sender(k: int) -> None:
        with server.client(timeout=30) as http:
            i = 0
            while not stop.is_set():
                i += 1
                body = heavy.replace(b"@RUNID@", f"heavy-{k}-{i}-{uuid.uuid4()}".encode(), 1)
                heavies[outcome(http.post("/api/v1/lineage", content=body))] += 1

    def normal_client(k: int) -> None:
        with server.client(timeout=30) as http:
            i = 0
            while not stop.is_set():
                i += 1
                normal[outcome(http.post("/api/v1/lineage", json=run_event(f"normal-{k}-{i}-{uuid.uuid4()}")))] += 1

    def watch_backends() -> None:
        with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'metastore-server-large'"
                    " AND state = 'active'"
                ).fetchone()
                large_backends.append(int(row[0]) if row else 0)
                time.sleep(0.05)

    try:
        missed_before = metric(server, "metastore_ingest_deadline_missed_total", lane="large")
        threads = [threading.Thread(target=heavy_sender, args=(k,)) for k in range(2)]
        threads += [threading.Thread(target=normal_client, args=(k,)) for k in range(6)]
        threads.append(threading.Thread(target=watch_backends))
        for t in threads:
            t.start()
        time.sleep(8)
        stop.set()
        for t in threads:
            t.join(60)
        refused_by_breaker = metric(server, "metastore_http_refused_total", reason="database_failing")
        missed = metric(server, "metastore_ingest_deadline_missed_total", lane="large") - missed_before
    finally:
        stop.set()
        assert server.stop() == 0
    # Nobody else was refused by the breaker; normal events were stored (a normal event may miss
    # the short budget on a busy machine, with its own 57014, never the breaker's refusal).
    assert refused_by_breaker == 0
    assert set(normal) <= {"201", "503 57014"}, normal
    assert normal["201"] >= 0.9 * sum(normal.values()), normal
    # Every heavy event failed alone, with its own deadline's SQLSTATE.
    assert heavies and set(heavies) == {"503 57014"}, heavies
    # One large event at a time in the database, on its own connection.
    assert large_backends and max(large_backends) <= 1, large_backends
    # Recorded: the metric, and a log line naming the size (never the body).
    assert missed >= 1
    logged = [line for line in server.log_lines() if "a large event (" in line]
    assert logged and all("cat.sch" not in line for line in logged)


def test_with_a_spool_a_large_event_is_spooled_for_the_stores_trouble_not_its_own(
    database: Database, tmp_path: Path, serve: Serve
) -> None:
    """With a spool, a large event that missed its deadline while the database answered others is
    answered 503, not spooled: the writers would spend the same time on it again, for a sender that
    can post such events faster than anything stores them. When the database answers nobody (a
    lock), a large event is spooled like any other, and stored once the lock is gone."""
    server = serve(
        METASTORE_SPOOL_DIR=str(tmp_path / "spool"),
        METASTORE_INGEST_TIMEOUT_MS="500",
        # Not the subject here: without it the lane would rest after the heavy events.
        METASTORE_LARGE_EVENT_SHARE_PERCENT="100",
    )
    tag = uuid.uuid4().hex[:8]
    heavy = heavy_body("fanout", 1_500_000)
    stop = threading.Event()

    def normal_client() -> None:
        with server.client() as http:
            i = 0
            while not stop.is_set():
                i += 1
                http.post("/api/v1/lineage", json=run_event(f"normal-{tag}-{i}"))

    try:
        normal = threading.Thread(target=normal_client)
        normal.start()
        with server.client(timeout=30) as http:
            answers = [
                http.post("/api/v1/lineage", content=heavy.replace(b"@RUNID@", f"{tag}-h{i}".encode(), 1))
                for i in range(3)
            ]
        stop.set()
        normal.join(30)
        assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == [(503, "57014")] * 3
        # The database answers nobody: a large event (storable, 400 KB) is spooled and stored later.
        large = floods.padded_event(f"{tag}-large", 400_000)
        with server.client(timeout=30) as http, psycopg.connect(database.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            assert http.post("/api/v1/lineage", content=large).status_code == 202
            blocker.rollback()
        eventually(
            lambda: f"{tag}-large" in stored_run_ids(database, tag),
            timeout=30,
            interval=0.2,
            what="the spooled large event stored",
        )
        # None of the heavy events was spooled, so none was stored by the writers either.
        assert not {f"{tag}-h{i}" for i in range(3)} & stored_run_ids(database, tag)
    finally:
        stop.set()
        assert server.stop() == 0
