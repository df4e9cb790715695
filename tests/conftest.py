"""Real PostgreSQL for every test: one server per session, a fresh database per test
cloned from a template that holds the deployed schema."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devtools import localpg
from devtools.citus import CitusCluster
from devtools.localpg import LocalPostgres
from metastore import migrations

ROOT = Path(__file__).resolve().parent.parent
# Copied from the platform's shared reference data (see tests/fixtures/openlineage/*/README*).
FIXTURES = Path(os.environ.get("METASTORE_FIXTURES", ROOT / "tests" / "fixtures" / "openlineage"))
if not any(FIXTURES.rglob("*.json")):
    raise RuntimeError(f"no OpenLineage fixtures under {FIXTURES}")

OWNER = "metastore_owner"
SERVICE = "metastore_service"
TEMPLATE = "metastore_template"
# The group roles of the template's installation, which every test database is a copy of.
APP_ROLE, READER_ROLE = migrations.default_group_roles(TEMPLATE)


@dataclass(frozen=True)
class Database:
    server: LocalPostgres
    name: str

    @property
    def owner_dsn(self) -> str:
        return self.server.dsn_for(OWNER, self.name)

    @property
    def service_dsn(self) -> str:
        """The application role: what the service connects as."""
        return self.server.dsn_for(SERVICE, self.name)


# `make test-citus`: the session's server is a Citus coordinator with two workers, and every
# database of the tests is distributed (docs/scale.md).
CITUS = os.environ.get("METASTORE_CITUS", "") == "1"
# tests/citus compare a Citus cluster with plain PostgreSQL: collected by `make test-citus` only.
collect_ignore = [] if CITUS else ["citus"]


def provision(server: LocalPostgres, dbname: str = TEMPLATE) -> Database:
    if isinstance(server, CitusCluster):
        server.provision(dbname, OWNER, SERVICE)
    localpg.provision(server, dbname)
    return Database(server, dbname)


def new_server() -> LocalPostgres:
    return CitusCluster() if CITUS else LocalPostgres()


@contextlib.contextmanager
def provisioned(server: LocalPostgres) -> Iterator[LocalPostgres]:
    """A started server with the template database deployed; removed when the block ends."""
    try:
        provision(server)
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[LocalPostgres]:
    with provisioned(new_server().start()) as server:
        yield server


@pytest.fixture
def own_pg() -> Iterator[Database]:
    """A PostgreSQL server of this test's own, for tests that stop, pause or restart it."""
    server = LocalPostgres().start()
    try:
        yield provision(server, "metastore")
    finally:
        server.cleanup()


def create_database(server: LocalPostgres, template: str = TEMPLATE) -> Database:
    name = f"t_{uuid.uuid4().hex[:12]}"
    if isinstance(server, CitusCluster) and template == TEMPLATE:
        # The template's shards and metadata are copied on every node alike.
        server.copy_database(template, name, OWNER)
    else:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {template} OWNER {OWNER}")
    for node in getattr(server, "nodes", [server]) if template == TEMPLATE else []:
        with psycopg.connect(node.dsn, autocommit=True) as conn:
            # A copy does not copy the database's privileges: as the deploy leaves them.
            conn.execute(f"REVOKE CONNECT ON DATABASE {name} FROM PUBLIC")
            conn.execute(f"GRANT CONNECT ON DATABASE {name} TO {APP_ROLE}, {READER_ROLE}")
    return Database(server, name)


def create_group_roles(server: LocalPostgres, dbname: str) -> tuple[str, str]:
    """What a DBA does before a database's first deploy: its group roles (default names)."""
    roles = migrations.default_group_roles(dbname)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for role in roles:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(f"CREATE ROLE {role} NOLOGIN")
    return roles


def drop_database(db: Database) -> None:
    if isinstance(db.server, CitusCluster):
        db.server.drop_database(db.name)
        return
    with psycopg.connect(db.server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {db.name} WITH (FORCE)")


def fresh_database(server: LocalPostgres) -> Iterator[Database]:
    """A new database from the template for as long as the fixture that yields from this lasts."""
    db = create_database(server)
    yield db
    drop_database(db)


@pytest.fixture
def database(pg_server: LocalPostgres) -> Iterator[Database]:
    yield from fresh_database(pg_server)


@pytest.fixture
def service(database: Database) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the application role, as the service has."""
    with psycopg.connect(database.service_dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def owner(database: Database) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the schema owner, to look at the tables the way a DBA does."""
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        yield conn


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.json"))


def load_fixture(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))


def ingest(conn: psycopg.Connection[Any], event: Any) -> tuple[str, int | None, str | None, str | None]:
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    row = conn.execute(
        "SELECT status, event_id, error_code, error_message FROM metastore.ingest_event(%b)", (body,)
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3]
