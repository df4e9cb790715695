"""docs/operations.md walked end to end on a bring-your-own PostgreSQL: Debian's PostgreSQL 15
with TLS and scram-sha-256 only, the roles as the guide creates them (passwords with special
characters), deploy and verify as the owner, serve as the service role with verify-full, ingest,
an upgrade (deploy again under the running service), and a guarded revert.

The connection settings are passed the two ways the chart passes them: the parts (a key/value
connection string plus PGUSER and PGPASSWORD from a credentials Secret, PGSSLMODE and
PGSSLROOTCERT from the CA bundle) and a whole URL from a Secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
import pytest
import trustme
from psycopg import sql

from devtools.localpg import LocalPostgres
from metastore import migrations
from tests.conftest import FIXTURES
from tests.support.certs import TLSFiles
from tests.support.eventually import eventually
from tests.support.servers import start_server
from tests.support.system_pg import tls_postgres

SYSTEM_PG = Path(os.environ.get("METASTORE_PG_BIN", "/usr/lib/postgresql/15/bin"))
# Quotes, backslash, spaces and every character a URL or a conninfo string treats specially.
OWNER_PASSWORD = "o'w\"n er\\ @:/?#[]%&=+$,;"
SERVICE_PASSWORD = "s3rv!ce p@ss:/?#%'\"\\ é"

HBA = """\
# The DBA on the local socket; everyone else over TLS with scram, nothing else.
local all postgres trust
hostssl all all 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 reject
"""


@dataclass
class Byo:
    server: LocalPostgres
    ca: Path

    @property
    def dba(self) -> str:
        return f"host={self.server.base} port={self.server.port} user=postgres dbname=postgres"

    def parts_env(self, password: str, user: str, ca: Path | None = None) -> dict[str, str]:
        """The chart's way: the non-secret parts, and PG* variables for the rest."""
        return {
            "PGUSER": user,
            "PGPASSWORD": password,
            "PGSSLMODE": "verify-full",
            "PGSSLROOTCERT": str(ca or self.ca),
        }

    @property
    def conninfo(self) -> str:
        return f"host='localhost' port='{self.server.port}' dbname='metastore'"

    def url(self, user: str, password: str) -> str:
        """The full-URL Secret: the password percent-encoded, as a URL needs it."""
        return (
            f"postgresql://{user}:{quote(password, safe='')}@localhost:{self.server.port}/metastore"
            f"?sslmode=verify-full&sslrootcert={quote(str(self.ca), safe='')}"
        )


@pytest.fixture
def byo_pg(tmp_path: Path) -> Iterator[Byo]:
    ca_file = tmp_path / "pg-ca.pem"
    server = tls_postgres(SYSTEM_PG, ca_file, ("localhost",), "-c password_encryption=scram-sha-256")
    try:
        (server.data / "pg_hba.conf").write_text(HBA)
        server._run("pg_ctl", "-D", str(server.data), "reload")
        time.sleep(0.5)
        yield Byo(server, ca_file)
    finally:
        server.cleanup()


def metastore(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    return subprocess.run(
        [sys.executable, "-m", "metastore", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def create_roles(byo: Byo) -> None:
    """docs/operations.md, "Roles and grants", as a DBA runs it."""
    with psycopg.connect(byo.dba, autocommit=True) as conn:
        conn.execute("CREATE ROLE metastore_app NOLOGIN")
        conn.execute("CREATE ROLE metastore_reader NOLOGIN")
        conn.execute(sql.SQL("CREATE ROLE metastore_owner LOGIN PASSWORD {}").format(sql.Literal(OWNER_PASSWORD)))
        conn.execute("CREATE DATABASE metastore OWNER metastore_owner")
        conn.execute(
            sql.SQL("CREATE ROLE metastore_service LOGIN PASSWORD {} IN ROLE metastore_app").format(
                sql.Literal(SERVICE_PASSWORD)
            )
        )
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'metastore_service'").fetchone()
        assert stored and stored[0].startswith("SCRAM-SHA-256$")


def wait_ready(http: httpx.Client, want: int, timeout: float = 20) -> None:
    eventually(lambda: http.get("/readyz").status_code == want, timeout, interval=0.3, what=f"/readyz answering {want}")


def test_the_operators_guide_end_to_end(byo_pg: Byo, tls_files: TLSFiles, tmp_path: Path) -> None:
    create_roles(byo_pg)
    owner = {"METASTORE_ADMIN_DATABASE_URL": byo_pg.conninfo, **byo_pg.parts_env(OWNER_PASSWORD, "metastore_owner")}

    # Before the deploy, verify says what is missing; a wrong password or CA is a clear message.
    result = metastore("db", "verify", env=owner)
    assert result.returncode == 1 and "nothing is deployed" in result.stdout
    wrong = {**owner, "PGPASSWORD": OWNER_PASSWORD + "x"}
    result = metastore("db", "status", env=wrong)
    assert result.returncode == migrations.EXIT_UNREACHABLE
    assert "password authentication failed" in result.stderr and "Traceback" not in result.stderr
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    result = metastore("db", "status", env={**owner, "PGSSLROOTCERT": str(other_ca)})
    assert result.returncode == migrations.EXIT_UNREACHABLE and "certificate verify failed" in result.stderr

    # Install: the hook Job's deploy, then verify.
    result = metastore("db", "deploy", env=owner)
    assert result.returncode == 0, result.stderr
    result = metastore("db", "verify", env=owner)
    assert result.returncode == 0, result.stdout + result.stderr

    # Serve as the service role, verify-full, from a whole-URL Secret.
    service_url = byo_pg.url("metastore_service", SERVICE_PASSWORD)
    server = start_server(service_url, tls_files, tmp_path / "server.log")
    try:
        with server.client() as http:
            wait_ready(http, 200)
            event = json.loads((FIXTURES / "trino" / "04-ctas-complete.json").read_text())
            assert http.post("/api/v1/lineage", json=event).status_code == 201
            names = {d["name"] for d in http.get("/api/v1/datasets").json()["datasets"]}
            assert names, "the event's datasets are listed"

            # Upgrade: the hook deploys again under the running service; nothing pending.
            result = metastore("db", "deploy", env=owner)
            assert result.returncode == 0, result.stderr
            assert metastore("db", "verify", env=owner).returncode == 0
            wait_ready(http, 200)
            assert {d["name"] for d in http.get("/api/v1/datasets").json()["datasets"]} == names

            # A revert without --yes (no terminal, as in a Job) changes nothing.
            result = metastore("db", "revert", "--to", "0", env=owner)
            assert result.returncode == 2 and "--yes" in result.stderr
            assert {d["name"] for d in http.get("/api/v1/datasets").json()["datasets"]} == names

            # With --yes it reverts; the service turns unready, and ready again after a deploy.
            result = metastore("db", "revert", "--to", "0", "--yes", env=owner)
            assert result.returncode == 0, result.stderr
            wait_ready(http, 503)
            assert metastore("db", "verify", env=owner).returncode == 1
            assert metastore("db", "deploy", env=owner).returncode == 0
            wait_ready(http, 200)
    finally:
        server.stop()

    # The chart's other way for the service: the parts, with the password from PGPASSWORD.
    parts = byo_pg.parts_env(SERVICE_PASSWORD, "metastore_service")
    server = start_server(byo_pg.conninfo, tls_files, tmp_path / "parts.log", **parts)
    try:
        with server.client() as http:
            wait_ready(http, 200)
            assert http.post("/api/v1/lineage", json=event).status_code == 201
    finally:
        server.stop()
