"""metastore.list_jobs: keyset pages of jobs with their latest run."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture
from tests.support.rows import document


def page(conn: psycopg.Connection[Any], limit: int = 100, cursor: str | None = None, **filters: Any) -> dict[str, Any]:
    return document(
        conn,
        "SELECT metastore.list_jobs(%s::int, %s, %s, %s)",
        (limit, cursor, filters.get("namespace"), filters.get("q")),
    )


def job_event(namespace: str, name: str, event_type: str, when: str, run_id: str) -> dict[str, Any]:
    return {
        "eventTime": when,
        "eventType": event_type,
        "run": {"runId": run_id},
        "job": {"namespace": namespace, "name": name},
    }


def test_pages_walk_every_job_once_in_order(service: psycopg.Connection[Any]) -> None:
    names = [f"job_{i:02d}" for i in range(7)]
    for i, name in enumerate(reversed(names)):
        ingest(service, job_event("ns", name, "START", f"2026-07-20T10:00:{i:02d}Z", f"r{i}"))
    seen: list[str] = []
    cursor = None
    while True:
        result = page(service, limit=3, cursor=cursor)
        seen += [j["name"] for j in result["jobs"]]
        cursor = result["next_cursor"]
        if cursor is None:
            break
    assert seen == names


def test_latest_run_and_filters(service: psycopg.Connection[Any]) -> None:
    ingest(service, job_event("a", "Nightly_Load", "COMPLETE", "2026-07-20T10:00:00Z", "old"))
    ingest(service, job_event("a", "Nightly_Load", "START", "2026-07-21T10:00:00Z", "new"))
    ingest(service, job_event("b", "other", "FAIL", "2026-07-20T10:00:00Z", "x"))
    for name in ("03-ctas-start.json", "04-ctas-complete.json"):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    jobs = page(service, q="LOAD")["jobs"]
    assert [(j["namespace"], j["name"], j["latest_run"]["run_id"], j["latest_run"]["state"]) for j in jobs] == [
        ("a", "Nightly_Load", "new", "START")
    ]
    assert [j["name"] for j in page(service, namespace="b")["jobs"]] == ["other"]
    assert page(service, q="%")["jobs"] == []  # taken literally
    (trino,) = page(service, namespace="trino://localhost:8080")["jobs"]
    assert (trino["latest_run"]["state"], trino["latest_run"]["trino_user"], trino["job_type"]) == (
        "COMPLETE",
        "alice",
        "QUERY",
    )
    assert trino["latest_run"]["duration_s"] > 0


@pytest.mark.parametrize(("limit", "cursor"), [(0, None), (1001, None), (None, None), (10, "bm90IGpzb24"), (10, "W10")])
def test_bad_arguments_are_22023(service: psycopg.Connection[Any], limit: int | None, cursor: str | None) -> None:
    with pytest.raises(psycopg.Error) as caught:
        service.execute("SELECT metastore.list_jobs(%s::int, %s)", (limit, cursor))
    assert caught.value.sqlstate == "22023"


def sorted_page(conn: psycopg.Connection[Any], limit: int = 100, cursor: str | None = None, **f: Any) -> dict[str, Any]:
    return document(
        conn,
        "SELECT metastore.list_jobs(%s::int, %s, %s, %s, %s, %s, %s)",
        (limit, cursor, f.get("namespace"), f.get("q"), f.get("sort"), f.get("state"), f.get("user")),
    )


def every_job(conn: psycopg.Connection[Any], limit: int, **f: Any) -> list[str]:
    names: list[str] = []
    cursor = None
    while True:
        page = sorted_page(conn, limit, cursor, **f)
        assert len(page["jobs"]) <= limit
        names += [j["name"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return names


def user_run(namespace: str, name: str, event_type: str, when: str, run_id: str, user: str) -> dict[str, Any]:
    event = job_event(namespace, name, event_type, when, run_id)
    event["run"]["facets"] = {"trino_query_context": {"user": user}}
    return event


@pytest.fixture
def jobs(service: psycopg.Connection[Any]) -> None:
    """Five jobs; each one's latest run (by first eventTime) decides its place, state and user."""
    for event in (
        user_run("a", "nightly", "FAIL", "2026-07-20T01:00:00Z", "n1", "etl"),
        user_run("a", "nightly", "COMPLETE", "2026-07-21T01:00:00Z", "n2", "etl"),  # latest: COMPLETE
        user_run("a", "adhoc", "FAIL", "2026-07-21T09:00:00Z", "x1", "alice"),
        user_run("b", "report", "START", "2026-07-21T12:00:00Z", "r1", "bob"),
        user_run("b", "export", "COMPLETE", "2026-07-19T00:00:00Z", "e1", "alice"),
        user_run("b", "export", "FAIL", "2026-07-20T00:00:00Z", "e2", "bob"),  # latest: bob's FAIL
    ):
        ingest(service, event)
    ingest(service, {"eventTime": "2026-07-22T00:00:00Z", "job": {"namespace": "a", "name": "no_runs"}})


