"""metastore.get_job: one job, its latest SQL and its latest runs."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture
from tests.support.events import symlinked
from tests.support.rows import document, value


def get(conn: psycopg.Connection[Any], job_id: int, runs_limit: int = 50) -> dict[str, Any]:
    return document(conn, "SELECT metastore.get_job(%s, %s::int)", (job_id, runs_limit))


def job_id(owner: psycopg.Connection[Any], name: str) -> int:
    return int(value(owner, "SELECT id FROM metastore.jobs WHERE name = %s", (name,)))


def daily_run(i: int, **datasets: list[Any]) -> dict[str, Any]:
    """The COMPLETE event of run-i (i below 10) of the job ns/daily, on 2026-07-2i."""
    return {
        "eventTime": f"2026-07-2{i}T10:00:00Z",
        "eventType": "COMPLETE",
        "run": {"runId": f"run-{i}"},
        "job": {"namespace": "ns", "name": "daily"},
        **datasets,
    }


def test_job_with_sql_and_runs_newest_first(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    for name in ("05-select-runtime-fail.json",):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    fail = load_fixture(FIXTURES / "trino" / "05-select-runtime-fail.json")
    job = get(service, job_id(owner, fail["job"]["name"]))
    assert job["latest_sql"] == fail["job"]["facets"]["sql"]["query"]
    assert [(r["run_id"], r["state"], r["error_message"], r["trino_user"]) for r in job["runs"]] == [
        (fail["run"]["runId"], "FAIL", "Division by zero", "alice")
    ]

    for i in range(5):
        ingest(service, daily_run(i))
    daily = get(service, job_id(owner, "daily"), runs_limit=3)
    assert [r["run_id"] for r in daily["runs"]] == ["run-4", "run-3", "run-2"]
    assert get(service, daily["id"], runs_limit=0)["runs"] == []


def test_unknown_job_is_no_data_found(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        get(service, 424242)
    assert caught.value.sqlstate == "P0002"


@pytest.mark.parametrize("runs_limit", [-1, 1001])
def test_bad_runs_limit_is_22023(service: psycopg.Connection[Any], runs_limit: int) -> None:
    with pytest.raises(psycopg.Error) as caught:
        get(service, 1, runs_limit)
    assert caught.value.sqlstate == "22023"


def test_inputs_and_outputs_of_its_runs_with_their_symlinks(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    table = symlinked("trino://h:8080", "hive.s.orders", "s3://b", "w/orders")
    # A job run twice: yesterday it read orders and customers, today orders only; both wrote daily.
    for i, inputs in enumerate(([table, {"namespace": "trino://h:8080", "name": "hive.s.customers"}], [table])):
        ingest(service, daily_run(i, inputs=inputs, outputs=[{"namespace": "trino://h:8080", "name": "hive.s.daily"}]))
    job = get(service, job_id(owner, "daily"))
    assert [d["name"] for d in job["inputs"]] == ["hive.s.customers", "hive.s.orders"]
    assert [d["name"] for d in job["outputs"]] == ["hive.s.daily"] and job["datasets_truncated"] is False
    orders = job["inputs"][1]
    assert [(s["namespace"], s["name"], s["type"]) for s in orders["symlinks"]] == [("s3://b", "w/orders", "TABLE")]
    assert orders["symlink_of"] == [] and orders["kind"] == "dataset"
    # Without runs (a job known from job events only): none.
    ingest(service, {"eventTime": "2026-07-20T10:00:00Z", "job": {"namespace": "ns", "name": "static"}})
    static = get(service, job_id(owner, "static"))
    assert (static["inputs"], static["outputs"], static["runs"]) == ([], [], [])


def test_a_job_lists_100_datasets_of_each_side_and_says_so(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest(
        service,
        {
            "eventTime": "2026-07-20T10:00:00Z",
            "eventType": "COMPLETE",
            "run": {"runId": "wide"},
            "job": {"namespace": "ns", "name": "wide"},
            "inputs": [{"namespace": "s3://b", "name": f"part-{i:03d}"} for i in range(120)],
        },
    )
    job = get(service, job_id(owner, "wide"))
    assert len(job["inputs"]) == 100 and job["datasets_truncated"] is True
    assert job["inputs"][0]["name"] == "part-000" and job["inputs"][-1]["name"] == "part-099"
