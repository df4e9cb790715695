"""The fixtures of a real service over TLS (tls_files, module_db, server, client); the helpers
live in tests/support and are re-exported here for the tests that import them from this module.

Imported by the conftest.py of each test folder that needs a server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Database, create_database, drop_database
from tests.support import servers
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.servers import Server, free_port, wait_until_serving

__all__ = [
    "Server",
    "TLSFiles",
    "client",
    "free_port",
    "module_db",
    "server",
    "start_server",
    "tls_files",
    "wait_until_serving",
]


def start_server(database_url: str, tls: TLSFiles | None, log: Path, **kwargs: Any) -> Server:
    """tests.support.servers.start_server, on the port this module's free_port gives (tests that
    restart a service on the same port patch it); port=... says so directly."""
    kwargs.setdefault("port", free_port())
    return servers.start_server(database_url, tls, log, **kwargs)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


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
