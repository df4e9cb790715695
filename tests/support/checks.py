"""What several tests check the same way: an error answer's shape, a metric's value, the runs
stored for a tag, the event those runs come from, what the store kept of a job's events, an event
posted again until it is stored, and statements a role may not run."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Database
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.servers import Server


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["status"] == status and error["message"]
    assert "Traceback" not in response.text
    if code:
        assert error["code"] == code
    return dict(error)


def metric(server: Server, name: str, **labels: str) -> float:
    with server.client() as http:
        text = http.get("/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def event(tag: str, i: int) -> dict[str, Any]:
    return run_event(f"{tag}-{i}", job=f"q{i}", namespace="load", inputs=[f"s.t{i % 7}"], outputs=[f"s.o{i % 5}"])


def stored_run_ids(db: Database, tag: str) -> set[str]:
    with psycopg.connect(db.owner_dsn) as conn:
        rows = conn.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",)).fetchall()
    return {r[0] for r in rows}


def count_events(db: Database, job_name: str) -> int:
    """Events of the job stored, and bodies naming it set aside as rejected."""
    with psycopg.connect(db.owner_dsn) as owner:
        row = owner.execute(
            "SELECT (SELECT count(*) FROM metastore.events WHERE job_name = %(n)s)"
            " + (SELECT count(*) FROM metastore.rejected_events WHERE strpos(body_prefix, %(n)s) > 0)",
            {"n": job_name},
        ).fetchone()
    assert row is not None
    return int(row[0])


def post_until_stored(http: httpx.Client, body: dict[str, Any], what: str, timeout: float = 10) -> None:
    """Post body every 0.2 s until the service stores it (201)."""
    eventually(lambda: http.post("/api/v1/lineage", json=body).status_code == 201, timeout, interval=0.2, what=what)


def assert_each_refused(conn: psycopg.Connection[Any], *statements: str) -> None:
    """Each statement is refused to the connection's role for want of a privilege (42501)."""
    for statement in statements:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
