"""Live forwarding from a durable outbox: a store forwards every stored event to a second store,
across a restart of the receiver and of the forwarding service, losing nothing, in order per run."""

from __future__ import annotations

import base64
import functools
import json
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database, create_database, drop_database
from tests.service.receivers import Got, Receiver, Reply
from tests.support.certs import TLSFiles
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server

wait_for = functools.partial(eventually, timeout=60, interval=0.2)


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
            # The receiver stores the last events of a page a moment before the sender's cursor moves.
            wait_for(lambda: status(client)["sent"] == 30, what="the cursor to move past them")
            targets = client.get("/api/v1/forwarding").json()["targets"]
            assert [(t["target"], t["sent"], t["lag_seconds"]) for t in targets] == [(receiver.url, 30, 0)]
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


def feed_payloads(db: Database) -> list[bytes]:
    """The stored payloads in the feed's order, as the forwarder sends them."""
    with psycopg.connect(db.owner_dsn) as conn:
        return [r[0].encode() for r in conn.execute("SELECT payload::text FROM metastore.events ORDER BY xact_id, id")]


def status(client: Any) -> dict[str, Any]:
    """The one target's status (zeros until the forwarder first claims it)."""
    targets = client.get("/api/v1/forwarding").json()["targets"]
    if not targets:
        return {"sent": 0, "refused": 0, "failures": 0, "last_error": None, "lag_seconds": None}
    [target] = targets
    return target  # type: ignore[no-any-return]


class Accepting:
    """A receiver's script: answers from `answers` first (one per POST), then 201, and keeps the
    bodies it answered 2xx at `path`, in order."""

    def __init__(self, answers: list[Reply] | None = None, path: str = "/api/v1/lineage") -> None:
        self.answers = list(answers or [])
        self.path = path
        self.accepted: list[bytes] = []

    def __call__(self, got: Got) -> Reply:
        if got.method != "POST":
            return Reply(200, b"not an event route")
        reply = self.answers.pop(0) if self.answers else Reply(201)
        if 200 <= reply.status < 300 and got.path.split("?")[0] == self.path:
            self.accepted.append(got.body)
        return reply


