"""A schema this release's functions were not written for (not deployed, behind, reverted under
them): every route answers 503 with /readyz's reason, never a 500, and nothing accepted is lost.
The service runs as metastore_service; the schema is changed as its owner, as the operator's
guide has a DBA do it."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from metastore import migrations
from metastore.errors import SCHEMA_MISMATCH
from tests.conftest import Database
from tests.support.events import run_event
from tests.support.servers import Server
from tests.support.service_fixtures import Serve

# Every route that calls the database, with what it is sent.
ROUTES: list[tuple[str, str, Any]] = [
    ("POST", "/api/v1/lineage", run_event(job="skew")),
    ("POST", "/api/v1/lineage/batch", [run_event(job="skew-batch")]),
    ("GET", "/api/v1/datasets", None),
    ("GET", "/api/v1/datasets/1", None),
    ("GET", "/api/v1/datasets/1/lineage", None),
    ("GET", "/api/v1/datasets/1/runs", None),
    ("GET", "/api/v1/datasets/by-field?field=id", None),
    ("GET", "/api/v1/datasets/summary", None),
    ("GET", "/api/v1/jobs", None),
    ("GET", "/api/v1/jobs/1", None),
    ("GET", "/api/v1/runs/1", None),
    ("GET", "/api/v1/events", None),
    ("GET", "/api/v1/forwarding", None),
]


def call(http: httpx.Client, method: str, path: str, body: Any) -> httpx.Response:
    return http.request(method, path, json=body) if body is not None else http.request(method, path)


def answers(server: Server) -> dict[str, httpx.Response]:
    with server.client() as http:
        return {f"{m} {p}": call(http, m, p, b) for m, p, b in ROUTES}


def assert_no_500(seen: dict[str, httpx.Response], status: str) -> None:
    """No route answers 500; those that fail answer 503 with the SQLSTATE and the readiness reason."""
    for route, response in seen.items():
        assert response.status_code != 500, (route, response.text)
        if response.status_code >= 500:
            error = response.json()["error"]
            assert response.status_code == 503, (route, response.text)
            assert error["code"] in SCHEMA_MISMATCH, (route, error)
            assert error["message"].startswith(f"{status}: "), (route, error)
            assert "metastore db deploy" in error["message"], (route, error)
            assert response.headers["Retry-After"] == "1"


@pytest.fixture
def skew_server(serve: Serve) -> Server:
    return serve()


def test_a_schema_behind_answers_503_with_the_reason_on_every_route(database: Database, serve: Serve) -> None:
    server = serve()
    try:
        with server.client() as http:
            assert http.post("/api/v1/lineage", json=run_event(job="before")).status_code == 201
        # Changes 5 to 7 reverted under this release's functions, which name their tables.
        migrations.revert(database.owner_dsn, 4)
        seen = answers(server)
        assert_no_500(seen, "schema behind")
        # Ingest and the jobs name tables of changes 6 and 7: 503 with the reason, where a 500
        # was answered before (Trino's client does not retry a 500; it does a 503).
        for route in ("POST /api/v1/lineage", "GET /api/v1/jobs"):
            assert seen[route].status_code == 503, (route, seen[route].text)
            assert "the database schema is at version 4; this release needs" in seen[route].json()["error"]["message"]
        with server.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.json()["status"] == "schema behind"
            assert ready.json()["schema_version"] == 4

        migrations.deploy(database.owner_dsn)
        with server.client() as http:
            assert http.get("/readyz").status_code == 200
            assert http.post("/api/v1/lineage", json=run_event(job="after")).status_code == 201
            assert http.get("/api/v1/jobs").status_code == 200
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]
    assert "met a schema this release does not know" in server.log.read_text()


def test_no_schema_at_all_answers_503_schema_not_deployed(database: Database, serve: Serve) -> None:
    server = serve()
    try:
        migrations.revert(database.owner_dsn, 0)
        seen = answers(server)
        assert_no_500(seen, "schema not deployed")
        assert all(r.status_code == 503 for r in seen.values()), {k: v.status_code for k, v in seen.items()}
        with server.client() as http:
            ready = http.get("/readyz")
        assert ready.status_code == 503 and ready.json()["status"] == "schema not deployed"
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]


def test_functions_of_another_release_answer_503_schema_mismatch(database: Database, serve: Serve) -> None:
    # The version is this release's, but a function it calls is not there (as after a revert
    # with a newer release's image, whose functions stay behind).
    server = serve()
    try:
        with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
            # Every overload of it, whichever the route calls (fewest arguments first: a wrapper
            # goes before what it wraps).
            for (signature,) in owner.execute(
                "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc AS p"
                " WHERE p.pronamespace = 'metastore'::regnamespace AND p.proname = 'list_jobs' ORDER BY p.pronargs"
            ).fetchall():
                owner.execute(f"DROP FUNCTION {signature}")  # type: ignore[arg-type]
        with server.client() as http:
            response = http.get("/api/v1/jobs")
            assert response.status_code == 503 and response.json()["error"]["code"] == "42883"
            message = response.json()["error"]["message"]
            assert message.startswith("schema mismatch: ") and "metastore db verify" in message
            assert http.get("/api/v1/datasets").status_code == 200  # what is there still works
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]


def test_async_events_accepted_under_a_schema_behind_are_stored_once_it_is_deployed(
    database: Database, tmp_path: Path, serve: Serve
) -> None:
    # Writers that meet an undefined table wait for the deploy: the events are not set aside as
    # unstorable (the schema is to blame, not them), and nothing accepted is lost.
    server = serve(
        METASTORE_INGEST_MODE="async",
        METASTORE_SPOOL_DIR=str(tmp_path / "spool"),
        METASTORE_DB_TIMEOUT_MS="2000",
    )
    tag = uuid.uuid4().hex[:8]
    try:
        migrations.revert(database.owner_dsn, 4)
        with server.client() as http:
            codes = [http.post("/api/v1/lineage", json=run_event(f"{tag}-{i}", job=tag)).status_code for i in range(5)]
        assert codes == [202] * 5
        time.sleep(8)  # writers fail, strike and retry for a while: longer than three strikes take
        migrations.deploy(database.owner_dsn)
        deadline = time.monotonic() + 30
        with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
            while True:
                stored = owner.execute(
                    "SELECT count(*) FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",)
                ).fetchone()
                if stored == (5,) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            rejected = owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone()
        assert stored == (5,)
        assert rejected == (0,)
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]
