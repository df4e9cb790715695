"""GET /api/v1/jobs, /jobs/{id}, /runs/{id} and /datasets/{id}/runs through the real server over TLS."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import FIXTURES, load_fixture
from tests.support.checks import assert_error


def post(client: httpx.Client, event: dict[str, Any]) -> None:
    assert client.post("/api/v1/lineage", json=event).status_code in (200, 201)


def test_trino_query_from_job_list_to_run_and_dataset(client: httpx.Client) -> None:
    # COMPLETE before START, and a retry of the COMPLETE: the run is COMPLETE, with its duration.
    for name in ("04-ctas-complete.json", "03-ctas-start.json", "04-ctas-complete.json"):
        post(client, load_fixture(FIXTURES / "trino" / name))
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")

    page = client.get("/api/v1/jobs", params={"namespace": "trino://localhost:8080", "q": ctas["job"]["name"][-8:]})
    assert page.status_code == 200, page.text
    (job,) = page.json()["jobs"]
    assert job["latest_run"]["state"] == "COMPLETE" and job["latest_run"]["trino_user"] == "alice"

    detail = client.get(f"/api/v1/jobs/{job['id']}").json()
    assert detail["latest_sql"] == ctas["job"]["facets"]["sql"]["query"]
    (run,) = detail["runs"]
    assert run["event_count"] == 2 and run["duration_s"] > 0

    full = client.get(f"/api/v1/runs/{run['id']}").json()
    assert [d["name"] for d in full["inputs"]] == ["tpch.tiny.nation"]
    assert [d["name"] for d in full["outputs"]] == ["memory.default.nation_copy"]
    assert full["trino_source"] == "trino-python-client"

    output = full["outputs"][0]["id"]
    runs = client.get(f"/api/v1/datasets/{output}/runs", params={"limit": 5}).json()
    assert [(r["id"], r["wrote"], r["sql"]) for r in runs["runs"]] == [(run["id"], True, detail["latest_sql"])]


def test_job_pages_and_failures(client: httpx.Client) -> None:
    tag = uuid.uuid4().hex[:8]
    for i in range(5):
        post(
            client,
            {
                "eventTime": f"2024-05-01T12:00:0{i}Z",
                "eventType": "FAIL",
                "run": {"runId": f"r-{tag}-{i}", "facets": {"errorMessage": {"message": f"boom {i}"}}},
                "job": {"namespace": f"ns-{tag}", "name": f"job-{i}"},
            },
        )
    names: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"namespace": f"ns-{tag}", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        body = client.get("/api/v1/jobs", params=params).json()
        names += [j["name"] for j in body["jobs"]]
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert names == [f"job-{i}" for i in range(5)]
    job = client.get("/api/v1/jobs", params={"namespace": f"ns-{tag}", "q": "JOB-3"}).json()["jobs"][0]
    runs = client.get(f"/api/v1/jobs/{job['id']}").json()["runs"]
    assert [(r["state"], r["error_message"]) for r in runs] == [("FAIL", "boom 3")]


@pytest.mark.parametrize(
    ("path", "params", "status", "code"),
    [
        ("/api/v1/jobs", {"limit": "0"}, 400, "22023"),
        ("/api/v1/jobs", {"cursor": "garbage"}, 400, "22023"),
        ("/api/v1/jobs", {"limit": "x"}, 400, None),
        ("/api/v1/jobs", {"q": ["a", "b"]}, 400, None),
        ("/api/v1/jobs/1", {"runs_limit": "-1"}, 400, "22023"),
        ("/api/v1/jobs/999999999", {}, 404, "P0002"),
        ("/api/v1/runs/999999999", {}, 404, "P0002"),
        ("/api/v1/datasets/999999999/runs", {}, 404, "P0002"),
        ("/api/v1/datasets/1/runs", {"limit": "101"}, 400, "22023"),
    ],
)
def test_errors(client: httpx.Client, path: str, params: dict[str, Any], status: int, code: str | None) -> None:
    assert_error(client.get(path, params=params), status, code)


def test_openapi_documents_the_routes(client: httpx.Client) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    for path in ("/api/v1/jobs", "/api/v1/jobs/{id}", "/api/v1/runs/{id}", "/api/v1/datasets/{id}/runs"):
        assert "get" in paths[path]
