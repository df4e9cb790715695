"""/readyz says the true reason the service cannot work: a wrong password, no privilege, a database
that does not exist, a refused connection, a host that does not resolve, no answer; and it
recovers by itself. Against a real PostgreSQL with scram-sha-256 password authentication and the
roles as docs/operations.md creates them; credentials also as mounted files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from devtools.localpg import LocalPostgres, free_port
from metastore import migrations
from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.events import run_event
from tests.support.listeners import silent_listener
from tests.support.servers import Server, start_server

OWNER_PASSWORD = "o'wner p@ss:/?#%\\"
SERVICE_PASSWORD = "s3rv!ce p@ss:/?#%'\"\\ é"
HBA = """\
local all postgres trust
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
"""


@dataclass
class Scram:
    server: LocalPostgres

    @property
    def dba(self) -> str:
        return f"host={self.server.base} port={self.server.port} user=postgres dbname=postgres"

    def dsn(self, user: str, password: str | None = None, dbname: str = "metastore", port: int | None = None) -> str:
        words = f"host=127.0.0.1 port={port or self.server.port} dbname={dbname} user={user}"
        if password is not None:
            words += " password=" + "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return words


@pytest.fixture(scope="module")
def scram() -> Iterator[Scram]:
    server = LocalPostgres()
    server.start(options="-c password_encryption=scram-sha-256")
    try:
        (server.data / "pg_hba.conf").write_text(HBA)
        server._run("pg_ctl", "-D", str(server.data), "reload")
        byo = Scram(server)
        # docs/operations.md, "Roles and grants", as a DBA runs it.
        with psycopg.connect(byo.dba, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE metastore_owner LOGIN PASSWORD {}").format(sql.Literal(OWNER_PASSWORD)))
            conn.execute("CREATE DATABASE metastore OWNER metastore_owner")
            conn.execute("CREATE ROLE metastore_app NOLOGIN")
            conn.execute("CREATE ROLE metastore_reader NOLOGIN")
            conn.execute(
                sql.SQL("CREATE ROLE metastore_service LOGIN PASSWORD {} IN ROLE metastore_app").format(
                    sql.Literal(SERVICE_PASSWORD)
                )
            )
            # A login role that is no member of the app role, and one that may connect, no more.
            conn.execute("CREATE ROLE stranger LOGIN PASSWORD 'stranger'")
            conn.execute("CREATE ROLE outsider LOGIN PASSWORD 'outsider'")
        migrations.deploy(byo.dsn("metastore_owner", OWNER_PASSWORD))
        with psycopg.connect(byo.dsn("metastore_owner", OWNER_PASSWORD), autocommit=True) as owner:
            owner.execute("GRANT CONNECT ON DATABASE metastore TO outsider")
        yield byo
    finally:
        server.cleanup()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP listener that accepts connections and never says a word."""
    with silent_listener() as port:
        yield port


def readiness(server: Server) -> httpx.Response:
    """/readyz, which must answer within the probe's 2 s (the canary's bound is 0.8 s)."""
    with server.client() as http:
        started = time.monotonic()
        response = http.get("/readyz")
        assert time.monotonic() - started < 1.5
    return response


def serve(dsn: str, tls_files: TLSFiles, tmp_path: Path, **env: str) -> Server:
    return start_server(dsn, tls_files, tmp_path / "server.log", METASTORE_DB_CONNECT_TIMEOUT_S="2", **env)


@pytest.mark.parametrize(
    ("case", "status", "words"),
    [
        ("wrong password", "login refused", 'password authentication failed for user "metastore_service"'),
        ("no such role", "login refused", 'password authentication failed for user "nobody"'),
        ("no CONNECT", "not permitted", 'permission denied for database "metastore"'),
        ("no app role", "not permitted", "may not call metastore.schema_version()"),
        ("no such database", "database missing", 'database "nowhere" does not exist'),
        ("refused", "database unavailable", "Connection refused"),
        ("unknown host", "database unavailable", "failed to resolve host 'metastore-db.invalid'"),
        ("no answer", "database unavailable", "did not answer"),
    ],
)
def test_readiness_says_the_true_reason(
    case: str, status: str, words: str, scram: Scram, silent_port: int, tls_files: TLSFiles, tmp_path: Path
) -> None:
    dsn = {
        "wrong password": scram.dsn("metastore_service", "not the password"),
        "no such role": scram.dsn("nobody", "x"),
        "no CONNECT": scram.dsn("stranger", "stranger"),
        "no app role": scram.dsn("outsider", "outsider"),
        "no such database": scram.dsn("metastore_service", SERVICE_PASSWORD, dbname="nowhere"),
        "refused": scram.dsn("metastore_service", SERVICE_PASSWORD, port=free_port()),
        "unknown host": "host=metastore-db.invalid dbname=metastore user=metastore_service password=x",
        "no answer": scram.dsn("metastore_service", SERVICE_PASSWORD, port=silent_port),
    }[case]
    server = serve(dsn, tls_files, tmp_path)
    try:
        for _ in range(3):  # the first probe, and the ones after the pools have tried and failed
            ready = readiness(server)
            assert ready.status_code == 503
            assert ready.json()["status"] == status, ready.json()
            assert words in ready.json()["reason"], ready.json()
            time.sleep(1)
        # A request that needs the database says it cannot have one: 503, never a 500.
        with server.client() as http:
            response = http.get("/api/v1/datasets")
        assert response.status_code == 503, response.text
    finally:
        assert server.stop() == 0
    assert "Traceback" not in server.log.read_text()


def test_the_right_password_is_ready(scram: Scram, tls_files: TLSFiles, tmp_path: Path) -> None:
    server = serve(scram.dsn("metastore_service", SERVICE_PASSWORD), tls_files, tmp_path)
    try:
        assert readiness(server).json()["status"] == "ready"
    finally:
        assert server.stop() == 0


