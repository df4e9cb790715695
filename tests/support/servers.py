"""The real service as a subprocess, and an HTTPS client that trusts its test CA: the one way
tests, tests/e2e and bench start a service and wait for it."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from devtools.localpg import free_port
from tests.support.certs import TLSFiles

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "Server", "free_port", "service_env", "start_server", "wait_until_serving"]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    ca: Path
    log: Path
    timeout: float = 10  # of its clients' requests

    def client(self, **kwargs: Any) -> httpx.Client:
        verify = ssl.create_default_context(cafile=str(self.ca)) if self.url.startswith("https") else False
        # A client of this API posts JSON (the service refuses other media types with 415).
        kwargs["headers"] = {"Content-Type": "application/json", **kwargs.get("headers", {})}
        kwargs.setdefault("timeout", self.timeout)
        return httpx.Client(base_url=self.url, verify=verify, **kwargs)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def metrics(self) -> str:
        with self.client() as c:
            return c.get("/metrics").text

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def service_env(database_url: str, tls: TLSFiles | None, port: int, **env: str) -> dict[str, str]:
    """This process's environment without any METASTORE_ or OTEL_ setting, then the service's."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "OTEL_"))}
    environ.update({"METASTORE_DATABASE_URL": database_url, "METASTORE_HOST": "127.0.0.1", "METASTORE_PORT": str(port)})
    if tls is None:
        environ["METASTORE_TLS"] = "off"
    else:
        environ.update({"METASTORE_TLS_CERT": str(tls.cert), "METASTORE_TLS_KEY": str(tls.key)})
    environ.update(env)
    return environ


def start_server(
    database_url: str,
    tls: TLSFiles | None,
    log: Path,
    *,
    stderr_log: Path | None = None,
    port: int | None = None,
    module: str = "metastore",
    ready: str = "/healthz",
    timeout: float = 30,
    **env: str,
) -> Server:
    """The service (`python -m <module> serve`) as a subprocess, answering 200 on `ready` (/readyz:
    with its database too); its stdout (and stderr, unless stderr_log is given) go to log."""
    port = port or free_port()
    environ = service_env(database_url, tls, port, **env)
    with log.open("wb") as out, stderr_log.open("wb") if stderr_log else log.open("ab") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", module, "serve"],
            env=environ,
            cwd=ROOT,
            stdout=out,
            stderr=err if stderr_log else subprocess.STDOUT,
            start_new_session=True,
        )
    scheme = "https" if tls else "http"
    server = Server(process, f"{scheme}://localhost:{port}", tls.ca if tls else Path(), log)
    try:
        wait_until_serving(server, timeout, ready)
    except BaseException:
        server.stop(signal.SIGKILL)
        raise
    return server


def wait_until_serving(server: Server, timeout: float = 30, path: str = "/healthz") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.log.read_text()}")
        try:
            with server.client() as client:
                if client.get(path).status_code == 200:
                    return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server did not answer {path} within {timeout} s:\n{server.log.read_text()}")
