"""metastore export | import | replay between real stores: two (three) databases, each behind its
own server process over TLS. A round trip gives equal events and equal datasets."""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from string import Template
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, create_database, drop_database, fixture_files, load_fixture
from tests.service.receivers import Got, Receiver, Reply
from tests.support.certs import TLSFiles
from tests.support.servers import Server, start_server
from tests.support.transfer import cli, events_of, run


@pytest.fixture(scope="module")
def stores(pg_server: Any, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """Three stores: the source, and two empty ones to fill by import and by replay."""
    made: list[tuple[Database, Server]] = []
    try:
        for i in range(3):
            db = create_database(pg_server)
            made.append((db, start_server(db.service_dsn, tls_files, tmp_path_factory.mktemp(f"store{i}") / "log")))
        yield made
    finally:
        for db, server in made:
            server.stop()
            drop_database(db)


RAW_EVENT = Template(
    '{"eventTime": "2024-07-0${day}T10:00:00.${frac}Z", "eventType": "COMPLETE", "producer": "p", '
    '"run": {"runId": "${tag}", "facets": {"n": {"big": 123456789012345678901234567890, '
    '"pi": 3.14159265358979323846264338327950288, "zero": 0.0, "none": null, "list": [{}, null, "é✓"]}}}, '
    '"job": {"namespace": "replay-${ns}", "name": "job-${i}"}, '
    '"inputs": [{"namespace": "trino://t:8080", "name": "cat.sch.in${t}", "facets": {"symlinks": '
    '{"identifiers": [{"namespace": "hive://m", "name": "sch.in${t}", "type": "TABLE"}]}}}], '
    '"outputs": [{"namespace": "s3://b", "name": "out/${tag}"}]}'
)


def seed(server: Server) -> int:
    """The shared fixtures, plus events a careless re-serialiser would change: nulls, long
    decimals, big integers, empty objects in lists, unicode."""
    stored = 0
    with server.client() as client:
        for path in fixture_files():
            response = client.post("/api/v1/lineage", json=load_fixture(path))
            stored += response.status_code == 201
        for i in range(40):
            tag = uuid.uuid4().hex[:6]
            body = RAW_EVENT.substitute(day=1 + i % 3, frac=f"{i:06d}", tag=tag, ns=i % 2, i=i, t=i % 5)
            response = client.post("/api/v1/lineage", content=body, headers={"Content-Type": "application/json"})
            assert response.status_code == 201, response.text
            stored += 1
    return stored


def datasets_of(db: Database) -> list[tuple[Any, ...]]:
    with psycopg.connect(db.owner_dsn) as conn:
        rows = conn.execute(
            "SELECT namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events "
            "FROM metastore.datasets_view ORDER BY namespace, name"
        ).fetchall()
        links = conn.execute(
            "SELECT a.namespace, a.name, b.namespace, b.name, s.type FROM metastore.dataset_symlinks s "
            "JOIN metastore.datasets a ON a.id = s.dataset_id JOIN metastore.datasets b ON b.id = s.symlink_id "
            "ORDER BY 1, 2, 3, 4, 5"
        ).fetchall()
    return [tuple(r) for r in rows] + [("symlink", *r) for r in links]


def test_export_then_import_into_a_second_store_gives_equal_events_and_datasets(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    (source_db, source), (target_db, target), _ = stores
    stored = seed(source)
    dump = tmp_path / "events.ndjson.gz"
    exported = cli("export", "--from", source.url, "--ca", tls_files.ca, "-o", dump, ca=tls_files.ca)
    assert exported["events"] == stored and exported["gzip"]
    with gzip.open(dump, "rt", encoding="utf-8") as f:
        first = json.loads(f.readline())
    assert set(first) == {"id", "cursor", "received_at", "source_kind", "source_principal", "event"}

    imported = cli("import", "--to", target.url, "--ca", tls_files.ca, "--batch-size", "25", dump, ca=tls_files.ca)
    assert (imported["read"], imported["stored"], imported["duplicates"], imported["failed"]) == (stored, stored, 0, 0)
    assert events_of(target_db) == events_of(source_db)
    assert datasets_of(target_db) == datasets_of(source_db)

    # Importing again stores nothing twice: the ingest functions de-duplicate.
    again = cli("import", "--to", target.url, "--ca", tls_files.ca, dump, ca=tls_files.ca)
    assert (again["stored"], again["duplicates"]) == (0, stored)
    assert len(events_of(target_db)) == stored


def test_replay_into_a_third_store_resumes_from_its_checkpoint_and_gives_equal_events(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    (source_db, source), _, (target_db, target) = stores
    total = len(events_of(source_db))
    assert total > 40  # seeded by the test above, or now
    checkpoint = tmp_path / "replay.checkpoint"
    common = ("replay", "--from", source.url, "--ca", tls_files.ca, "--to", target.url, "--to-ca", tls_files.ca)

    # Stopped after 10 events (as an interrupted run would be), then resumed: nothing sent twice.
    started = time.monotonic()
    first = cli(*common, "--checkpoint", checkpoint, "--limit", "10", "--rate", "40", ca=tls_files.ca)
    assert time.monotonic() - started >= 9 / 40  # the rate limit held
    assert first["sent"] == 10 and first["refused"] == 0 and first["resumed_from"] is None
    saved = json.loads(checkpoint.read_text())
    assert saved["cursor"] == first["cursor"] and saved["sent"] == 10
    with psycopg.connect(target_db.owner_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM metastore.events").fetchone() == (10,)

    rest = cli(*common, "--checkpoint", checkpoint, ca=tls_files.ca)
    assert rest["resumed_from"] == first["cursor"]
    assert rest["sent"] == total - 10 and rest["sent_total"] == total and rest["refused"] == 0
    assert events_of(target_db) == events_of(source_db)
    assert datasets_of(target_db) == datasets_of(source_db)

    # A checkpoint is tied to its filters and target.
    other = subprocess.run(
        [sys.executable, "-m", "metastore", *map(str, common), "--checkpoint", str(checkpoint), "--job-name", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert other.returncode == 2 and "checkpoint of another replay" in other.stderr


def test_replay_with_filters_sends_only_what_they_select(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    (source_db, source), _, _ = stores
    if len(events_of(source_db)) < 40:
        seed(source)
    with psycopg.connect(source_db.owner_dsn) as conn:
        expected = conn.execute(
            "SELECT count(*) FROM metastore.events WHERE job_namespace = 'replay-1' AND event_time >= '2024-07-02'"
        ).fetchone()
    db = create_database(source_db.server)
    target = start_server(db.service_dsn, tls_files, tmp_path / "log")
    try:
        summary = cli(
            "replay", "--from", source.url, "--ca", tls_files.ca, "--to", target.url, "--to-ca", tls_files.ca,
            "--job-namespace", "replay-1", "--event-time-from", "2024-07-02", "--since", "1d",
            ca=tls_files.ca,
        )  # fmt: skip
        assert expected is not None and summary["sent"] == expected[0] > 0
        assert len(events_of(db)) == expected[0]
    finally:
        target.stop()
        drop_database(db)


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The command's own lines on stderr (not its log records), without the one that says where it posts."""
    return [line for line in done.stderr.splitlines() if line.startswith("metastore ") and ": posting to " not in line]


def test_a_replay_to_a_wrong_url_fails_and_one_to_the_right_url_then_sends_every_event(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """--to given as https://target/api/v1 posts to /api/v1/api/v1/lineage: the target's 404 says
    nothing about the events, so the replay exits 1 naming the answer and the URL, and its
    checkpoint does not move. The ingest URL itself is accepted, and said to be where it posts."""
    (source_db, source), _, _ = stores
    if len(events_of(source_db)) < 40:
        seed(source)
    db = create_database(source_db.server)
    target = start_server(db.service_dsn, tls_files, tmp_path / "log")
    checkpoint = tmp_path / "replay.checkpoint"
    common = ("replay", "--from", source.url, "--ca", tls_files.ca, "--to-ca", tls_files.ca, "--checkpoint", checkpoint)
    try:
        wrong = run(*common, "--to", f"{target.url}/api/v1")
        assert wrong.returncode == 1
        [line] = errors(wrong)
        assert line.startswith(f"metastore replay: {target.url}/api/v1/api/v1/lineage answered 404")
        assert "Traceback" not in wrong.stderr
        assert not checkpoint.exists() or json.loads(checkpoint.read_text())["cursor"] is None
        assert events_of(db) == []

        right = run(*common, "--to", f"{target.url}/api/v1/lineage")
        assert right.returncode == 0, right.stderr
        assert f"metastore replay: posting to {target.url}/api/v1/lineage" in right.stderr
        summary = json.loads(right.stdout.strip().splitlines()[-1])
        assert summary["sent"] == len(events_of(source_db)) and summary["refused"] == 0
        assert events_of(db) == events_of(source_db)
    finally:
        target.stop()
        drop_database(db)


def test_replay_stops_at_answers_that_say_nothing_resumes_there_and_skips_only_what_the_target_judges(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """Against a real HTTP receiver: a 503 (after the retries), a 429 and a 302 stop the replay at
    the event (exit 1, the checkpoint on the last event stored or judged); a 422 judges its event,
    which is counted refused and skipped. Run again, the replay sends the rest: every event but the
    judged one arrives once, in the feed's order."""
    (source_db, source), _, _ = stores
    if len(events_of(source_db)) < 40:
        seed(source)
    with psycopg.connect(source_db.owner_dsn) as conn:
        feed = [r[0].encode() for r in conn.execute("SELECT payload::text FROM metastore.events ORDER BY xact_id, id")]
    accepted: list[bytes] = []
    answers: dict[int, list[Reply]] = {
        3: [Reply(503, b"busy"), Reply(503, b"still busy")],  # the first try and the one retry
        5: [Reply(422, b'{"error": "not for me"}')],
        13: [Reply(429, b"slow down", {"Retry-After": "1"}), Reply(429, b"slow down")],
        20: [Reply(302, b"", {"Location": "/elsewhere"})],
    }

    def script(got: Got) -> Reply:
        index = feed.index(got.body)
        queue = answers.get(index)
        reply = queue.pop(0) if queue else Reply(201)
        if reply.status == 201:
            accepted.append(got.body)
        return reply

    checkpoint = tmp_path / "replay.checkpoint"
    with Receiver(script) as receiver:
        common = ("replay", "--from", source.url, "--ca", tls_files.ca, "--to", receiver.url,
                  "--checkpoint", checkpoint, "--retries", "1")  # fmt: skip
        for answer, stopped_at in (("503", 3), ("429", 13), ("302 (redirect to", 20)):
            stopped = run(*common)
            assert stopped.returncode == 1, stopped.stderr
            [line] = errors(stopped)
            assert line.startswith(f"metastore replay: {receiver.url}/api/v1/lineage answered {answer}"), line
            # Log records (the retries) go to stderr: stdout is for the summary, and there is none.
            assert stopped.stdout == "" and (answer == "302 (redirect to" or "trying again" in stopped.stderr)
            saved = json.loads(checkpoint.read_text())
            assert saved["sent"] + saved["refused"] == stopped_at
        assert receiver.requests("GET") == []
        done = run(*common)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["sent_total"] == len(feed) - 1 and summary["refused_total"] == 1
    assert accepted == feed[:5] + feed[6:]


def test_the_credentials_of_a_replay_target_are_sent_and_shown_nowhere(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """User info and a token in --to are used (basic auth, the query string) and appear neither in
    the checkpoint file, nor the summary, nor an error, even one quoting the receiver's answer."""
    (_, source), _, _ = stores
    secrets = ("pw-9w", "tok-9t", base64.b64encode(b"bot:pw-9w").decode())

    def script(got: Got) -> Reply:
        if len(accepted) == 4:  # then the receiver quotes what it was sent, and fails
            return Reply(404, f"no route {got.path} for {got.headers.get('Authorization')}".encode())
        accepted.append(got)
        return Reply(201)

    accepted: list[Got] = []
    checkpoint = tmp_path / "replay.checkpoint"
    with Receiver(script) as receiver:
        to = receiver.url.replace("http://", "http://bot:pw-9w@") + "/?token=tok-9t"
        args = ("replay", "--from", source.url, "--ca", tls_files.ca, "--to", to, "--checkpoint", checkpoint)
        ok = run(*args, "--limit", "2")
        failed = run(*args)
    assert ok.returncode == 0 and failed.returncode == 1
    assert {g.path for g in accepted} == {"/api/v1/lineage?token=tok-9t"}
    assert {g.headers["Authorization"] for g in accepted} == {"Basic " + secrets[2]}
    assert json.loads(checkpoint.read_text())["target"] == f"{receiver.url}/api/v1/lineage?token=***"
    assert "no route /api/v1/lineage?token=*** for Basic ***" in failed.stderr
    for text in (ok.stdout, ok.stderr, failed.stdout, failed.stderr, checkpoint.read_text()):
        for secret in secrets:
            assert secret not in text


def test_an_interrupted_replay_exits_130_with_its_checkpoint_saved(
    stores: list[tuple[Database, Server]], tls_files: TLSFiles, tmp_path: Path
) -> None:
    (source_db, source), _, _ = stores
    if len(events_of(source_db)) < 40:
        seed(source)

    def slow(got: Got) -> Reply:
        time.sleep(0.2)
        return Reply(201)

    checkpoint = tmp_path / "replay.checkpoint"
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    with Receiver(slow) as receiver:
        args = ["replay", "--from", source.url, "--ca", str(tls_files.ca), "--to", receiver.url,
                "--checkpoint", str(checkpoint)]  # fmt: skip
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        process = subprocess.Popen([sys.executable, "-m", "metastore", *args], env=env, text=True, **pipes)
        deadline = time.monotonic() + 60
        while len(receiver.requests()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
        sent = len(receiver.requests())
    assert process.returncode == 130 and "metastore replay: interrupted" in stderr and "Traceback" not in stderr
    saved = json.loads(checkpoint.read_text())
    assert sent - 1 <= saved["sent"] <= sent and saved["cursor"] is not None