def test_credentials_from_files_are_read_at_each_new_connection(
    scram: Scram, tls_files: TLSFiles, tmp_path: Path
) -> None:
    user_file, password_file = tmp_path / "username", tmp_path / "password"
    user_file.write_text("metastore_service\n")  # as `kubectl create secret --from-file` may leave it
    password_file.write_text("wrong\n")
    files = {"METASTORE_DATABASE_USER_FILE": str(user_file), "METASTORE_DATABASE_PASSWORD_FILE": str(password_file)}
    # The connection string names neither the role nor a password (nor do PGUSER/PGPASSWORD).
    server = serve(f"host=127.0.0.1 port={scram.server.port} dbname=metastore", tls_files, tmp_path, **files)
    try:
        ready = readiness(server)
        assert ready.json()["status"] == "login refused", ready.json()
        assert 'password authentication failed for user "metastore_service"' in ready.json()["reason"]
        # The Secret is corrected (the kubelet rewrites the mounted file): ready without a restart.
        password_file.write_text(SERVICE_PASSWORD + "\n")
        deadline = time.monotonic() + 20
        while readiness(server).status_code != 200:
            assert time.monotonic() < deadline, readiness(server).json()
            time.sleep(0.5)
        with server.client() as http:
            assert http.post("/api/v1/lineage", json=run_event(job="files")).status_code == 201
        # The password is rotated: the role's, then the file; new connections use the new one.
        rotated = SERVICE_PASSWORD + " rotated"
        with psycopg.connect(scram.dba, autocommit=True) as dba:
            dba.execute(sql.SQL("ALTER ROLE metastore_service PASSWORD {}").format(sql.Literal(rotated)))
            password_file.write_text(rotated)
            dba.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'metastore_service'")
        deadline = time.monotonic() + 20
        with server.client() as http:
            while http.post("/api/v1/lineage", json=run_event(job="rotated")).status_code != 201:
                assert time.monotonic() < deadline
                time.sleep(0.5)
        # A file that goes away: the next connection cannot be made, and /readyz says why.
        password_file.unlink()
        with psycopg.connect(scram.dba, autocommit=True) as dba:
            dba.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'metastore_service'")
        # (The first probe after the drop may only see the pool time out: the next ones say why.)
        deadline = time.monotonic() + 20
        while (ready := readiness(server)).json()["status"] != "login refused":
            assert time.monotonic() < deadline, ready.json()
            time.sleep(0.5)
        assert f"cannot read METASTORE_DATABASE_PASSWORD_FILE={password_file}" in ready.json()["reason"]
        with psycopg.connect(scram.dba, autocommit=True) as dba:
            dba.execute(sql.SQL("ALTER ROLE metastore_service PASSWORD {}").format(sql.Literal(SERVICE_PASSWORD)))
    finally:
        assert server.stop() == 0


def admin(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    return subprocess.run(
        [sys.executable, "-m", "metastore", "db", *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_the_db_commands_read_credentials_from_files(scram: Scram, tmp_path: Path) -> None:
    user_file, password_file = tmp_path / "username", tmp_path / "password"
    user_file.write_text("metastore_owner")
    password_file.write_text(OWNER_PASSWORD + "\n")
    env = {
        "METASTORE_ADMIN_DATABASE_URL": f"host=127.0.0.1 port={scram.server.port} dbname=metastore",
        "METASTORE_ADMIN_DATABASE_USER_FILE": str(user_file),
        "METASTORE_ADMIN_DATABASE_PASSWORD_FILE": str(password_file),
        "METASTORE_ALLOWED_CONNECT_ROLES": "outsider",  # this module's role with CONNECT, and no more
    }
    result = admin("verify", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    password_file.write_text("wrong")
    result = admin("verify", env=env)
    assert result.returncode == migrations.EXIT_UNREACHABLE
    assert 'password authentication failed for user "metastore_owner"' in result.stderr
    missing = admin("verify", env={**env, "METASTORE_ADMIN_DATABASE_PASSWORD_FILE": str(tmp_path / "nothing")})
    assert missing.returncode == 2 and "METASTORE_ADMIN_DATABASE_PASSWORD_FILE" in missing.stderr


def test_serve_refuses_a_credentials_file_it_cannot_read(scram: Scram, tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"],
        env={
            **base,
            "METASTORE_DATABASE_URL": scram.dsn("metastore_service"),
            "METASTORE_TLS": "off",
            "METASTORE_DATABASE_PASSWORD_FILE": str(tmp_path / "nothing"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "METASTORE_DATABASE_PASSWORD_FILE" in result.stderr and "not a readable file" in result.stderr


def test_readiness_recovers_within_seconds_after_a_long_outage(
    own_pg: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    # Connection attempts back off 1, 2, 4 ... s. Left to grow for as long as the outage lasted,
    # the next attempt after a 45 s outage came up to 20 s after PostgreSQL was back.
    server = start_server(own_pg.service_dsn, tls_files, tmp_path / "server.log")
    try:
        assert readiness(server).status_code == 200
        own_pg.server.stop("immediate")
        outage_ends = time.monotonic() + 45
        while time.monotonic() < outage_ends:
            assert readiness(server).json()["status"] == "database unavailable"
            time.sleep(5)  # the chart's readiness probe period
        own_pg.server.start()
        back = time.monotonic()
        while readiness(server).status_code != 200:
            assert time.monotonic() - back < 8, readiness(server).json()
            time.sleep(1)
        with server.client() as http:
            assert http.post("/api/v1/lineage", json=run_event(job="after-outage")).status_code == 201
    finally:
        assert server.stop() == 0
