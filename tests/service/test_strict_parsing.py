"""What could be read two ways is refused with a 400, against the real server
as the service role: ambiguous framing (a smuggling primitive behind a proxy), compressed data
with more after it, JSON objects with a duplicate key, a NUL in a query parameter."""

from __future__ import annotations

import gzip
import json
import socket
import ssl
import uuid
import zlib
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import Database
from tests.support.checks import count_events
from tests.support.servers import Server


def exchange(server: Server, request: bytes) -> tuple[bytes, bool]:
    """Sends raw bytes over TLS; returns what came back and whether the server closed."""
    port = int(server.url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(server.ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(request)
        received = b""
        try:
            while chunk := tls.recv(65536):
                received += chunk
            closed = True
        except (TimeoutError, ssl.SSLError, ConnectionError):
            closed = False
    return received, closed


def event(name: str) -> dict[str, Any]:
    return {"eventTime": "2024-01-01T00:00:00Z", "eventType": "COMPLETE", "job": {"namespace": "strict", "name": name}}


@pytest.mark.parametrize(
    "te_line",
    [
        b"Transfer-Encoding : chunked",  # whitespace before the colon
        b"Transfer-Encoding\t: chunked",
        b" Transfer-Encoding: chunked",  # a folded line (obs-fold)
        b"Transfer-Encoding: chunked",  # both framings at once
    ],
)
def test_ambiguous_framing_is_refused_and_the_connection_closed(
    server: Server, module_db: Database, te_line: bytes
) -> None:
    # Framed by Content-Length, the body is one event; framed as chunked (as a proxy honouring the
    # Transfer-Encoding would), it is an empty body followed by a second, smuggled request.
    name = f"smuggled-{uuid.uuid4().hex[:8]}"
    smuggled = json.dumps(event(name)).encode()
    inner = (
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(smuggled), smuggled)
    )
    body = b"0\r\n\r\n" + inner
    request = (
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n%s\r\n\r\n%s" % (len(body), te_line, body)
    )
    received, closed = exchange(server, request)
    assert received.startswith(b"HTTP/1.1 400 "), received[:200]
    assert received.count(b"HTTP/1.1 ") == 1 and closed  # one answer, then the connection is gone
    assert count_events(module_db, name) == 0


@pytest.mark.parametrize(
    ("extra", "length"),
    [
        (b"X-Pad: a\nTransfer-Encoding: chunked\r\n", None),  # a bare LF: a second line to the next hop
        (b"X-Pad: a\rb\r\n", None),
        (b"X-Pad: a\x00b\r\n", None),
        (b"", "\uff14\uff13\uff17".encode()),  # fullwidth digits, which int() reads
    ],
)
def test_a_header_value_with_cr_lf_nul_or_odd_digits_is_refused(
    server: Server, module_db: Database, extra: bytes, length: bytes | None
) -> None:
    name = f"odd-{uuid.uuid4().hex[:8]}"
    body = json.dumps(event(name)).encode()
    request = (
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n%s"
        b"Content-Length: %s\r\n\r\n%s" % (extra, length or str(len(body)).encode(), body)
    )
    received, _ = exchange(server, request)
    assert received.startswith(b"HTTP/1.1 400 "), received[:200]
    assert count_events(module_db, name) == 0


def test_a_well_formed_request_over_the_same_path_is_served(server: Server, module_db: Database) -> None:
    """The control for the test above: the same raw exchange, framed once, stores the event."""
    name = f"plain-{uuid.uuid4().hex[:8]}"
    body = json.dumps(event(name)).encode()
    request = (
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    received, _ = exchange(server, request)
    assert received.startswith(b"HTTP/1.1 201 "), received[:200]
    assert count_events(module_db, name) == 1


@pytest.mark.parametrize("case", ["two_gzip_members", "gzip_then_bytes", "deflate_then_bytes", "gzip_then_gzip"])
def test_compressed_data_with_more_after_it_is_refused(client: httpx.Client, module_db: Database, case: str) -> None:
    first, second = f"first-{uuid.uuid4().hex[:8]}", f"second-{uuid.uuid4().hex[:8]}"
    one = json.dumps(event(first)).encode()
    encoding = "deflate" if case.startswith("deflate") else "gzip"
    packed = zlib.compress(one) if encoding == "deflate" else gzip.compress(one)
    if case == "two_gzip_members":  # gunzip would give both, concatenated; the service read only the first
        body = packed + gzip.compress(b" ")
    elif case == "gzip_then_gzip":
        body = packed + gzip.compress(json.dumps(event(second)).encode())
    else:
        body = packed + b"trailing garbage"
    response = client.post("/api/v1/lineage", content=body, headers={"Content-Encoding": encoding})
    assert response.status_code == 400 and response.json()["error"]["code"] == "22P03", response.text
    assert count_events(module_db, first) == 0 and count_events(module_db, second) == 0
    # The control: the single member alone is stored.
    assert client.post("/api/v1/lineage", content=packed, headers={"Content-Encoding": encoding}).status_code == 201


@pytest.mark.parametrize(
    "template",
    [
        '{{"eventTime": "2024-01-01T00:00:00Z", "job": {{"namespace": "strict", "name": "{name}"}}, '
        '"eventTime": "2025-06-01T00:00:00Z"}}',  # top level
        '{{"eventTime": "2024-01-01T00:00:00Z", "job": {{"namespace": "strict", "name": "{name}", '
        '"namespace": "other"}}}}',  # nested
        '{{"eventTime": "2024-01-01T00:00:00Z", "job": {{"namespace": "strict", "name": "{name}"}}, '
        '"inputs": [{{"namespace": "n", "name": "a", "facets": {{"x": 1, "x": 2}}}}]}}',  # deep in an array
        '{{"eventTime": "2024-01-01T00:00:00Z", "job": {{"namespace": "strict", "name": "{name}"}}, '
        '"run": {{"runId": "r1", "\\u0072unId": "r2"}}}}',  # the same key, spelt with an escape
        '{{"eventTime": "2024-01-01T00:00:00Z", "job": {{"namespace": "strict", "name": "{name}"}}, '
        '"producer": "a", "producer": null}}',  # the last one null
    ],
)
def test_a_duplicate_key_is_refused(client: httpx.Client, module_db: Database, template: str) -> None:
    name = f"dup-{uuid.uuid4().hex[:8]}"
    body = template.format(name=name).encode()
    response = client.post("/api/v1/lineage", content=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "22030"
    batch = client.post("/api/v1/lineage/batch", content=b"[" + body + b"]")
    assert batch.status_code == 400 and batch.json()["error"]["code"] == "22030"
    # Not stored; the single POST leaves the record every refusal of JSON leaves (prefix, size, hash,
    # reason), the refused batch none.
    assert count_events(module_db, name) == 1
    with psycopg.connect(module_db.owner_dsn) as owner:
        row = owner.execute("SELECT count(*) FROM metastore.events WHERE job_name = %s", (name,)).fetchone()
    assert row == (0,)


def test_keys_that_only_look_alike_are_not_duplicates(client: httpx.Client) -> None:
    name = f"unique-{uuid.uuid4().hex[:8]}"
    body = json.dumps({**event(name), "facets": {"a": {"x": 1}, "b": {"x": 1}, "A": 2, "a:": "a", "\u00e9": 1}})
    assert client.post("/api/v1/lineage", content=body).status_code == 201


@pytest.mark.parametrize("query", ["q=%00", "namespace=a%00b", "cursor=%00", "%00=x", "kind=dataset&scheme=s%00"])
def test_a_nul_in_a_query_parameter_is_a_400(client: httpx.Client, query: str) -> None:
    response = client.get(f"/api/v1/datasets?{query}")
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "22021"
    assert client.get("/readyz").status_code == 200  # and the database was never blamed
