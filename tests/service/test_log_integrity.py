"""Every log line is valid UTF-8 JSON whatever the client sends, on stdout and in
METASTORE_LOG_FILE (the file Vector ships), with nothing but those lines: no traceback on stderr.
X-Request-ID is kept only when it is printable ASCII of at most 128 characters, else replaced by a
generated id, and the response says which id was used."""

from __future__ import annotations

import json
import logging
import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metastore import logs
from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.servers import Server, start_server


@pytest.fixture(scope="module")
def logged_server(
    module_db: Database, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Path, Path]]:
    base = tmp_path_factory.mktemp("logs")
    server = start_server(
        module_db.service_dsn,
        tls_files,
        base / "stdout.log",
        stderr_log=base / "stderr.log",
        METASTORE_LOG_FILE=str(base / "metastore.py.json"),
    )
    yield server, base / "metastore.py.json", base / "stderr.log"
    assert server.stop() == 0


def raw_post(server: Server, request_id: bytes, body: bytes = b'{"eventTime": 5}') -> dict[str, str]:
    """A POST whose X-Request-ID is exactly these bytes; the response's headers."""
    port = int(server.url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(server.ca))
    request = (
        b"POST /api/v1/lineage HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nX-Request-ID: " + request_id + b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(request)
        received = b""
        while chunk := tls.recv(65536):
            received += chunk
    head = received.split(b"\r\n\r\n", 1)[0].decode("ascii")  # the answer's head is ASCII too
    assert head.startswith("HTTP/1.1 400 "), head
    return {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in head.split("\r\n")[1:])}


def json_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    text = data.decode("utf-8")  # raises on any invalid UTF-8
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize(
    "request_id",
    [
        b"\xff\xfe\xc3(",  # not UTF-8
        "caf\u00e9-\u202e".encode(),  # UTF-8, not ASCII (a bidi control among it)
        b"two words",
        b"x" * 129,
        b"\x1b[31mred",
    ],
)
def test_a_hostile_request_id_is_replaced_and_every_line_stays_valid(
    logged_server: tuple[Server, Path, Path], request_id: bytes
) -> None:
    server, log_file, stderr = logged_server
    headers = raw_post(server, request_id)
    used = headers["x-request-id"]
    assert str(uuid.UUID(used)) == used  # a generated id
    # The rejection is logged with the id used, in both places, as valid UTF-8 JSON.
    for path in (server.log, log_file):
        lines = json_lines(path)
        assert [m for m in lines if m.get("request_id") == used and "rejected" in m["message"]], path
    assert stderr.read_text("utf-8", errors="replace") == ""


def test_a_good_request_id_is_kept(logged_server: tuple[Server, Path, Path]) -> None:
    server, log_file, _ = logged_server
    wanted = "trino-" + "q" * 100 + "-[0001]"
    assert raw_post(server, wanted.encode())["x-request-id"] == wanted
    assert [m for m in json_lines(log_file) if m.get("request_id") == wanted]


def test_the_formatter_never_writes_invalid_utf8() -> None:
    """Whatever text reaches a log call (surrogate-escaped bytes, lone surrogates), the line is
    valid UTF-8 JSON."""
    record = logging.LogRecord("metastore", logging.INFO, __file__, 1, "got %s", ("\udcff\ud800 ok",), None)
    token = logs.request_id.set("\udcfe")
    try:
        line = logs.JsonFormatter().format(record)
    finally:
        logs.request_id.reset(token)
    parsed = json.loads(line.encode("utf-8").decode("utf-8"))
    assert parsed["message"].endswith(" ok")
