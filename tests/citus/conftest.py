"""Fixtures of the Citus tests (`make test-citus`): the session's server is a Citus coordinator
with two workers (tests/conftest.py), and beside it a plain PostgreSQL of the same version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devtools.citus import CitusCluster
from devtools.localpg import LocalPostgres
from tests.conftest import Database, create_database, drop_database, provisioned
from tests.support.service_fixtures import serve, tls_files  # noqa: F401 (fixtures of the HTTP tests)


@pytest.fixture(scope="session")
def cluster(pg_server: Any) -> CitusCluster:
    assert isinstance(pg_server, CitusCluster), "tests/citus run with METASTORE_CITUS=1 (make test-citus)"
    return pg_server


@pytest.fixture(scope="session")
def plain_server(cluster: CitusCluster) -> Iterator[LocalPostgres]:
    """PostgreSQL 15 without Citus: the same binaries, nothing preloaded."""
    with provisioned(LocalPostgres(bin_path=cluster.bin).start()) as server:
        yield server


@pytest.fixture
def plain_db(plain_server: LocalPostgres) -> Iterator[Database]:
    db = create_database(plain_server)
    yield db
    drop_database(db)
