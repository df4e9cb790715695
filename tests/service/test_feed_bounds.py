"""Every stored event can be served back, and serving holds bounded memory for a bounded time: over
TLS through the real service, as the operator's guide sets the roles up.

- Events that print far larger than they are stored, or nest deeper than readers parse, are refused
  (400, 54M01 / 54M02) by POST, batch and the async writers, and recorded.
- Events stored before that rule (here written by the owner through the store path) are served one
  per page; the feed, its NDJSON stream and a reader that pages through all of it get past them.
- Readers that stop reading hold at most a page each, within METASTORE_FEED_BUFFER_BYTES for all of
  them, and are disconnected at METASTORE_FEED_DEADLINE_S; a stream at its deadline ends with the
  cursor to resume from, and resuming gives every event exactly once.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from bench import floods
from bench.floods import RssSampler
from tests.conftest import Database, create_database, drop_database
from tests.support.certs import TLSFiles
from tests.support.checks import metric
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server

NDJSON = {"Accept": "application/x-ndjson"}
MIB = 1 << 20
PAGE_BYTES = MIB  # metastore.read_events cuts pages there
# Memory a stalled reader may cost beyond the pages the budget counts (transport buffers, the TLS
# layer, its request), and the allocator's slack around the test: the bound of docs/events.md.
PER_CONNECTION_MB = 0.5
SLACK_MB = 25
# The documented bound's constants (`make floods`; docs/operations.md, "Sizing").
CONSTANTS = json.loads((Path(__file__).parents[2] / "bench" / "results" / "memory.json").read_text())["constants"]


def padded(tag: str, i: int, size: int) -> dict[str, Any]:
    event = run_event(f"{tag}-{i}", job=f"job-{i}", namespace=f"bounds-{tag}")
    event["run"]["facets"] = {"pad": {"text": "x" * size}}
    return event


def bomb(tag: str, i: int) -> bytes:
    """60,000 x 1e308: 360 KB sent, 18.6 MB of text as stored."""
    text = json.dumps(run_event(f"{tag}-bomb-{i}", job=f"bomb-{i}", namespace=f"bounds-{tag}"))
    return text.replace('"run": {', '"run": {"stats": [' + ",".join(["1e308"] * 60_000) + "], ", 1).encode()


def deep(tag: str) -> bytes:
    text = json.dumps(run_event(f"{tag}-deep", job="deep", namespace=f"bounds-{tag}"))
    return text.replace('"run": {', '"run": {"x": ' + "[" * 10_000 + "]" * 10_000 + ", ", 1).encode()


def store_as_before(db: Database, body: bytes) -> int:
    """An event as a release without the size rule stored it: through the store path, as the owner."""
    clean = json.loads(body.replace(b"1e308", b"1"))
    with psycopg.connect(db.owner_dsn, autocommit=True) as owner:
        row = owner.execute(
            "SELECT event_id FROM metastore.store_events(ARRAY[convert_from(%s, 'UTF8')::jsonb], "
            "ARRAY[metastore.validate_event(%s::jsonb)])",
            (body, json.dumps(clean)),
        ).fetchone()
    assert row is not None
    return int(row[0])


def ids_of(lines: list[str]) -> list[int]:
    return [json.loads(line)["id"] for line in lines]


@pytest.fixture
def db(database: Database) -> Database:
    return database


@pytest.fixture
def served(db: Database, tls_files: TLSFiles, tmp_path: Path) -> Iterator[Server]:
    srv = start_server(db.service_dsn, tls_files, tmp_path / "server.log")
    yield srv
    assert srv.stop() == 0, srv.log.read_text()


def test_events_that_print_large_or_nest_deep_are_refused_by_post_and_batch(served: Server, db: Database) -> None:
    tag = uuid.uuid4().hex[:8]
    with served.client() as http:
        r = http.post("/api/v1/lineage", content=bomb(tag, 0))
        assert r.status_code == 400 and r.json()["error"]["code"] == "54M01", r.text
        r = http.post("/api/v1/lineage", content=deep(tag))
        assert r.status_code == 400 and r.json()["error"]["code"] == "54M02", r.text
        batch = b"[" + b", ".join([bomb(tag, 1), deep(tag), json.dumps(padded(tag, 0, 10)).encode()]) + b"]"
        r = http.post("/api/v1/lineage/batch", content=batch)
        assert r.status_code == 200, r.text
        assert [(f["index"], f["code"]) for f in r.json()["failed_events"]] == [(0, "54M01"), (1, "54M02")]
    with psycopg.connect(db.owner_dsn) as owner:
        codes = [r[0] for r in owner.execute("SELECT sqlstate FROM metastore.rejected_events ORDER BY id")]
        assert codes == ["54M01", "54M02", "54M01", "54M02"]
        assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (1,)


def test_the_async_writers_refuse_them_and_record_them(db: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    """Accepted (202, spooled) before anything reads them: refused by the writers, not lost."""
    tag = uuid.uuid4().hex[:8]
    srv = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_INGEST_MODE="async",
        METASTORE_SPOOL_DIR=str(tmp_path / "spool"),
    )
    try:
        with srv.client() as http:
            assert http.post("/api/v1/lineage", content=bomb(tag, 0)).status_code == 202
            assert http.post("/api/v1/lineage", content=deep(tag)).status_code == 202

        def two_rejected() -> list[str] | None:
            with psycopg.connect(db.owner_dsn) as owner:
                codes = [r[0] for r in owner.execute("SELECT sqlstate FROM metastore.rejected_events ORDER BY id")]
            return codes if len(codes) >= 2 else None

        codes = eventually(two_rejected, timeout=30, interval=0.2, what="both events rejected")
        assert sorted(codes) == ["54M01", "54M02"]
        assert metric(srv, "metastore_events_total", outcome="rejected", reason="54M01") == 1
    finally:
        assert srv.stop() == 0, srv.log.read_text()


def get_page(http: httpx.Client, limit: int, cursor: str | None) -> httpx.Response:
    """A page, asked again after a 503 as its Retry-After says (printing 18.6 MB takes PostgreSQL
    0.3 to 0.5 s of the read budget's 1 s, more on a loaded machine), at most 5 times."""
    for _ in range(5):
        r = http.get("/api/v1/events", params={"limit": limit, **({"cursor": cursor} if cursor else {})}, timeout=30)
        if r.status_code != 503:
            break
        time.sleep(float(r.headers["retry-after"]))
    return r


def stream_all(http: httpx.Client) -> list[int]:
    """Every event through NDJSON streams, resumed after an error line from its resume_cursor (as
    `metastore export` does), at most 5 times in a row."""
    got: list[int] = []
    cursor, errors = None, 0
    while errors < 5:
        params = {"cursor": cursor} if cursor else {}
        with http.stream("GET", "/api/v1/events", headers=NDJSON, params=params, timeout=60) as r:
            lines = [line for line in r.iter_lines() if line]
        if not lines or not lines[-1].startswith('{"error"'):
            return got + ids_of(lines)
        got += ids_of(lines[:-1])
        cursor = json.loads(lines[-1])["error"]["resume_cursor"]
        errors = 0 if len(lines) > 1 else errors + 1
    raise AssertionError(f"the stream kept failing after {len(got)} events")


def test_events_stored_before_the_rule_are_served_one_per_page(served: Server, db: Database) -> None:
    """Ten events of 18.6 MB of text: pages of 5 or more answered 503 (the read deadline) and the
    stream, export and forwarding could not get past them. Now each comes alone on its page."""
    tag = uuid.uuid4().hex[:8]
    expected = []
    with served.client() as http:
        for i in range(10):
            r = http.post("/api/v1/lineage", json=padded(tag, i, 100))
            assert r.status_code == 201, r.text
            expected += [r.json()["event_id"], store_as_before(db, bomb(tag, i))]
        got, cursor, pages = [], None, 0
        while True:
            r = get_page(http, 5, cursor)
            assert r.status_code == 200, r.text[:300]
            page = r.json()
            assert len(page["events"]) <= 1 or len(r.content) <= PAGE_BYTES + 4096
            got += [e["id"] for e in page["events"]]
            cursor, pages = page["next_cursor"], pages + 1
            if not page["has_more"]:
                break
        assert got == expected and pages == 20
        assert stream_all(http) == expected


def stalled(server: Server, path: str, accept: str) -> ssl.SSLSocket:
    """A reader that sends its request and never reads: its receive window is 4 KiB."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", server.port))
    sock = ssl.create_default_context(cafile=str(server.ca)).wrap_socket(raw, server_hostname="localhost")
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\n\r\n".encode())
    return sock


def read_out(sock: ssl.SSLSocket, within_s: float) -> tuple[bool, bytes]:
    """(whether the server ended the connection, the start of what it sent): reading what it sent
    ends in EOF or a reset when it did; on a live connection, answered or not, reading times out."""
    sock.settimeout(within_s)
    head = b""
    try:
        while data := sock.recv(1 << 16):
            head = head or data[:200]
    except (ConnectionError, ssl.SSLError):
        return True, head
    except TimeoutError:
        return False, head
    return True, head


def cut_off(sock: ssl.SSLSocket, within_s: float) -> bool:
    return read_out(sock, within_s)[0]


def fill(http: httpx.Client, tag: str, count: int, size: int) -> list[int]:
    ids = []
    for i in range(count):
        r = http.post("/api/v1/lineage", json=padded(tag, i, size))
        assert r.status_code == 201, r.text
        ids.append(r.json()["event_id"])
    return ids


@contextmanager
def stalled_readers(srv: Server) -> Iterator[list[ssl.SSLSocket]]:
    """A list for the sockets a test opens to srv: at the end they are closed and srv is stopped
    (and exits 0)."""
    sockets: list[ssl.SSLSocket] = []
    try:
        yield sockets
    finally:
        for s in sockets:
            s.close()
        assert srv.stop() == 0, srv.log.read_text()[-3000:]


def warm_feed(srv: Server) -> None:
    """40 events of 300 KB stored (12 MB: pages of 3 events) and streamed back once, which warms
    the pool and the buffers."""
    with srv.client() as http:
        ids = fill(http, uuid.uuid4().hex[:8], 40, 300_000)
        with http.stream("GET", "/api/v1/events", headers=NDJSON) as r:
            assert ids_of([line for line in r.iter_lines() if line]) == ids


def assert_readers_gone_and_feed_serves(srv: Server) -> None:
    """No stalled reader is connected any more, and the feed serves as before."""
    assert metric(srv, "metastore_http_connections") <= 1
    with srv.client() as http:
        assert http.get("/api/v1/events", params={"limit": 2}).status_code == 200


def test_readers_that_stop_reading_hold_a_page_each_and_are_cut_at_the_deadline(
    db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    deadline_s = 6
    budget = 32 * MIB
    srv = start_server(db.service_dsn, tls_files, tmp_path / "server.log", METASTORE_FEED_DEADLINE_S=str(deadline_s))
    with stalled_readers(srv) as sockets:
        warm_feed(srv)
        with RssSampler(srv.process.pid) as rss:
            opened = time.monotonic()
            for _ in range(10):
                sockets.append(stalled(srv, "/api/v1/events", "application/x-ndjson"))
                sockets.append(stalled(srv, "/api/v1/events?limit=1000", "application/json"))
            time.sleep(3)
            held = metric(srv, "metastore_http_connections")
        peak = max(rss.result()["hwm_mb"], rss.result()["sampled_peak_mb"])
        # At most a page each (the previous release held a page of 200 events, here all 12 MB, each).
        bound = rss.result()["start_mb"] + len(sockets) * (PAGE_BYTES / MIB + PER_CONNECTION_MB) + SLACK_MB
        assert bound < rss.result()["start_mb"] + 2 * budget / MIB  # within the read side's bound
        assert held >= len(sockets)  # all still connected
        assert peak <= bound, (rss.result(), bound)
        # Disconnected at the deadline (plus the time to notice and the allocator's slack).
        time.sleep(max(0, opened + deadline_s + 1 - time.monotonic()))
        assert all(cut_off(s, 5) for s in sockets)
        assert_readers_gone_and_feed_serves(srv)


def read_a_little(sock: ssl.SSLSocket, within_s: float, size: int = 8192) -> bytes:
    """The first bytes of the answer (up to size), then nothing more is read."""
    sock.settimeout(within_s)
    got = b""
    try:
        while len(got) < size and (data := sock.recv(size - len(got))):
            got += data
    except (TimeoutError, ConnectionError, ssl.SSLError):
        pass
    return got


STALLED = {
    "METASTORE_FEED_DEADLINE_S": "8",
    "METASTORE_MAX_CONNECTIONS": "150",
    "METASTORE_MAX_BODY_BYTES": str(MIB),
    "METASTORE_MAX_INFLIGHT_BYTES": str(4 * MIB),
    "METASTORE_LARGE_EVENT_BYTES": str(MIB),
    "METASTORE_READ_POOL_MAX": "2",
}


def test_stalled_ndjson_readers_stay_under_the_documented_bound_and_are_cut_at_the_deadline(
    db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """20 NDJSON readers that read a little and stopped took the service from 68 to 439 MB, and 3 were
    still connected after 80 s. Here 100 of them, over TLS, on a stream of 40 events of 300 KB: the
    service stays under the documented bound of its settings (bench.floods.bound_mb, the read side's
    terms included), grows by no more than the read side's and the connections' terms, and every
    reader is disconnected by the response deadline plus the time to notice: the served ones cut
    mid-response, the others answered 503 (53000, Retry-After) once the feed's budget was held, and
    their connections closed too."""
    deadline_s = int(STALLED["METASTORE_FEED_DEADLINE_S"])
    srv = start_server(db.service_dsn, tls_files, tmp_path / "server.log", **STALLED)
    with stalled_readers(srv) as sockets:
        warm_feed(srv)
        with RssSampler(srv.process.pid) as rss:
            for _ in range(100):
                sockets.append(stalled(srv, "/api/v1/events", "application/x-ndjson"))
            last_opened = time.monotonic()
            heads = [read_a_little(s, 10) for s in sockets]
            time.sleep(max(0, last_opened + deadline_s / 2 - time.monotonic()))
            held = metric(srv, "metastore_http_connections")
        result = rss.result()
        peak = max(result["hwm_mb"], result["sampled_peak_mb"])
        served = [h for h in heads if h.startswith(b"HTTP/1.1 200")]
        refused = [h for h in heads if h.startswith(b"HTTP/1.1 503")]
        assert len(served) + len(refused) == len(sockets), [h[:40] for h in heads]
        # The budget (32 MiB) holds pages of about 900 KB for a few dozen; the rest are refused at once.
        assert 10 <= len(served) < len(sockets), len(served)
        assert all(b"retry-after: 1" in h.lower() and b'"53000"' in h for h in refused), refused[:1]
        assert held >= len(served)  # those served still connected, mid-response
        assert peak <= floods.bound_mb(CONSTANTS, STALLED), (result, floods.bound_mb(CONSTANTS, STALLED))
        growth = floods.read_side_mb(CONSTANTS, STALLED) + 150 * CONSTANTS["per_connection_kb"] / 1024
        assert peak - result["start_mb"] <= growth, (result, growth)
        # All disconnected by the deadline, plus the time to notice (the last reader's deadline).
        time.sleep(max(0, last_opened + deadline_s + 1 - time.monotonic()))
        assert all(cut_off(s, 5) for s in sockets)
        assert time.monotonic() - last_opened < deadline_s + 7
        assert_readers_gone_and_feed_serves(srv)


def unacknowledged_bytes(port: int) -> int:
    """Bytes the service's sockets on this port hold, sent or not, that their peers have not
    acknowledged (Send-Q of `ss`): kernel memory, charged to the pod, that RSS does not show."""
    out = subprocess.run(
        ["ss", "-Htn", "state", "established", f"( sport = :{port} )"], capture_output=True, text=True, check=True
    ).stdout
    return sum(int(line.split()[1]) for line in out.splitlines() if line.strip())


def test_what_the_kernel_holds_for_stalled_readers_is_within_the_budget(
    db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """A page that fits in a connection's kernel send buffer leaves the service's memory for the
    kernel's, which the pod is charged for too: 40 readers of streams of two events of 100 KB that
    read nothing held 8 MB there with a budget of 4 MiB, the budget's room given back as soon as the
    page had left the process. The room is now kept until the reader acknowledges it, so the kernel
    holds no more than the budget for all of them (the others wait, then 503)."""
    budget = 4 * MIB
    srv = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_FEED_DEADLINE_S="10",
        METASTORE_FEED_BUFFER_BYTES=str(budget),
    )
    with stalled_readers(srv) as sockets:
        with srv.client() as http:
            fill(http, uuid.uuid4().hex[:8], 4, 100_000)
        for _ in range(40):
            sockets.append(stalled(srv, "/api/v1/events?limit=2", "application/x-ndjson"))
        time.sleep(3)
        held = unacknowledged_bytes(srv.port)
        heads = [read_out(s, 0.2)[1] for s in sockets]
        served = sum(h.startswith(b"HTTP/1.1 200") for h in heads)
        assert served >= 5, heads
        assert all(h.startswith((b"HTTP/1.1 200", b"HTTP/1.1 503")) for h in heads), heads
        assert held <= budget, (held, served)


def test_the_buffer_budget_is_shared_and_refusals_say_retry(db: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    """With 4 MiB for all readers, stalled readers holding pages of 600 KB soon leave no room to read
    a page (twice its 1 MiB while it is read): another reader waits the read budget and gets 503
    with Retry-After; once they are cut at the deadline, it reads."""
    srv = start_server(
        db.service_dsn,
        tls_files,
        tmp_path / "server.log",
        METASTORE_FEED_DEADLINE_S="5",
        METASTORE_FEED_BUFFER_BYTES=str(4 * MIB),
    )
    with stalled_readers(srv) as sockets, srv.client() as http:
        fill(http, uuid.uuid4().hex[:8], 30, 600_000)
        opened = time.monotonic()
        sockets += [stalled(srv, "/api/v1/events", "application/x-ndjson") for _ in range(6)]
        time.sleep(2)
        r = http.get("/api/v1/events", params={"limit": 1})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert "METASTORE_FEED_BUFFER_BYTES" in r.json()["error"]["message"]
        time.sleep(max(0, opened + 5 + 1 - time.monotonic()))
        # Those that held pages are cut; those that found no room were answered 503 like the probe.
        outcomes = [read_out(s, 3) for s in sockets]
        assert sum(cut for cut, _ in outcomes) >= 2, outcomes
        assert all(cut or head.startswith(b"HTTP/1.1 503") for cut, head in outcomes), outcomes
        r = http.get("/api/v1/events", params={"limit": 1})
        assert r.status_code == 200, r.text


def test_a_stream_at_its_deadline_ends_with_the_cursor_to_resume_from(
    db: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """With a deadline of 1 s (no time for a second page within the read budget) every stream is one
    page and a last line with resume_cursor; resuming from it, again and again, gives every event
    exactly once, in order."""
    srv = start_server(db.service_dsn, tls_files, tmp_path / "server.log", METASTORE_FEED_DEADLINE_S="1")
    try:
        with srv.client() as http:
            ids = fill(http, uuid.uuid4().hex[:8], 10, 300_000)
            got: list[int] = []
            cursor = None
            for _ in range(10):
                params = {"cursor": cursor} if cursor else {}
                with http.stream("GET", "/api/v1/events", headers=NDJSON, params=params) as r:
                    assert r.status_code == 200
                    lines = [line for line in r.iter_lines() if line]
                if not lines[-1].startswith('{"error"'):
                    got += ids_of(lines)
                    break
                error = json.loads(lines[-1])["error"]
                assert error["status"] == 503 and "deadline" in error["message"]
                got += ids_of(lines[:-1])
                assert error["resume_cursor"] == json.loads(lines[-2])["cursor"]
                cursor = error["resume_cursor"]
            assert got == ids
    finally:
        assert srv.stop() == 0, srv.log.read_text()


def test_forwarding_gets_past_events_stored_before_the_rule(
    pg_server: Any, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """Live forwarding reads through the feed, whose pages hold one such event each: ten events
    stored before the rule (12.4 MB of text each) among ordinary ones are sent, a receiver of this
    release refuses them (54M01, a 400, which the forwarder counts and passes), and it holds every
    other event."""
    source_db, receiver_db = create_database(pg_server), create_database(pg_server)
    tag = uuid.uuid4().hex[:8]
    ordinary = []
    with psycopg.connect(source_db.service_dsn, autocommit=True) as service:
        for i in range(10):
            body = json.dumps(padded(tag, i, 100)).encode()
            ordinary.append(body)
            assert service.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone() == ("stored",)
            store_as_before(source_db, bomb(tag, i).replace(b"1e308," * 20_000, b"", 1))
    receiver = start_server(receiver_db.service_dsn, tls_files, tmp_path / "receiver.log")
    forward_env = {"METASTORE_FORWARD_URL": receiver.url, "METASTORE_FORWARD_CA": str(tls_files.ca)}
    source = start_server(source_db.service_dsn, tls_files, tmp_path / "source.log", **forward_env)
    try:

        def all_answered() -> dict[str, Any] | None:
            with source.client() as http:
                # No target listed until the forwarder first claims it.
                targets = http.get("/api/v1/forwarding").json()["targets"]
            target = targets[0] if targets else {"sent": 0, "refused": 0}
            return target if target["sent"] + target["refused"] == 20 else None

        target = eventually(all_answered, timeout=180, interval=0.5, what="all 20 events answered")
        assert (target["sent"], target["refused"]) == (10, 10), target
        with psycopg.connect(receiver_db.owner_dsn) as owner:
            stored = owner.execute("SELECT count(*) FROM metastore.events").fetchone()
            refused = [r[0] for r in owner.execute("SELECT sqlstate FROM metastore.rejected_events")]
        assert stored == (10,) and refused == ["54M01"] * 10
    finally:
        assert source.stop() == 0, source.log.read_text()[-2000:]
        assert receiver.stop() == 0, receiver.log.read_text()[-2000:]
        drop_database(source_db)
        drop_database(receiver_db)