def test_sorted_by_latest_run_and_filtered_by_its_state_and_user(service: psycopg.Connection[Any], jobs: None) -> None:
    assert every_job(service, 2, sort="latest_run") == ["report", "adhoc", "nightly", "export"]
    assert every_job(service, 2, sort="name") == ["adhoc", "nightly", "no_runs", "export", "report"]
    assert every_job(service, 2) == every_job(service, 2, sort="name")
    for sort in ("name", "latest_run"):
        assert set(every_job(service, 1, sort=sort, state="fail")) == {"adhoc", "export"}
        assert set(every_job(service, 1, sort=sort, state="FAIL,START")) == {"adhoc", "export", "report"}
        assert set(every_job(service, 1, sort=sort, user="bob")) == {"report", "export"}
        assert set(every_job(service, 1, sort=sort, user="bob", state="FAIL")) == {"export"}
        assert set(every_job(service, 1, sort=sort, user="etl", namespace="a", q="NIGHT")) == {"nightly"}
        assert every_job(service, 1, sort=sort, user="etl", state="FAIL") == []  # not its latest run
    latest = sorted_page(service, 1, sort="latest_run")["jobs"][0]["latest_run"]
    assert (latest["run_id"], latest["state"], latest["first_event_time"]) == (
        "r1",
        "START",
        "2026-07-21T12:00:00+00:00",
    )


@pytest.mark.parametrize(
    ("args", "sqlstate"),
    [
        ({"sort": "newest"}, "22023"),
        ({"state": "DONE"}, "22023"),
        ({"state": ""}, "22023"),
        # A cursor of one sort given to the other.
        ({"sort": "latest_run", "cursor": "WyJhIiwgImFkaG9jIl0"}, "22023"),
        ({"sort": "name", "cursor": "WyIyMDI2LTA3LTIxIDEyOjAwOjAwKzAwIiwgMV0"}, "22023"),
    ],
)
def test_bad_sorted_arguments_are_22023(
    service: psycopg.Connection[Any], jobs: None, args: dict[str, Any], sqlstate: str
) -> None:
    cursor = args.pop("cursor", None)
    with pytest.raises(psycopg.Error) as caught:
        sorted_page(service, 10, cursor, **args)
    assert caught.value.sqlstate == sqlstate


def test_more_jobs_than_a_page_looks_at_are_walked_by_their_runs(service: psycopg.Connection[Any]) -> None:
    # Over 10 000 jobs (Trino's job per query): sort=latest_run walks the runs instead of sorting jobs.
    bodies = [
        json.dumps(
            job_event(
                "t",
                f"q{i:05d}",
                "FAIL" if i % 1000 == 1 else "COMPLETE",
                f"2026-07-20T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                f"r{i}",
            )
        ).encode()
        for i in range(10_050)
    ]
    for start in range(0, len(bodies), 500):
        service.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies[start : start + 500],))
    first = sorted_page(service, 3, sort="latest_run")
    assert [j["name"] for j in first["jobs"]] == ["q10049", "q10048", "q10047"]
    second = sorted_page(service, 3, first["next_cursor"], sort="latest_run")
    assert [j["name"] for j in second["jobs"]] == ["q10046", "q10045", "q10044"]
    failed = every_job(service, 4, sort="latest_run", state="FAIL")
    assert failed == [f"q{i:05d}" for i in reversed(range(1, 10_050, 1000))]