def test_answers_that_say_nothing_about_the_event_are_sent_again_and_nothing_is_skipped(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """401, 404, 413, a 302 and a 503 say the target is wrong or unwell, not that the event is bad:
    the same event is sent again after each (with backoff, never followed as a GET), the failures
    are shown, counted by answer and logged, and once the target takes events every event arrives
    once, in order."""
    script = Accepting(
        [
            Reply(401, b'{"error": "who are you?"}'),
            Reply(404, b"no such route"),
            Reply(413, b"too large for me"),
            Reply(302, b"", {"Location": "/elsewhere"}),
            Reply(503, b"busy", {"Retry-After": "1"}),
        ]
    )
    source_db = create_database(pg_server)
    with Receiver(script) as receiver:
        source = start_server(
            source_db.service_dsn, tls_files, tmp_path / "source.log", METASTORE_FORWARD_URL=receiver.url
        )
        try:
            post_runs(source, 3)
            with source.client() as client:
                wait_for(lambda: status(client)["failures"] >= 2, what="the failures to be shown")
                failing = status(client)
                wait_for(lambda: len(script.accepted) == 9, timeout=90, what="the 9 events after the failures")
                wait_for(lambda: status(client)["sent"] == 9, what="the cursor to move")
                final = status(client)
                metrics = client.get("/metrics").text
            expected = feed_payloads(source_db)
        finally:
            assert source.stop() == 0
            drop_database(source_db)
    assert failing["sent"] == 0 and failing["refused"] == 0 and failing["failing_since"] is not None
    assert script.accepted == expected  # each event once, in the feed's order
    posts = receiver.requests("POST")
    assert [g.path for g in posts] == ["/api/v1/lineage"] * len(posts)
    assert len({g.body for g in posts[:6]}) == 1  # the first event, again and again
    assert receiver.requests("GET") == []  # the 302 was not followed as a GET
    assert final["refused"] == 0 and final["failures"] == 0 and "503" in final["last_error"]
    for answer in ("401", "404", "413", "302", "503"):
        line = f'metastore_forward_failures_total{{answer="{answer}",target="{receiver.url}"}} 1.0'
        assert line in metrics, answer
    log = source.log.read_text()
    for answer in ("answered 401", "answered 404", "answered 413", "answered 503"):
        assert answer in log
    assert "answered 302 (redirect to http://127.0.0.1" in log and "not followed" in log


def marked_event(mark: str, i: int) -> dict[str, Any]:
    return {
        "eventTime": f"2024-08-02T10:00:0{i}Z",
        "eventType": "COMPLETE",
        "producer": "https://example.com/tests",
        "run": {"runId": str(uuid.uuid4()), "facets": {"mark": {"value": mark}}},
        "job": {"namespace": "fwd", "name": f"job-{i}"},
    }


SECRETS = ("pw-4711", "tok-4711", base64.b64encode(b"bot:pw-4711").decode())


def test_an_event_the_receiver_judges_is_refused_with_its_answer_kept_and_a_307_keeps_the_body(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """400 and 422 judge the event: it is skipped for good, with the receiver's status and the start
    of its body kept (without the URL's credentials, which the receiver quoted), and the events after
    it go on. A 307 is followed with the method, the body and (same origin) the basic auth."""

    def script(got: Got) -> Reply:
        if got.path.startswith("/api/v1/lineage"):
            return Reply(307, b"", {"Location": "/v2/lineage?token=tok-4711"})
        if b'"judge-422"' in got.body:
            echo = f"bad event; you sent {got.headers.get('Authorization')} to {got.path} " + "x" * 100_000
            return Reply(422, echo.encode(), {"Content-Type": "text/plain"})
        if b'"judge-400"' in got.body:
            return Reply(400, b'{"error": "no"}')
        accepted.append(got.body)
        return Reply(201)

    accepted: list[bytes] = []
    source_db = create_database(pg_server)
    with Receiver(script) as receiver:
        url = receiver.url.replace("http://", "http://bot:pw-4711@") + "/?token=tok-4711"
        source = start_server(source_db.service_dsn, tls_files, tmp_path / "source.log", METASTORE_FORWARD_URL=url)
        try:
            with source.client() as client:
                for i, mark in enumerate(("ok", "judge-422", "ok", "judge-400", "ok")):
                    assert client.post("/api/v1/lineage", json=marked_event(mark, i)).status_code == 201
                wait_for(lambda: status(client)["sent"] + status(client)["refused"] == 5, what="all 5 answered")
                final = status(client)
                shown = client.get("/api/v1/forwarding").text + client.get("/metrics").text
            expected = [p for p in feed_payloads(source_db) if b'"ok"' in p]
            with psycopg.connect(source_db.owner_dsn) as conn:
                refusals = conn.execute(
                    "SELECT e.payload -> 'run' -> 'facets' -> 'mark' ->> 'value', r.status, r.body, r.target "
                    "FROM metastore.forward_refusals AS r JOIN metastore.events AS e ON e.id = r.event_id "
                    "ORDER BY r.event_id"
                ).fetchall()
                stored_error = conn.execute("SELECT coalesce(last_error, '') FROM metastore.forward_targets").fetchone()
        finally:
            assert source.stop() == 0
            drop_database(source_db)
    target = f"{receiver.url}?token=***"
    assert accepted == expected
    assert (final["target"], final["sent"], final["refused"], final["failures"]) == (target, 3, 2, 0)
    assert final["last_refusal"]["status"] == 400
    assert [(mark, code) for mark, code, _, _ in refusals] == [("judge-422", 422), ("judge-400", 400)]
    body_422 = refusals[0][2]
    assert len(body_422) == 2000 and body_422.startswith("bad event; you sent Basic *** to /v2/lineage?token=***")
    assert {r[3] for r in refusals} == {target}
    # Each 307 was followed with the same method and body, and the basic auth of the URL.
    firsts, seconds = receiver.requests("POST", None)[0::2], receiver.requests("POST", None)[1::2]
    assert all(a.path == "/api/v1/lineage?token=tok-4711" and b.path == "/v2/lineage?token=tok-4711"
               for a, b in zip(firsts, seconds, strict=True))  # fmt: skip
    assert all(a.body == b.body for a, b in zip(firsts, seconds, strict=True))
    assert {b.headers.get("Authorization") for b in seconds} == {"Basic " + SECRETS[2]}
    for text in (shown, source.log.read_text(), *(r[2] for r in refusals), stored_error[0] if stored_error else ""):
        for secret in SECRETS:
            assert secret not in text


def test_the_credentials_of_the_forwarding_url_are_shown_nowhere_and_a_new_password_keeps_the_cursor(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """GET /api/v1/forwarding and /metrics answer anyone: the user info and the query string's values
    of METASTORE_FORWARD_URL reach neither them, nor the log (at debug level, with the HTTP libraries'
    records), nor the stored error. The target is named without them: a new password and token go
    on from the cursor, nothing is sent again from the first event, and no second target appears."""
    source_db, receiver_db = create_database(pg_server), create_database(pg_server)
    receiver = start_server(receiver_db.service_dsn, tls_files, tmp_path / "receiver.log")
    scheme, rest = receiver.url.split("://")
    old = f"{scheme}://lineage-bot:s3cret-pw@{rest}/?token=t0k3n-x"
    new = f"{scheme}://lineage-bot:n3w-pw@{rest}/?token=n3w-t0k3n"
    secrets = ("s3cret-pw", "t0k3n-x", "n3w-pw", "n3w-t0k3n", "lineage-bot:")
    env = {"METASTORE_FORWARD_CA": str(tls_files.ca), "METASTORE_LOG_LEVEL": "DEBUG"}
    source = start_server(source_db.service_dsn, tls_files, tmp_path / "source.log", METASTORE_FORWARD_URL=old, **env)
    logs = [source.log]
    try:
        post_runs(source, 2)
        wait_for(lambda: len(payloads(receiver_db)) == 6, what="the events to arrive")
        assert receiver.stop() == 0
        post_runs(source, 1)
        with source.client() as client:
            wait_for(lambda: status(client)["last_error"] is not None, what="the failure to be recorded")
            shown = [client.get("/api/v1/forwarding").text, client.get("/metrics").text]
        assert f"{receiver.url}?token=***" in shown[0] and f'target="{receiver.url}?token=***"' in shown[1]
        with psycopg.connect(source_db.owner_dsn) as conn:
            shown += [r[0] for r in conn.execute("SELECT name || ' ' || last_error FROM metastore.forward_targets")]

        receiver = restart_on_same_port(receiver, receiver_db.service_dsn, tls_files, tmp_path / "receiver2.log")
        source = restart_on_same_port(
            source, source_db.service_dsn, tls_files, tmp_path / "source2.log", METASTORE_FORWARD_URL=new, **env
        )
        logs.append(source.log)
        post_runs(source, 1)
        wait_for(lambda: len(payloads(receiver_db)) == 12, what="the events of both passwords")
        with source.client() as client:
            wait_for(lambda: status(client)["lag_seconds"] == 0, what="lag 0")
            final = client.get("/api/v1/forwarding").json()["targets"]
            shown.append(client.get("/metrics").text)
        # One target, whose cursor the new password took up: 12 events sent, not 6 + 12.
        assert [(t["target"], t["sent"], t["refused"]) for t in final] == [(f"{receiver.url}?token=***", 12, 0)]
        assert payloads(receiver_db) == payloads(source_db)
        assert source.stop() == 0
        texts = shown + [log.read_text() for log in logs]
        assert any("urllib3" in line for line in logs[0].read_text().splitlines())  # debug records were written
        for text in texts:
            for secret in secrets:
                assert secret not in text, secret
    finally:
        source.stop()
        receiver.stop()
        drop_database(source_db)
        drop_database(receiver_db)


def insert_as_owner(conn: psycopg.Connection[Any], payload: str) -> None:
    """Stored as an earlier release's ingest could store it, past any check of this one's."""
    conn.execute(
        "INSERT INTO metastore.events (payload, payload_sha256, event_kind, event_time) "
        "SELECT j, sha256(convert_to(j::text, 'UTF8')), 'run', (j ->> 'eventTime')::timestamptz "
        "FROM (SELECT %s::jsonb AS j) AS e",
        (payload,),
    )


def test_an_upgrade_resumes_a_target_named_with_its_credentials_where_it_was(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """An earlier release named the target by its whole URL, password included. After the upgrade,
    the service (with another password in its URL) sends only what came after that target's cursor."""
    from metastore import ledger, migrations
    from tests.conftest import SERVICE, create_group_roles

    db = create_database(pg_server, template="template0")
    app, _ = create_group_roles(pg_server, db.name)
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"GRANT {app} TO {SERVICE}")
    [change] = [c.version for c in ledger.changes() if c.name.endswith("__forward_keys.sql")]
    migrations.deploy(db.owner_dsn, max(c.version for c in ledger.changes() if c.version < change), partial=True)
    script = Accepting()
    with Receiver(script) as receiver:
        with psycopg.connect(db.owner_dsn, autocommit=True) as owner:
            for i in range(5):
                insert_as_owner(owner, json.dumps(marked_event(f"e{i}", i)))
            [*_, (third,)] = owner.execute("SELECT cursor FROM metastore.read_events(3, NULL)").fetchall()
            old_name = receiver.url.replace("http://", "http://bot:old-pw@")
            owner.execute(
                "INSERT INTO metastore.forward_targets (name, cursor, sent) VALUES (%s, %s, 3)", (old_name, third)
            )
        migrations.deploy(db.owner_dsn)
        source = start_server(
            db.service_dsn,
            tls_files,
            tmp_path / "source.log",
            METASTORE_FORWARD_URL=receiver.url.replace("http://", "http://bot:new-pw@") + "/api/v1/lineage",
        )
        try:
            with source.client() as client:
                wait_for(lambda: status(client)["sent"] == 5, what="the events after the cursor")
                final = client.get("/api/v1/forwarding").json()["targets"]
            expected = feed_payloads(db)[3:]
        finally:
            assert source.stop() == 0
            drop_database(db)
    assert script.accepted == expected and len(expected) == 2
    assert [(t["target"], t["sent"]) for t in final] == [(receiver.url, 5)]


def test_events_that_print_to_megabytes_are_forwarded_a_page_each_without_timing_out(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """Four stored events that each print to 18.6 MB (60 000 numbers 1e308, 309 digits each) between
    normal ones: a page of 100 events took 4.3 s to read, past the 2 s deadline, on every try. Pages
    are bounded by bytes (always one event), and every event arrives, in order."""
    db = create_database(pg_server)
    big = (
        '{"eventTime": "2024-08-03T10:00:0%dZ", "eventType": "COMPLETE", "producer": "p", "run": {"runId": "big-%d", '
        '"facets": {"n": {"v": [' + ",".join(["1e308"] * 60_000) + ']}}}, "job": {"namespace": "n", "name": "j"}}'
    )
    with psycopg.connect(db.owner_dsn, autocommit=True) as owner:
        for i in range(8):
            insert_as_owner(owner, big % (i, i) if 2 <= i < 6 else json.dumps(marked_event(f"small-{i}", i)))
    expected = feed_payloads(db)
    assert sum(len(p) > 18_000_000 for p in expected) == 4
    script = Accepting()
    with Receiver(script) as receiver:
        source = start_server(
            db.service_dsn,
            tls_files,
            tmp_path / "source.log",
            METASTORE_FORWARD_URL=receiver.url,
            METASTORE_DB_TIMEOUT_MS="2000",
        )
        try:
            with source.client() as client:
                wait_for(lambda: status(client)["sent"] == 8, timeout=120, what="every event")
                final = status(client)
        finally:
            assert source.stop() == 0
            drop_database(db)
    assert script.accepted == expected
    assert final["failures"] == 0 and final["last_error"] is None
