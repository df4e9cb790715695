"""The event feed over HTTP on Citus, and what reads through its cursor: GET /api/v1/events (JSON
pages and the NDJSON stream), `metastore export` and `metastore replay` (resumed from a
checkpoint) from a Citus store into a plain PostgreSQL one, and live forwarding from the Citus
store to a plain one, each giving every event once."""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from pathlib import Path

import psycopg

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.eventually import eventually
from tests.support.servers import Server
from tests.support.service_fixtures import Serve, serving
from tests.support.transfer import cli, events_of

wait_for = functools.partial(eventually, timeout=60, interval=0.2)


def post_events(server: Server, count: int, tag: str) -> None:
    with server.client() as http:
        for i in range(count):
            event = {
                "eventTime": f"2024-08-{1 + i % 20:02d}T10:00:00.{i:06d}Z",  # days on both workers
                "eventType": "COMPLETE",
                "producer": "https://example.com/tests",
                "run": {"runId": str(uuid.uuid4())},
                "job": {"namespace": f"citus-{tag}", "name": f"job-{i}"},
                "inputs": [{"namespace": "trino://h:8080", "name": f"cat.sch.t{i % 3}"}],
            }
            assert http.post("/api/v1/lineage", json=event).status_code == 201


def ids_of(db: Database) -> list[int]:
    with psycopg.connect(db.owner_dsn) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM metastore.events ORDER BY id")]


def test_the_feed_pages_and_streams_every_event_once(database: Database, serve: Serve) -> None:
    server = serve()
    post_events(server, 25, "feed")
    with server.client() as http:
        got: list[int] = []
        cursor = None
        while True:
            response = http.get("/api/v1/events", params={"limit": 7, **({"cursor": cursor} if cursor else {})})
            assert response.status_code == 200, response.text
            body = response.json()
            got += [e["id"] for e in body["events"]]
            cursor = body["next_cursor"]
            if not body["has_more"]:
                break
        assert got == ids_of(database)
        stream = http.get("/api/v1/events", headers={"Accept": "application/x-ndjson"})
        assert stream.status_code == 200
        assert [json.loads(line)["id"] for line in stream.text.splitlines()] == got
        # A filter, and a cursor of the feed on one server, which names no place here: 400.
        jobs = http.get("/api/v1/events", params={"job_namespace": "citus-feed", "job_name": "job-3"}).json()
        assert [e["event"]["job"]["name"] for e in jobs["events"]] == ["job-3"]
        refused = http.get("/api/v1/events", params={"cursor": "MTox"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "22023"


def test_export_and_a_resumed_replay_from_citus_into_plain_postgresql(
    database: Database, serve: Serve, plain_db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    source = serve()
    post_events(source, 30, "transfer")
    dump = tmp_path / "events.ndjson"
    exported = cli("export", "--from", source.url, "--ca", tls_files.ca, "-o", dump, ca=tls_files.ca)
    assert exported["events"] == 30
    assert len(dump.read_text().splitlines()) == 30
    (tmp_path / "target").mkdir()
    with contextlib.contextmanager(serving)(plain_db.service_dsn, tls_files, tmp_path / "target") as target:
        receiver = target()
        checkpoint = tmp_path / "replay.checkpoint"
        common = ("replay", "--from", source.url, "--ca", tls_files.ca, "--to", receiver.url, "--to-ca", tls_files.ca)
        first = cli(*common, "--checkpoint", checkpoint, "--limit", "10", ca=tls_files.ca)
        assert first["sent"] == 10
        post_events(source, 5, "transfer-late")  # stored between the two runs: they come after
        rest = cli(*common, "--checkpoint", checkpoint, ca=tls_files.ca)
        assert rest["resumed_from"] == first["cursor"] and rest["sent"] == 25 and rest["sent_total"] == 35
    assert events_of(plain_db) == events_of(database)


def test_forwarding_from_citus_sends_every_event_once(
    database: Database, serve: Serve, plain_db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    (tmp_path / "target").mkdir()
    with contextlib.contextmanager(serving)(plain_db.service_dsn, tls_files, tmp_path / "target") as target:
        receiver = target()
        source = serve(METASTORE_FORWARD_URL=receiver.url, METASTORE_FORWARD_CA=str(tls_files.ca))
        post_events(source, 20, "forward")
        wait_for(lambda: len(events_of(plain_db)) == 20, what="the forwarded events")
        post_events(source, 20, "forward-more")
        wait_for(lambda: len(events_of(plain_db)) == 40, what="the events stored after the first were forwarded")
        with source.client() as http:
            targets = http.get("/api/v1/forwarding").json()["targets"]
        assert [(t["sent"], t["refused"]) for t in targets] == [(40, 0)]
    assert events_of(plain_db) == events_of(database)
