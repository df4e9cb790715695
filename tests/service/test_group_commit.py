"""Group commit in sync mode: concurrent POSTs share one transaction and one commit, each is
answered with its own outcome once that commit is done, and what fails, fails alone.

To make a group certain, a first request is held in flight by a lock on metastore.events while
the others arrive: they form the next group, sent when the lock goes."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database
from tests.support.checks import event, metric
from tests.support.eventually import eventually
from tests.support.servers import Server
from tests.support.service_fixtures import Serve

ONE_GROUP_BEHIND_A_LOCK = {
    "METASTORE_GROUP_COMMIT_EVENTS": "64",
    # One call in flight: all that arrive behind the held one form one group (with two, the
    # second call would take whichever arrived first, alone).
    "METASTORE_GROUP_COMMIT_CALLS": "1",
    "METASTORE_INGEST_TIMEOUT_MS": "5000",
}


def post_together(server: Server, bodies: list[bytes]) -> list[tuple[int, dict[str, Any], float]]:
    """Each body from its own client, at once; (status, answer, seconds) in the order given."""
    answers: list[tuple[int, dict[str, Any], float]] = [(0, {}, 0.0)] * len(bodies)
    ready = threading.Barrier(len(bodies))

    def post(i: int) -> None:
        with server.client() as http:
            http.get("/healthz")  # the TLS handshake before the barrier
            ready.wait()
            started = time.monotonic()
            response = http.post("/api/v1/lineage", content=bodies[i])
            answers[i] = (response.status_code, response.json(), time.monotonic() - started)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return answers


def behind_a_lock(
    db: Database, server: Server, bodies: list[bytes], hold_s: float = 1.0
) -> list[tuple[int, dict[str, Any], float]]:
    """One event held in flight by a lock while `bodies` arrive together; then the lock goes."""
    answers: list[tuple[int, dict[str, Any], float]] = []
    with psycopg.connect(db.owner_dsn) as blocker, psycopg.connect(db.owner_dsn, autocommit=True) as observer:
        blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
        first = threading.Thread(target=lambda: post_together(server, [json.dumps(event("opener", 0)).encode()]))
        first.start()
        eventually(lambda: _lock_waiters(observer) == 1, interval=0.02, what="the first request reaching the lock")
        others = threading.Thread(target=lambda: answers.extend(post_together(server, bodies)))
        others.start()
        time.sleep(hold_s)  # they arrive while the first one's call is in flight
        blocker.rollback()
        others.join(30)
        first.join(30)
    return answers


def _lock_waiters(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        # pg_locks, not pg_stat_activity: another role's sessions show there without their wait events.
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'metastore.events'::regclass"
    ).fetchone()
    return int(row[0]) if row else 0


def test_concurrent_posts_share_commits_and_each_gets_its_own_answer(database: Database, serve: Serve) -> None:
    server = serve(**ONE_GROUP_BEHIND_A_LOCK)
    tag = uuid.uuid4().hex[:8]
    bodies = [json.dumps(event(tag, i)).encode() for i in range(12)]
    bodies.append(bodies[3])  # the same event twice in one group: stored once
    try:
        answers = behind_a_lock(database, server, bodies)
        calls = metric(server, "metastore_ingest_group_size_count")
        events = metric(server, "metastore_ingest_group_size_sum")
        stored = metric(server, "metastore_events_total", outcome="stored")
        duplicate = metric(server, "metastore_events_total", outcome="duplicate")
    finally:
        assert server.stop() == 0
    statuses = [status for status, _, _ in answers]
    # The same event twice: whichever arrived first is stored (201), the other is its duplicate.
    assert statuses[:3] + statuses[4:12] == [201] * 11 and sorted((statuses[3], statuses[12])) == [200, 201], answers
    assert answers[12][1]["event_id"] == answers[3][1]["event_id"]
    # Fewer commits than events: the opener's, then one (or a few) for the thirteen behind it.
    assert events == 14 and calls < 8, (calls, events)
    assert (stored, duplicate) == (13, 1)  # each event counted once
    with psycopg.connect(database.owner_dsn) as conn:
        for i, (_, answer, _) in enumerate(answers[:12]):
            row = conn.execute("SELECT run_id FROM metastore.events WHERE id = %s", (answer["event_id"],)).fetchone()
            assert row == (f"{tag}-{i}",)  # each answer is about its own event


def test_an_event_that_fails_fails_alone(database: Database, serve: Serve) -> None:
    """In one group: an invalid event (refused by its own check) and one the database refuses
    as a whole call (a trigger raising for its run id) get their 4xx; the rest are stored."""
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute(
            """
            CREATE FUNCTION metastore.test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.run_id LIKE '%-poison' THEN
                    RAISE EXCEPTION 'poisoned' USING ERRCODE = '22023';
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER test_poison AFTER INSERT ON metastore.events
                FOR EACH ROW EXECUTE FUNCTION metastore.test_poison();
            """
        )
    server = serve(**ONE_GROUP_BEHIND_A_LOCK)
    tag = uuid.uuid4().hex[:8]
    bodies = [json.dumps(event(tag, i)).encode() for i in range(8)]
    invalid = event(tag, 100)
    del invalid["eventTime"]
    bodies[2] = json.dumps(invalid).encode()
    bodies[5] = json.dumps(event(tag, 0) | {"run": {"runId": f"{tag}-poison"}}).encode()
    try:
        answers = behind_a_lock(database, server, bodies)
        splits = metric(server, "metastore_ingest_group_splits_total")
        counted = {o: metric(server, "metastore_events_total", outcome=o) for o in ("stored", "rejected")}
    finally:
        assert server.stop() == 0
    statuses = [status for status, _, _ in answers]
    assert statuses == [201, 201, 400, 201, 201, 400, 201, 201], answers
    assert answers[5][1]["error"]["code"] == "22023"
    assert answers[2][1]["error"]["code"].startswith("22")
    assert splits >= 1  # the poisoned call was split, not failed as a whole
    assert counted == {"stored": 7, "rejected": 2}  # the opener and six; two refused, each once
    with psycopg.connect(database.owner_dsn) as conn:
        rows = conn.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",)).fetchall()
    assert {r[0] for r in rows} == {f"{tag}-{i}" for i in (0, 1, 3, 4, 6, 7)}


def test_a_group_the_database_cannot_take_answers_503_each_within_the_budget(database: Database, serve: Serve) -> None:
    server = serve(
        METASTORE_GROUP_COMMIT_EVENTS="64",
        METASTORE_INGEST_TIMEOUT_MS="500",
    )
    tag = uuid.uuid4().hex[:8]
    try:
        with psycopg.connect(database.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            answers = post_together(server, [json.dumps(event(tag, i)).encode() for i in range(8)])
            blocker.rollback()
        stored = metric(server, "metastore_events_total", outcome="stored")
    finally:
        assert server.stop() == 0
    assert [status for status, _, _ in answers] == [503] * 8, answers
    # Each within its own budget from its arrival (0.5 s; the bound only catches waiting twice).
    assert all(seconds < 1.5 for _, _, seconds in answers), answers
    assert stored == 0


def test_with_a_spool_a_group_is_handed_over_within_the_handoff_and_counted_once(
    database: Database, tmp_path: Path, serve: Serve
) -> None:
    server = serve(
        METASTORE_SPOOL_DIR=str(tmp_path / "spool"),
        METASTORE_SPOOL_HANDOFF_MS="200",
        METASTORE_GROUP_COMMIT_EVENTS="64",
    )
    tag = uuid.uuid4().hex[:8]
    run_ids = {f"{tag}-{i}" for i in range(8)}
    try:
        with psycopg.connect(database.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            answers = post_together(server, [json.dumps(event(tag, i)).encode() for i in range(8)])
            blocker.rollback()
        with psycopg.connect(database.owner_dsn) as conn:
            query = "SELECT run_id FROM metastore.events WHERE run_id LIKE %s"
            eventually(
                lambda: {r[0] for r in conn.execute(query, (f"{tag}-%",)).fetchall()} == run_ids,
                timeout=30,
                interval=0.02,
                what="the spooled events stored",
            )
        counted = sum(metric(server, "metastore_events_total", outcome=o) for o in ("stored", "duplicate"))
    finally:
        assert server.stop() == 0
    assert [status for status, _, _ in answers] == [202] * 8, answers
    assert all(seconds < 1.5 for _, _, seconds in answers), answers  # the handoff and an fsync
    assert counted == 8  # each once: by the writer that stored it, not by the group that gave it up


def test_at_most_the_set_number_of_calls_in_flight(database: Database, serve: Serve) -> None:
    """METASTORE_GROUP_COMMIT_CALLS=2: while two calls wait on a lock, the rest wait together for one
    of them to return, and go as one group."""
    server = serve(
        METASTORE_GROUP_COMMIT_EVENTS="64",
        METASTORE_GROUP_COMMIT_CALLS="2",
        METASTORE_INGEST_TIMEOUT_MS="8000",
    )
    tag = uuid.uuid4().hex[:8]
    answers: list[tuple[int, dict[str, Any], float]] = []
    try:
        with (
            psycopg.connect(database.owner_dsn) as blocker,
            psycopg.connect(database.owner_dsn, autocommit=True) as observer,
        ):
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            first = threading.Thread(target=lambda: post_together(server, [json.dumps(event(tag, 0)).encode()]))
            first.start()
            eventually(lambda: _lock_waiters(observer) == 1, interval=0.02, what="the first request reaching the lock")
            second = threading.Thread(target=lambda: post_together(server, [json.dumps(event(tag, 1)).encode()]))
            second.start()
            eventually(
                lambda: _lock_waiters(observer) == 2, interval=0.02, what="a second call sent while the first waited"
            )
            bodies = [json.dumps(event(tag, i)).encode() for i in range(2, 12)]
            others = threading.Thread(target=lambda: answers.extend(post_together(server, bodies)))
            others.start()
            time.sleep(1.0)
            waiting = _lock_waiters(observer)
            blocker.rollback()
            for t in (first, second, others):
                t.join(30)
        calls = metric(server, "metastore_ingest_group_size_count")
        events = metric(server, "metastore_ingest_group_size_sum")
    finally:
        assert server.stop() == 0
    assert waiting == 2  # never a third call
    assert [status for status, _, _ in answers] == [201] * 10, answers
    assert (calls, events) == (3, 12)
