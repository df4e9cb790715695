"""Every response says nosniff, HSTS is sent when serving TLS, and the view's
CSP frame-ancestors is configurable (default 'self'), against the real server."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import Database
from tests.support.servers import Server, start_server
from tests.support.service_fixtures import Serve

REQUESTS = [
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/metrics", None),
    ("GET", "/api/v1/datasets", None),
    ("GET", "/api/v1/datasets/summary", None),
    ("GET", "/api/v1/datasets/999999", None),  # 404 from the database
    ("GET", "/api/v1/datasets?limit=x", None),  # 400 from the service
    ("GET", "/nowhere", None),  # 404 from Sanic's router
    ("POST", "/api/v1/lineage", b"{nope"),  # 400 from the database
    ("POST", "/api/v1/lineage", b"x" * 2_000_000),  # 413
    ("PUT", "/api/v1/lineage", b"{}"),  # 405
    ("GET", "/api/v1/openapi.json", None),
    ("GET", "/", None),  # redirect
    ("GET", "/ui/", None),
    ("GET", "/ui/app.js", None),
    ("GET", "/ui/style.css", None),
]


@pytest.mark.parametrize(("method", "path", "body"), REQUESTS)
def test_every_response_says_nosniff_and_hsts(client: httpx.Client, method: str, path: str, body: bytes | None) -> None:
    response = client.request(method, path, content=body)
    assert response.headers["x-content-type-options"] == "nosniff", (path, response.status_code)
    assert response.headers["strict-transport-security"] == "max-age=31536000"
    csp = response.headers["content-security-policy"]
    if path.startswith("/ui/"):
        assert "frame-ancestors 'self'" in csp and "script-src 'self'" in csp
    else:  # JSON, metrics, errors: nothing to run, nothing to frame
        assert csp == "default-src 'none'; frame-ancestors 'none'"


def test_a_refused_request_head_has_the_headers_too(server: Server) -> None:
    """Refused before routing (a header name with a space): the error still carries them."""
    port = int(server.url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(server.ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Bad : 1\r\n\r\n")
        head = tls.recv(65536).decode("latin-1").lower()
    assert head.startswith("http/1.1 400")
    assert "x-content-type-options: nosniff" in head and "strict-transport-security: max-age=31536000" in head


@pytest.fixture(scope="module")
def cockpit_server(module_serve: Serve) -> Server:
    return module_serve(
        METASTORE_FRAME_ANCESTORS="'self'   https://cockpit.example.com https://*.platform.example:8443",
    )


def test_frame_ancestors_is_configurable(cockpit_server: Server) -> None:
    with cockpit_server.client() as http:
        csp = http.get("/ui/").headers["content-security-policy"]
    assert csp.endswith("; frame-ancestors 'self' https://cockpit.example.com https://*.platform.example:8443")


def test_no_hsts_over_plain_http(module_db: Database, tmp_path: Path) -> None:
    server = start_server(module_db.service_dsn, None, tmp_path / "http.log")
    try:
        with server.client() as http:
            response = http.get("/healthz")
        assert "strict-transport-security" not in response.headers
        assert response.headers["x-content-type-options"] == "nosniff"
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(
    "value",
    [
        "'self'; script-src *",  # would add a directive
        "https://a.example,https://b.example",
        "'none' https://cockpit.example.com",
        "'unsafe-inline'",
        "https://cockpit.example.com' 'unsafe-eval'",
    ],
)
def test_a_bad_frame_ancestors_is_refused_at_start(value: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    env.update(METASTORE_DATABASE_URL="host=127.0.0.1 dbname=x", METASTORE_TLS="off", METASTORE_FRAME_ANCESTORS=value)
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "METASTORE_FRAME_ANCESTORS" in result.stderr and "Traceback" not in result.stderr
