"""The real service as a subprocess over TLS, and an HTTPS client that trusts its test CA.

Imported by the conftest.py of each test folder that needs a server."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from devtools.localpg import free_port
from tests.conftest import Database, create_database, drop_database


@dataclass
class TLSFiles:
    ca: Path
    cert: Path
    key: Path


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    base = tmp_path_factory.mktemp("tls")
    files = TLSFiles(base / "ca.pem", base / "cert.pem", base / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    cert.private_key_and_cert_chain_pem.write_to_path(str(files.cert))
    cert.private_key_pem.write_to_path(str(files.key))
    return files


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    ca: Path
    log: Path

    def client(self, **kwargs: Any) -> httpx.Client:
        verify = ssl.create_default_context(cafile=str(self.ca)) if self.url.startswith("https") else False
        # A client of this API posts JSON (the service refuses other media types with 415).
        kwargs["headers"] = {"Content-Type": "application/json", **kwargs.get("headers", {})}
        return httpx.Client(base_url=self.url, verify=verify, timeout=10, **kwargs)

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_server(
    database_url: str, tls: TLSFiles | None, log: Path, *, stderr_log: Path | None = None, **env: str
) -> Server:
    """The service as a subprocess; its stdout (and stderr, unless stderr_log is given) go to log."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    environ.update({"METASTORE_DATABASE_URL": database_url, "METASTORE_HOST": "127.0.0.1", "METASTORE_PORT": str(port)})
    if tls is None:
        environ["METASTORE_TLS"] = "off"
    else:
        environ.update({"METASTORE_TLS_CERT": str(tls.cert), "METASTORE_TLS_KEY": str(tls.key)})
    environ.update(env)
    with log.open("wb") as out, stderr_log.open("wb") if stderr_log else log.open("ab") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "metastore", "serve"],
            env=environ,
            stdout=out,
            stderr=err if stderr_log else subprocess.STDOUT,
            start_new_session=True,
        )
    scheme = "https" if tls else "http"
    server = Server(process, f"{scheme}://localhost:{port}", tls.ca if tls else Path(), log)
    try:
        wait_until_serving(server)
    except BaseException:
        server.stop(signal.SIGKILL)
        raise
    return server


def wait_until_serving(server: Server, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.log.read_text()}")
        try:
            with server.client() as client:
                if client.get("/healthz").status_code == 200:
                    return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not answer /healthz within {timeout} s:\n{server.log.read_text()}")


@pytest.fixture(scope="module")
def module_db(pg_server: Any) -> Iterator[Database]:
    db = create_database(pg_server)
    yield db
    drop_database(db)


@pytest.fixture(scope="module")
def server(module_db: Database, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(
        module_db.service_dsn,
        tls_files,
        tmp_path_factory.mktemp("server") / "server.log",
        METASTORE_MAX_BODY_BYTES="1048576",
    )
    yield srv
    assert srv.stop() == 0, srv.log.read_text()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c
