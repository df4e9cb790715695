"""A real Trino 476 runs a join, a CTAS, an INSERT and a query that fails at run time; its OpenLineage
listener posts to the real service; the read API then shows the datasets, who read and who wrote
them, and the database holds a START and a COMPLETE or FAIL per query, with Trino's run ids."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import httpx
import psycopg
import pytest

from tests.conftest import Database
from tests.e2e.conftest import LineageTarget, TrinoLineage, wait_for_datasets
from tests.e2e.trino_server import TrinoServer, run_id_of
from tests.support.servers import Server

pytestmark = pytest.mark.e2e

NATION = "tpch.tiny.nation"
REGION = "tpch.tiny.region"
T = TypeVar("T")


def eventually(probe: Callable[[], T], done: Callable[[T], bool], timeout: float = 15) -> T:
    """Trino posts COMPLETE/FAIL once the query reached its final state, possibly after the client
    saw the result: poll briefly."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


@pytest.fixture
def client(metastore_service: Server) -> Iterator[httpx.Client]:
    with metastore_service.client() as c:
        yield c


def dataset_events(client: httpx.Client, lineage: TrinoLineage, name: str) -> set[tuple[str, str, str, str]]:
    """(job name, event type, direction, run id) of every event the read API lists for the dataset,
    but the start-up queries'."""
    namespace = lineage.namespace
    listed = client.get("/api/v1/datasets", params={"namespace": namespace, "q": name, "limit": 1000})
    listed.raise_for_status()
    ids = [d["id"] for d in listed.json()["datasets"] if d["name"] == name]
    if not ids:
        return set()
    detail = client.get(f"/api/v1/datasets/{ids[0]}", params={"events_limit": 1000})
    detail.raise_for_status()
    events = detail.json()["events"]
    assert {e["job_namespace"] for e in events} <= {namespace}
    return {
        (e["job_name"], e["event_type"], e["direction"], e["run_id"])
        for e in events
        if e["job_name"] not in lineage.warmup_query_ids
    }


def expected(lineage: TrinoLineage, *rows: tuple[str, str, str]) -> set[tuple[str, str, str, str]]:
    out = set()
    for label, event_type, direction in rows:
        query_id = lineage.runs[label].query_id
        out.add((query_id, event_type, direction, run_id_of(query_id)))
    return out


def test_queries_ran_as_planned(trino_lineage: TrinoLineage) -> None:
    runs = trino_lineage.runs
    assert [r.error is None for r in runs.values()] == [True, True, True, False]
    assert runs["select_fails"].error is not None
    assert "DIVISION_BY_ZERO" in runs["select_fails"].error
    assert len({r.query_id for r in runs.values()}) == len(runs)


def test_datasets_are_listed_under_trinos_namespace(
    trino_lineage: TrinoLineage, trino: TrinoServer, client: httpx.Client
) -> None:
    names = {NATION, REGION, trino_lineage.table}
    datasets = wait_for_datasets(client, trino_lineage.namespace, names)
    assert trino_lineage.namespace == f"trino://127.0.0.1:{trino.port}"
    assert {d["name"] for d in datasets} == names
    for d in datasets:
        assert d["namespace"] == trino_lineage.namespace
        assert d["scheme"] == "trino"
        assert d["authority"] == f"127.0.0.1:{trino.port}"
        assert d["kind"] == "dataset"


def test_inputs_are_read_and_the_created_table_is_written(trino_lineage: TrinoLineage, client: httpx.Client) -> None:
    want = {
        NATION: expected(
            trino_lineage,
            ("select_join", "COMPLETE", "input"),
            ("ctas", "COMPLETE", "input"),
            ("insert", "COMPLETE", "input"),
        ),
        REGION: expected(trino_lineage, ("select_join", "COMPLETE", "input"), ("ctas", "COMPLETE", "input")),
        trino_lineage.table: expected(
            trino_lineage,
            ("ctas", "COMPLETE", "output"),
            ("insert", "COMPLETE", "output"),
            # A run-time failure still names what the query read.
            ("select_fails", "FAIL", "input"),
        ),
    }
    for name, rows in want.items():
        got = eventually(partial(dataset_events, client, trino_lineage, name), rows.__eq__)
        assert got == rows, name


def test_one_start_and_one_end_event_per_query(trino_lineage: TrinoLineage, e2e_db: Database) -> None:
    """START events name no dataset, so the read API does not list them: read them as a DBA would."""

    def stored() -> dict[str, list[tuple[str, str, str]]]:
        with psycopg.connect(e2e_db.owner_dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT job_name, event_type, run_id, job_namespace FROM metastore.events"
                " WHERE job_namespace = %s ORDER BY event_time, id",
                (trino_lineage.namespace,),
            ).fetchall()
        out: dict[str, list[tuple[str, str, str]]] = {}
        for job_name, event_type, run_id, job_namespace in rows:
            if job_name not in trino_lineage.warmup_query_ids:
                out.setdefault(job_name, []).append((event_type, str(run_id), job_namespace))
        return out

    want = {
        run.query_id: [
            ("START", run_id_of(run.query_id), trino_lineage.namespace),
            ("FAIL" if run.query.fails else "COMPLETE", run_id_of(run.query_id), trino_lineage.namespace),
        ]
        for run in trino_lineage.runs.values()
    }
    assert eventually(stored, want.__eq__) == want


def test_the_failure_is_stored_with_trinos_message(trino_lineage: TrinoLineage, e2e_db: Database) -> None:
    query_id = trino_lineage.runs["select_fails"].query_id

    def payload() -> Any:
        with psycopg.connect(e2e_db.owner_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT payload FROM metastore.events WHERE job_name = %s AND event_type = 'FAIL'", (query_id,)
            ).fetchone()
        return row[0] if row else None

    event = eventually(payload, lambda p: p is not None)
    assert event is not None
    assert "Division by zero" in event["run"]["facets"]["errorMessage"]["message"]
    assert event["producer"] == "https://github.com/trinodb/trino/plugin/trino-openlineage"
    assert event["run"]["facets"]["processing_engine"]["version"] == "476"


def test_everything_was_delivered_and_accepted(
    trino_lineage: TrinoLineage, trino: TrinoServer, e2e_db: Database, e2e_lineage_target: LineageTarget
) -> None:
    assert trino.listener_failures() == []
    with psycopg.connect(e2e_db.owner_dsn, autocommit=True) as conn:
        rejected = conn.execute("SELECT sqlstate, reason FROM metastore.rejected_events").fetchall()
    assert rejected == []
    assert e2e_lineage_target.table == trino_lineage.table
    assert e2e_lineage_target.service_url.startswith("https://")
