"""The service reaches PostgreSQL over TLS with libpq's own settings (sslmode=verify-full and a CA
bundle in METASTORE_DATABASE_URL), and refuses a server its CA did not sign."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from metastore.localpg import LocalPostgres
from tests.conftest import Database, provision
from tests.server_fixtures import TLSFiles, start_server

# The embedded PostgreSQL is built without OpenSSL; Debian's server has it (.ci/run installs it).
SYSTEM_PG = Path("/usr/lib/postgresql/15/bin")


@pytest.fixture
def tls_pg(tmp_path: Path) -> Iterator[tuple[Database, Path]]:
    if not (SYSTEM_PG / "postgres").exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide a TLS-capable PostgreSQL at {SYSTEM_PG}")
        pytest.skip(f"needs a TLS-capable PostgreSQL at {SYSTEM_PG} (apt-get install postgresql-15)")
    ca = trustme.CA()
    server = LocalPostgres(bin_path=SYSTEM_PG)
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    cert, key = server.base / "server.crt", server.base / "server.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    os.chmod(key, 0o600)
    if server.run_as:
        user = pwd.getpwnam(server.run_as)
        for path in (cert, key):
            os.chown(path, user.pw_uid, user.pw_gid)
    ca_file = tmp_path / "pg-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server.start(options=f"-c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key}")
    try:
        yield provision(server, "metastore"), ca_file
    finally:
        server.cleanup()


def test_verify_full_with_a_ca_bundle(tls_pg: tuple[Database, Path], tls_files: TLSFiles, tmp_path: Path) -> None:
    db, ca_file = tls_pg
    dsn = f"{db.service_dsn} host=localhost sslmode=verify-full sslrootcert={ca_file}"
    server = start_server(dsn, tls_files, tmp_path / "good.log")
    try:
        with server.client() as http:
            assert http.get("/readyz").status_code == 200
            posted = http.post(
                "/api/v1/lineage",
                json={"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "tls", "name": "job"}},
            )
            assert posted.status_code == 201
    finally:
        assert server.stop() == 0

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
