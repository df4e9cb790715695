"""End to end with a real Trino (issue #5): Trino 476 from Maven Central, its OpenLineage event listener
posting over HTTPS to the real service, which stores into a fresh database.

These tests are marked `e2e` and left out of a plain `pytest` run (they download ~1 GB once and take
minutes): run them with `pytest -m e2e tests/e2e`, or by naming a path under tests/e2e.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from devtools.localpg import LocalPostgres
from tests.conftest import Database, fresh_database
from tests.e2e.trino_server import E2ESetupError, QueryRun, TrinoServer, fetch_trino, find_java, query_set, run_queries
from tests.e2e.trino_server import start_trino as _start_trino
from tests.support import service_fixtures
from tests.support.certs import TLSFiles
from tests.support.servers import Server, start_server

E2E_DIR = Path(__file__).resolve().parent
# The session's test CA and certificate: the service serves with them, Trino trusts the CA.
tls_files = service_fixtures.tls_files


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end to end with a real Trino server (run with `-m e2e`)")


def _asked_for_e2e(config: pytest.Config) -> bool:
    if "e2e" in (config.option.markexpr or ""):
        return True
    # Naming a path under tests/e2e on the command line asks for them too.
    for arg in config.args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path == E2E_DIR or E2E_DIR in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    e2e = [item for item in items if E2E_DIR in Path(str(item.path)).parents]
    for item in e2e:
        item.add_marker(pytest.mark.e2e)
    if e2e and not _asked_for_e2e(config):
        config.hook.pytest_deselected(items=e2e)
        chosen = set(map(id, e2e))
        items[:] = [item for item in items if id(item) not in chosen]


def _set_up(step: Callable[[], Path]) -> Path:
    """What the setup step gives, or the test fails saying what is missing (without a traceback)."""
    try:
        return step()
    except E2ESetupError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def java_home() -> Path:
    return _set_up(find_java)


@pytest.fixture(scope="session")
def trino_home() -> Path:
    return _set_up(fetch_trino)


@pytest.fixture(scope="session")
def e2e_db(pg_server: LocalPostgres) -> Iterator[Database]:
    yield from fresh_database(pg_server)


@pytest.fixture(scope="session")
def metastore_service(
    e2e_db: Database, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The real service over TLS, in sync mode, on a fresh database."""
    srv = start_server(e2e_db.service_dsn, tls_files, tmp_path_factory.mktemp("e2e-service") / "server.log")
    try:
        yield srv
    finally:
        srv.stop()


def listener_url(service: Server) -> str:
    """Where Trino posts: our service over HTTPS by address (the test certificate names 127.0.0.1)."""
    return service.url.replace("://localhost:", "://127.0.0.1:")


@pytest.fixture(scope="session")
def trino(
    java_home: Path,
    trino_home: Path,
    metastore_service: Server,
    tls_files: TLSFiles,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[TrinoServer]:
    """A single-node Trino whose listener posts to `metastore_service`; always killed at the end."""
    base = tmp_path_factory.mktemp("trino")
    try:
        server = _start_trino(java_home, trino_home, listener_url(metastore_service), tls_files.ca, base=base)
    except E2ESetupError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class TrinoLineage:
    """The query set run once against the session's Trino, with what the service holds afterwards."""

    table: str  # memory.default.<t>, as Trino names the dataset
    runs: dict[str, QueryRun]  # by Query.label
    namespace: str
    warmup_query_ids: frozenset[str]  # start-up queries that read tpch.tiny.region: not part of the set


@pytest.fixture(scope="session")
def trino_lineage(trino: TrinoServer, metastore_service: Server) -> TrinoLineage:
    table = f"memory.default.e2e_{uuid.uuid4().hex[:8]}"
    with trino.connect() as conn:
        runs = {run.query.label: run for run in run_queries(conn, query_set(table))}
    return TrinoLineage(table, runs, trino.namespace, frozenset(trino.warmup_query_ids))


@dataclass(frozen=True)
class LineageTarget:
    """For a browser test of Cockpit: where the service is and which dataset Trino created."""

    service_url: str
    ca: Path
    namespace: str
    table: str


@pytest.fixture(scope="session")
def e2e_lineage_target(trino_lineage: TrinoLineage, metastore_service: Server) -> LineageTarget:
    """Hook for a browser test: the service URL (HTTPS, trust `ca`) and the table the CTAS created,
    once its COMPLETE event is stored."""
    with metastore_service.client() as client:
        wait_for_datasets(client, trino_lineage.namespace, {trino_lineage.table})
    return LineageTarget(metastore_service.url, metastore_service.ca, trino_lineage.namespace, trino_lineage.table)


def wait_for_datasets(client: httpx.Client, namespace: str, names: set[str], timeout: float = 15) -> list[Any]:
    """The datasets of namespace, once every name is among them."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get("/api/v1/datasets", params={"namespace": namespace, "limit": 1000})
        response.raise_for_status()
        datasets: list[Any] = response.json()["datasets"]
        if names <= {d["name"] for d in datasets} or time.monotonic() > deadline:
            return datasets
        time.sleep(0.2)
