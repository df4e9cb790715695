"""Where the service listens: IPv6 and IPv4 alike by default (dual stack), and the optional
plain-HTTP metrics port (METASTORE_METRICS_PORT) that serves GET /metrics and nothing else."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Database
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.events import run_event
from tests.support.servers import free_port, start_server
from tests.support.service_fixtures import Serve


def test_the_default_address_takes_ipv6_and_ipv4(database: Database, tmp_path: Path) -> None:
    # METASTORE_HOST unset: its default, `::` with IPV6_V6ONLY off.
    (tmp_path / "tls").mkdir()
    tls = write_tls_files(tmp_path / "tls", names=("localhost", "127.0.0.1", "::1"))
    server = start_server(database.service_dsn, tls, tmp_path / "server.log", METASTORE_HOST="")
    try:
        context = ssl.create_default_context(cafile=str(tls.ca))
        for host in ("127.0.0.1", "[::1]"):
            with httpx.Client(base_url=f"https://{host}:{server.port}", verify=context, timeout=10) as http:
                assert http.get("/readyz").status_code == 200, host
                posted = http.post("/api/v1/lineage", json=run_event(job=f"over-{host}"))
                assert posted.status_code == 201, (host, posted.text)
    finally:
        assert server.stop() == 0


def test_the_metrics_port_serves_metrics_in_plain_http_and_nothing_else(serve: Serve) -> None:
    metrics_port = free_port()
    server = serve(
        METASTORE_HOST="::",
        METASTORE_METRICS_PORT=str(metrics_port),
    )
    try:
        for host in ("127.0.0.1", "[::1]"):
            with httpx.Client(base_url=f"http://{host}:{metrics_port}", timeout=10) as plain:
                scraped = plain.get("/metrics")
                assert scraped.status_code == 200, scraped.text
                assert scraped.headers["content-type"].startswith("text/plain")
                families = {f.name for f in text_string_to_metric_families(scraped.text)}
                # Refreshed at the scrape as on the main port: the pools' gauges are there.
                assert {"metastore_ready", "metastore_db_pool_connections"} <= families
                for method, path in (
                    ("GET", "/readyz"),
                    ("GET", "/api/v1/datasets"),
                    ("POST", "/api/v1/lineage"),
                    ("POST", "/metrics"),
                    ("GET", "/ui/"),
                ):
                    refused = plain.request(method, path, json={} if method == "POST" else None)
                    assert refused.status_code == 404, (method, path, refused.text)
                    assert refused.json()["error"]["message"] == "this port serves GET /metrics only"
        # The main port is unchanged: TLS, every route, /metrics too.
        with server.client() as http:
            assert http.get("/metrics").status_code == 200
            assert http.post("/api/v1/lineage", json=run_event(job="main-port")).status_code == 201
        with pytest.raises(httpx.TransportError), httpx.Client(timeout=5) as plain:
            plain.get(f"http://127.0.0.1:{server.port}/metrics")  # no plain HTTP there
    finally:
        assert server.stop() == 0


def test_the_metrics_port_holds_a_few_connections_and_does_not_count_as_clients(
    database: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    metrics_port = free_port()
    server = start_server(
        database.service_dsn, tls_files, tmp_path / "server.log", METASTORE_METRICS_PORT=str(metrics_port)
    )
    idle: list[socket.socket] = []
    try:
        for _ in range(8):
            idle.append(socket.create_connection(("127.0.0.1", metrics_port), 5))
        time.sleep(0.5)
        extra = socket.create_connection(("127.0.0.1", metrics_port), 5)
        extra.settimeout(5)
        try:
            assert extra.recv(1) == b""  # closed at once: over the cap of 8
        except ConnectionResetError:
            pass
        finally:
            extra.close()
        clients = {
            s.name: s.value
            for f in text_string_to_metric_families(server.metrics())
            for s in f.samples
            if s.name == "metastore_http_connections"
        }
        assert clients["metastore_http_connections"] == 1  # the scrape's own connection, on the main port
    finally:
        for conn in idle:
            conn.close()
        assert server.stop() == 0
    # Once they are gone, the port serves again.


def test_the_metrics_port_must_differ_from_the_main_one(database: Database) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "OTEL_"))}
    env.update(METASTORE_DATABASE_URL=database.service_dsn, METASTORE_TLS="off")
    env.update(METASTORE_PORT="8080", METASTORE_METRICS_PORT="8080")
    command = [sys.executable, "-m", "metastore", "serve"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "METASTORE_METRICS_PORT=8080 is METASTORE_PORT" in result.stderr
