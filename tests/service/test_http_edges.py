"""HTTP edges, over a raw TLS socket against the real service: a client that sends
`Expect: 100-continue` is refused before it is invited to send its body (a too-large
Content-Length, a wrong media type, a full in-flight budget, a failing database), and an HTTP/1.1
request needs exactly one Host header (RFC 9112, 3.2)."""

from __future__ import annotations

import json
import socket
import ssl
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.checks import metric
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server
from tests.support.service_fixtures import Serve

MAX_BODY = 256 * 1024
INFLIGHT = 512 * 1024


@pytest.fixture(scope="module")
def edge_server(module_serve: Serve) -> Server:
    return module_serve(
        METASTORE_MAX_BODY_BYTES=str(MAX_BODY),
        METASTORE_MAX_INFLIGHT_BYTES=str(INFLIGHT),
        METASTORE_REQUEST_DEADLINE_S="5",
    )


@contextmanager
def tls_socket(server: Server) -> Iterator[ssl.SSLSocket]:
    context = ssl.create_default_context(cafile=str(server.ca))
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        yield tls


def read_until_closed_or_quiet(tls: ssl.SSLSocket, quiet_s: float = 1.5) -> tuple[bytes, bool]:
    """What the server sent, and whether it closed the connection (rather than went quiet)."""
    tls.settimeout(quiet_s)
    received = b""
    try:
        while chunk := tls.recv(65536):
            received += chunk
        return received, True
    except TimeoutError:
        return received, False
    except (ssl.SSLError, ConnectionError):
        return received, True


def head(content_length: int, content_type: str = "application/json", extra: str = "") -> bytes:
    return (
        f"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {content_length}\r\nExpect: 100-continue\r\n{extra}\r\n"
    ).encode()


def error_of(response: bytes) -> dict[str, object]:
    body = response.split(b"\r\n\r\n", 1)[1]
    error: dict[str, object] = json.loads(body)["error"]
    return error


def test_a_too_large_content_length_is_refused_without_100_continue(edge_server: Server) -> None:
    with tls_socket(edge_server) as tls:
        tls.sendall(head(MAX_BODY + 1))
        received, closed = read_until_closed_or_quiet(tls)
    assert received.startswith(b"HTTP/1.1 413 "), received[:200]
    assert b"100 Continue" not in received
    assert error_of(received)["code"] == "54000"
    assert closed  # the body it holds back is not waited for


def test_a_wrong_media_type_is_refused_without_100_continue(edge_server: Server) -> None:
    with tls_socket(edge_server) as tls:
        tls.sendall(head(100, content_type="text/plain"))
        received, closed = read_until_closed_or_quiet(tls)
    assert received.startswith(b"HTTP/1.1 415 "), received[:200]
    assert b"100 Continue" not in received
    assert closed


def test_a_full_inflight_budget_is_said_before_100_continue(edge_server: Server) -> None:
    # Two uploads send all but the last byte of bodies of the limit and hold: the budget is full.
    holders = []
    try:
        for _ in range(2):
            context = ssl.create_default_context(cafile=str(edge_server.ca))
            raw = socket.create_connection(("127.0.0.1", edge_server.port), timeout=5)
            tls = context.wrap_socket(raw, server_hostname="localhost")
            holders.append(tls)
            tls.sendall(head(MAX_BODY).replace(b"Expect: 100-continue\r\n", b"") + b" " * (MAX_BODY - 1))
        eventually(
            lambda: metric(edge_server, "metastore_http_inflight_bytes") >= 2 * (MAX_BODY - 1),
            timeout=4,
            interval=0.05,
            what="the uploads' bytes arriving",
        )
        with tls_socket(edge_server) as tls:
            tls.sendall(head(64 * 1024))
            received, closed = read_until_closed_or_quiet(tls)
    finally:
        for tls in holders:
            tls.close()
    assert received.startswith(b"HTTP/1.1 503 "), received[:200]
    assert b"100 Continue" not in received
    assert b"\r\nretry-after: 1\r\n" in received.lower()
    assert error_of(received)["code"] == "53000"
    assert closed


def test_a_body_that_can_be_taken_is_invited_with_100_continue(edge_server: Server) -> None:
    body = json.dumps(run_event(f"edges-{uuid.uuid4()}")).encode()
    with tls_socket(edge_server) as tls:
        tls.sendall(head(len(body)))
        first, _ = read_until_closed_or_quiet(tls, quiet_s=1)
        assert first == b"HTTP/1.1 100 Continue\r\n\r\n", first[:200]
        tls.sendall(body)
        tls.settimeout(5)
        answer = tls.recv(65536)
    assert answer.startswith(b"HTTP/1.1 201 "), answer[:200]


@pytest.mark.parametrize(
    ("request_head", "status"),
    [
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", 400),  # two
        (b"GET /healthz HTTP/1.1\r\nHost: local host\r\n\r\n", 400),  # not a host
        (b"GET /healthz HTTP/1.1\r\nHost: localhost:8443\r\n\r\n", 200),
        (b"GET /healthz HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n", 200),
        (b"GET /healthz HTTP/1.0\r\n\r\n", 200),  # HTTP/1.0 has no Host requirement
    ],
)
def test_http_1_1_needs_exactly_one_host(edge_server: Server, request_head: bytes, status: int) -> None:
    with tls_socket(edge_server) as tls:
        tls.sendall(request_head)
        received, _ = read_until_closed_or_quiet(tls, quiet_s=1)
    assert received.startswith(b"HTTP/1.1 %d " % status), received[:200]
    if status == 400:
        assert b"Host" in received.split(b"\r\n\r\n", 1)[1]


def test_a_failing_database_is_said_before_100_continue(
    module_db: Database, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory
) -> None:
    server = start_server(
        module_db.service_dsn,
        tls_files,
        tmp_path_factory.mktemp("edges-breaker") / "server.log",
        METASTORE_INGEST_TIMEOUT_MS="300",
    )
    try:
        with server.client() as http, psycopg.connect(module_db.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            # Three requests in a row that the database answers nobody's: the breaker opens.
            for _ in range(3):
                assert http.post("/api/v1/lineage", json=run_event(f"edges-{uuid.uuid4()}")).status_code == 503
            with tls_socket(server) as tls:
                tls.sendall(head(2000))
                received, closed = read_until_closed_or_quiet(tls)
            blocker.rollback()
    finally:
        assert server.stop() == 0
    assert received.startswith(b"HTTP/1.1 503 "), received[:200]
    assert b"100 Continue" not in received
    assert b"database keeps failing" in received
    assert closed
