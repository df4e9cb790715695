"""metastore.list_jobs: keyset pages of jobs with their latest run."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture


def page(conn: psycopg.Connection[Any], limit: int = 100, cursor: str | None = None, **filters: Any) -> dict[str, Any]:
    row = conn.execute(
        "SELECT metastore.list_jobs(%s::int, %s, %s, %s)",
        (limit, cursor, filters.get("namespace"), filters.get("q")),
    ).fetchone()
    assert row is not None
    return dict(row[0])


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
