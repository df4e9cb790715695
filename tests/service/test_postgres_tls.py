"""The service reaches PostgreSQL over TLS with libpq's own settings (sslmode=verify-full and a CA
bundle in METASTORE_DATABASE_URL), and refuses a server its CA did not sign. Anything less
than verify-full is warned about at start, shown in /readyz and a metric, and
refused with METASTORE_DATABASE_TLS=verify-full."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from tests.conftest import Database, provision
from tests.support.certs import TLSFiles
from tests.support.servers import Server, start_server
from tests.support.system_pg import tls_postgres

# The embedded PostgreSQL is built without OpenSSL; Debian's server has it (.ci/run installs it).
SYSTEM_PG = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def tls_pg(tmp_path: Path) -> Iterator[tuple[Database, Path]]:
    ca_file = tmp_path / "pg-ca.pem"
    server = tls_postgres(SYSTEM_PG, ca_file)
    try:
        yield provision(server, "metastore"), ca_file
    finally:
        server.cleanup()


def test_verify_full_with_a_ca_bundle(tls_pg: tuple[Database, Path], tls_files: TLSFiles, tmp_path: Path) -> None:
    db, ca_file = tls_pg
    dsn = f"{db.service_dsn} host=localhost sslmode=verify-full sslrootcert={ca_file}"
    server = start_server(dsn, tls_files, tmp_path / "good.log", METASTORE_DATABASE_TLS="verify-full")
    try:
        with server.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["database_tls"] == "verify-full"
            assert 'metastore_database_tls_verified{sslmode="verify-full"} 1.0' in http.get("/metrics").text
            posted = http.post(
                "/api/v1/lineage",
                json={"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "tls", "name": "job"}},
            )
            assert posted.status_code == 201
    finally:
        assert server.stop() == 0
    assert not unverified_warnings(server)

    # A CA that did not sign the server's certificate: the service must not connect.
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    dsn = f"{db.service_dsn} host=localhost sslmode=verify-full sslrootcert={other_ca}"
    server = start_server(dsn, tls_files, tmp_path / "bad.log")
    try:
        with server.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503
    finally:
        assert server.stop() == 0


def unverified_warnings(server: Server) -> list[str]:
    lines = [json.loads(line) for line in server.log_lines() if line.startswith("{")]
    return [m["message"] for m in lines if m["levelname"] == "WARNING" and "does not verify the server" in m["message"]]


def test_pgsslmode_counts_as_the_connection_strings(
    tls_pg: tuple[Database, Path], tls_files: TLSFiles, tmp_path: Path
) -> None:
    """What the chart does: a plain connection string, libpq's PGSSLMODE and PGSSLROOTCERT."""
    db, ca_file = tls_pg
    server = start_server(
        f"{db.service_dsn} host=localhost",
        tls_files,
        tmp_path / "env.log",
        METASTORE_DATABASE_TLS="verify-full",
        PGSSLMODE="verify-full",
        PGSSLROOTCERT=str(ca_file),
    )
    try:
        with server.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["database_tls"] == "verify-full"
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("sslmode", ["require", "verify-ca"])
def test_less_than_verify_full_is_warned_about_and_shown(
    tls_pg: tuple[Database, Path], tls_files: TLSFiles, tmp_path: Path, sslmode: str
) -> None:
    db, ca_file = tls_pg
    dsn = f"{db.service_dsn} host=localhost sslmode={sslmode} sslrootcert={ca_file}"
    server = start_server(dsn, tls_files, tmp_path / "unverified.log")
    try:
        with server.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["database_tls"] == "unverified"
            assert f'metastore_database_tls_verified{{sslmode="{sslmode}"}} 0.0' in http.get("/metrics").text
    finally:
        assert server.stop() == 0
    assert [m for m in unverified_warnings(server) if f"sslmode={sslmode}" in m]


def test_the_default_connection_is_unverified(server: Server) -> None:
    """No sslmode anywhere: libpq's `prefer`, which an attacker on the path can downgrade."""
    with server.client() as http:
        assert http.get("/readyz").json()["database_tls"] == "unverified"
        assert 'metastore_database_tls_verified{sslmode="prefer"} 0.0' in http.get("/metrics").text
    assert [m for m in unverified_warnings(server) if "sslmode=prefer" in m]


@pytest.mark.parametrize(
    ("url", "env"),
    [
        ("host=db dbname=metastore user=svc", {}),
        ("host=db dbname=metastore user=svc sslmode=require", {"PGSSLMODE": "verify-full"}),
        ("postgresql://svc@db/metastore?sslmode=verify-ca", {}),
        ("host=db dbname=metastore user=svc", {"PGSSLMODE": "prefer"}),
    ],
)
def test_verify_full_required_refuses_to_start(url: str, env: dict[str, str]) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PGSSL"))}
    environ.update(env, METASTORE_DATABASE_URL=url, METASTORE_TLS="off", METASTORE_DATABASE_TLS="verify-full")
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"], env=environ, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "METASTORE_DATABASE_TLS" in result.stderr and "Traceback" not in result.stderr
