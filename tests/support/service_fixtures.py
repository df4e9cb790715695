"""The pytest fixtures of a real service over TLS: the session's certificates (tls_files), a database
per module (module_db), one service per module (server) and its client, `serve` and `module_serve`,
which start a service with given settings and stop it at teardown, and locked_events, a database that stores
nothing for now.

Imported by the conftest.py of each test folder that needs a service; bench does not import it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from devtools.localpg import LocalPostgres
from tests.conftest import Database, fresh_database
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.servers import Server, start_server

Serve = Callable[..., Server]


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def module_db(pg_server: LocalPostgres) -> Iterator[Database]:
    yield from fresh_database(pg_server)


@pytest.fixture(scope="module")
def server(module_serve: Serve) -> Server:
    return module_serve(METASTORE_MAX_BODY_BYTES="1048576")


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def serving(dsn: str, tls: TLSFiles, logs: Path) -> Iterator[Serve]:
    """The services started on dsn, logging to logs/, are stopped when this ends; one still
    running then that exits non-zero fails with its log."""
    started: list[Server] = []

    def start(**settings: Any) -> Server:
        srv = start_server(dsn, tls, logs / f"server{len(started)}.log", **settings)
        started.append(srv)
        return srv

    yield start
    running = [srv for srv in started if srv.process.poll() is None]
    codes = [(srv.stop(), srv) for srv in started]
    for code, srv in codes:
        assert srv not in running or code == 0, srv.log.read_text()


@pytest.fixture
def serve(database: Database, tls_files: TLSFiles, tmp_path: Path) -> Iterator[Serve]:
    """serve(**settings): a service over TLS on this test's database with the given METASTORE_
    settings (and start_server's keywords), stopped at teardown."""
    yield from serving(database.service_dsn, tls_files, tmp_path)


@pytest.fixture(scope="module")
def module_serve(module_db: Database, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    """serve, on the module's database, stopped at the module's end: for module-scoped services."""
    yield from serving(module_db.service_dsn, tls_files, tmp_path_factory.mktemp("server"))


@pytest.fixture
def locked_events(database: Database) -> Iterator[psycopg.Connection[Any]]:
    """The owner holding metastore.events: nothing can be stored (events stay in a spool) until
    rollback()."""
    with psycopg.connect(database.owner_dsn) as conn:
        conn.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
        yield conn
        conn.rollback()
