"""Reads from a streaming replica (METASTORE_READ_REPLICA_URL): a real hot standby of the session's
server (`pg_basebackup -R`), the service's own login role on both, as docs/operations.md sets them
up. Every read route answers from the replica as from the primary; a replica behind by more than
METASTORE_READ_REPLICA_MAX_LAG_S, or stopped, leaves the reads to the primary (fresh data, counted
in a metric) while /readyz stays ready and says so."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from devtools.localpg import LocalPostgres
from tests.conftest import SERVICE, Database, ingest
from tests.support.certs import TLSFiles
from tests.support.events import run_event
from tests.support.lineage_events import fixture_events
from tests.support.reads import read_calls
from tests.support.servers import Server, start_server
from tests.support.standby import one, set_replay, start_standby, wait_for_replay

MAX_LAG_S = 5  # the default of METASTORE_READ_REPLICA_MAX_LAG_S, set explicitly


@pytest.fixture(scope="module")
def standby(pg_server: LocalPostgres, module_db: Database) -> Iterator[LocalPostgres]:
    with psycopg_service(module_db) as conn:
        for event in fixture_events():
            ingest(conn, event)
        for n in range(3):
            ingest(conn, run_event(job=f"replica_job{n}", inputs=[f"s.in{n}"], outputs=[f"s.out{n}"]))
    replica = start_standby(pg_server)
    try:
        wait_for_replay(pg_server, replica)
        yield replica
    finally:
        replica.cleanup()


def psycopg_service(db: Database) -> Any:
    import psycopg

    return psycopg.connect(db.service_dsn, autocommit=True)


def replica_dsn(standby: LocalPostgres, db: Database) -> str:
    return standby.dsn_for(SERVICE, db.name)


@pytest.fixture(scope="module")
def primary_only(
    module_db: Database, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    srv = start_server(module_db.service_dsn, tls_files, tmp_path_factory.mktemp("primary") / "server.log")
    yield srv
    assert srv.stop() == 0, srv.log.read_text()


@pytest.fixture(scope="module")
def with_replica(
    module_db: Database, standby: LocalPostgres, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    srv = start_server(
        module_db.service_dsn,
        tls_files,
        tmp_path_factory.mktemp("replica") / "server.log",
        ready="/readyz",
        METASTORE_READ_REPLICA_URL=replica_dsn(standby, module_db),
        METASTORE_READ_REPLICA_MAX_LAG_S=str(MAX_LAG_S),
    )
    yield srv
    assert srv.stop() == 0, srv.log.read_text()


def readiness(server: Server) -> tuple[int, dict[str, Any]]:
    with server.client() as client:
        answer = client.get("/readyz")
    return answer.status_code, answer.json()


def wait_for(server: Server, reads_from: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status, body = readiness(server)
        assert status == 200, body  # never unready for the replica's sake
        if body["read_replica"]["reads_from"] == reads_from:
            return dict(body["read_replica"])
        assert time.monotonic() < deadline, f"reads still not from the {reads_from}: {body}"
        time.sleep(0.2)


def metric(server: Server, name: str, labels: str = "") -> float:
    pattern = rf"^{name}{re.escape(labels)} (\S+)$"
    found = re.search(pattern, server.metrics(), re.M)
    assert found, f"{name}{labels} not served"
    return float(found.group(1))


def read_paths(client: httpx.Client) -> list[str]:
    """Every read route of the API, with ids that reach every dataset, job and run."""
    datasets = client.get("/api/v1/datasets", params={"limit": 1000}).json()["datasets"]
    jobs = client.get("/api/v1/jobs", params={"limit": 1000}).json()["jobs"]
    runs = client.get("/api/v1/runs", params={"limit": 200}).json()["runs"]
    assert datasets and jobs and runs
    paths = [
        "/api/v1/datasets?limit=1000",
        "/api/v1/datasets?limit=3&q=out",
        "/api/v1/datasets/summary",
        "/api/v1/datasets/by-field?name=nationkey",
        "/api/v1/jobs?limit=1000",
        "/api/v1/runs?limit=200",
        "/api/v1/search?q=s",
        "/api/v1/namespaces",
    ]
    for d in datasets:
        paths += [f"/api/v1/datasets/{d['id']}", f"/api/v1/datasets/{d['id']}/lineage"]
        paths += [f"/api/v1/datasets/{d['id']}/runs", f"/api/v1/datasets/{d['id']}/fields/c0/lineage"]
    paths += [f"/api/v1/jobs/{j['id']}" for j in jobs] + [f"/api/v1/runs/{r['id']}" for r in runs]
    return paths


def test_every_read_function_and_view_answers_on_the_replica_as_the_service_role(
    module_db: Database, standby: LocalPostgres
) -> None:
    # Read-only transactions of a hot standby: a read that wrote anything would fail with 25006.
    assert one(replica_dsn(standby, module_db), "SELECT pg_is_in_recovery()") is True
    assert one(replica_dsn(standby, module_db), "SELECT current_user") == SERVICE
    on_primary = list(read_calls(module_db.service_dsn))
    on_replica = list(read_calls(replica_dsn(standby, module_db)))
    assert len(on_replica) > 25
    assert on_replica == on_primary


def test_every_read_route_answers_from_the_replica_as_from_the_primary(
    primary_only: Server, with_replica: Server, standby: LocalPostgres
) -> None:
    state = wait_for(with_replica, "replica")
    assert state["state"] == "current" and state["lag_seconds"] <= MAX_LAG_S
    fallbacks_before = sum(
        metric(with_replica, "metastore_read_replica_fallbacks_total", f'{{reason="{r}"}}')
        for r in ("lagging", "unavailable", "not_standby", "error")
    )
    with primary_only.client() as primary, with_replica.client() as replica:
        paths = read_paths(primary)
        assert len(paths) > 25
        for path in paths:
            expected, got = primary.get(path), replica.get(path)
            assert got.status_code == expected.status_code == 200, (path, got.text)
            assert got.json() == expected.json(), path
    fallbacks_after = sum(
        metric(with_replica, "metastore_read_replica_fallbacks_total", f'{{reason="{r}"}}')
        for r in ("lagging", "unavailable", "not_standby", "error")
    )
    assert fallbacks_after == fallbacks_before  # all of them answered by the replica
    assert metric(with_replica, "metastore_read_replica_usable") == 1
    assert metric(with_replica, "metastore_read_replica_lag_seconds") <= MAX_LAG_S


def dataset_names(server: Server) -> set[str]:
    with server.client() as client:
        answer = client.get("/api/v1/datasets", params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    return {d["name"] for d in answer.json()["datasets"]}


def test_a_replica_behind_the_bound_leaves_the_reads_to_the_primary(
    pg_server: LocalPostgres, module_db: Database, standby: LocalPostgres, with_replica: Server
) -> None:
    # Well within the bound before the pause, so that the first read below is surely the replica's.
    deadline = time.monotonic() + 30
    while wait_for(with_replica, "replica")["lag_seconds"] > MAX_LAG_S / 2:
        assert time.monotonic() < deadline, "the replica never came close to the primary"
        time.sleep(0.2)
    lagging_before = metric(with_replica, "metastore_read_replica_fallbacks_total", '{reason="lagging"}')
    set_replay(standby, paused=True)
    try:
        with psycopg_service(module_db) as conn:
            ingest(conn, run_event(job="while_paused", outputs=["s.written_while_paused"]))
        # Within the bound the replica answers, as it was: what the primary has it has not yet.
        assert "s.written_while_paused" not in dataset_names(with_replica)
        deadline = time.monotonic() + MAX_LAG_S + 15
        while "s.written_while_paused" not in dataset_names(with_replica):
            assert time.monotonic() < deadline, "reads never went to the primary"
            time.sleep(0.2)
        # Still paused: only the primary has it.
        assert (
            one(
                replica_dsn(standby, module_db),
                "SELECT count(*) FROM metastore.datasets_view WHERE name = 's.written_while_paused'",
            )
            == 0
        )
        state = wait_for(with_replica, "primary", timeout=5)
        assert state["state"] == "lagging" and state["lag_seconds"] > MAX_LAG_S, state
        assert metric(with_replica, "metastore_read_replica_fallbacks_total", '{reason="lagging"}') > lagging_before
        assert metric(with_replica, "metastore_read_replica_usable") == 0
        assert metric(with_replica, "metastore_read_replica_lag_seconds") > MAX_LAG_S
    finally:
        set_replay(standby, paused=False)
    wait_for(with_replica, "replica")
    assert "s.written_while_paused" in dataset_names(with_replica)


def test_a_stopped_replica_leaves_the_reads_to_the_primary_and_the_service_ready(
    pg_server: LocalPostgres, module_db: Database, standby: LocalPostgres, with_replica: Server
) -> None:
    wait_for(with_replica, "replica")
    unavailable_before = metric(with_replica, "metastore_read_replica_fallbacks_total", '{reason="unavailable"}')
    standby.stop()
    try:
        with psycopg_service(module_db) as conn:
            ingest(conn, run_event(job="while_stopped", outputs=["s.written_while_stopped"]))
        state = wait_for(with_replica, "primary")
        assert state["state"] == "unavailable", state
        # No read error once the replica is known to be down, and the primary's fresh data.
        for _ in range(20):
            assert "s.written_while_stopped" in dataset_names(with_replica)
        assert metric(with_replica, "metastore_read_replica_fallbacks_total", '{reason="unavailable"}') >= (
            unavailable_before + 20
        )
        assert metric(with_replica, "metastore_read_replica_usable") == 0
    finally:
        standby.start()
    wait_for(with_replica, "replica")
    assert "s.written_while_stopped" in dataset_names(with_replica)


def test_without_a_replica_readiness_says_nothing_of_one(primary_only: Server) -> None:
    status, body = readiness(primary_only)
    assert status == 200 and "read_replica" not in body
