"""The HTTP API over TLS, through the real server process, against a real PostgreSQL."""

from __future__ import annotations

import gzip
import json
import uuid
import zlib
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import FIXTURES, Database, load_fixture
from tests.support.checks import assert_error
from tests.support.events import run_event
from tests.support.servers import Server


def unique_event(**extra: Any) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    datasets = {"inputs": ["tpch.tiny.nation"], "outputs": ["memory.default.copy"]}
    return run_event(job=f"job-{tag}", dataset_namespace=f"trino://h-{tag}:8080", **{**datasets, **extra})


def test_post_stores_and_answers_201_then_200_for_a_resend(client: httpx.Client, module_db: Database) -> None:
    event = unique_event()
    first = client.post("/api/v1/lineage", json=event)
    assert first.status_code == 201
    assert first.json()["status"] == "stored"
    again = client.post("/api/v1/lineage", content=json.dumps(event, indent=2))
    assert again.status_code == 200
    assert again.json() == {"status": "duplicate", "event_id": first.json()["event_id"]}
    with psycopg.connect(module_db.owner_dsn) as conn:
        row = conn.execute("SELECT payload FROM metastore.events WHERE id = %s", (first.json()["event_id"],)).fetchone()
    assert row == (event,)


@pytest.mark.parametrize("path", sorted((FIXTURES / "trino").glob("*.json")), ids=lambda p: p.name)
def test_trino_events_as_trino_sends_them(path: Any, client: httpx.Client) -> None:
    body = json.dumps(load_fixture(path), separators=(",", ":")).encode()
    response = client.post(
        "/api/v1/lineage",
        content=body,
        headers={
            "Content-Type": "application/json; charset=UTF-8",
            "Accept": "application/json; charset=UTF-8",
            "Authorization": "Bearer ignored-api-key",
        },
    )
    assert response.status_code in (200, 201), response.text


def test_gzip_bodies_are_accepted(client: httpx.Client) -> None:
    event = unique_event()
    response = client.post(
        "/api/v1/lineage",
        content=gzip.compress(json.dumps(event).encode()),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text


def test_a_gzip_bomb_is_refused_with_413(client: httpx.Client) -> None:
    bomb = gzip.compress(b'{"eventTime": "' + b" " * (50 * 1024 * 1024) + b'"}')
    assert len(bomb) < 1024 * 1024
    assert_error(client.post("/api/v1/lineage", content=bomb, headers={"Content-Encoding": "gzip"}), 413, "54000")


def test_broken_gzip_and_unknown_encodings_are_refused(client: httpx.Client) -> None:
    truncated = gzip.compress(json.dumps(unique_event()).encode())[:-12]
    # 22P03 (invalid_binary_representation): the bytes are not what their encoding says.
    assert_error(client.post("/api/v1/lineage", content=truncated, headers={"Content-Encoding": "gzip"}), 400, "22P03")
    assert_error(client.post("/api/v1/lineage", content=b"xx", headers={"Content-Encoding": "gzip"}), 400, "22P03")
    assert_error(client.post("/api/v1/lineage", content=b"", headers={"Content-Encoding": "gzip"}), 400, "22P03")
    # Not a database matter: no SQLSTATE names it, so none is made up.
    assert "code" not in assert_error(
        client.post("/api/v1/lineage", content=b"{}", headers={"Content-Encoding": "br"}), 415
    )
    deflated = zlib.compress(json.dumps(unique_event()).encode())
    assert client.post("/api/v1/lineage", content=deflated, headers={"Content-Encoding": "deflate"}).status_code == 201


def test_a_body_over_the_limit_is_refused_with_413(client: httpx.Client) -> None:
    big = json.dumps(unique_event(padding="x" * (2 * 1024 * 1024))).encode()
    assert_error(client.post("/api/v1/lineage", content=big), 413, "54000")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "22P02"),
        (b'{"eventTime": "2024-01-01T00:00:00Z"}', "22023"),
        (b"\xff\xfe", "22021"),
        (json.dumps(unique_event(producer="nul\u0000")).encode(), "22P05"),
        (json.dumps(unique_event(eventTime="yesterday")).encode(), "22007"),
    ],
)
def test_bad_events_get_400_with_the_reason(body: bytes, code: str, client: httpx.Client) -> None:
    assert_error(client.post("/api/v1/lineage", content=body), 400, code)


def test_batch_endpoint(client: httpx.Client) -> None:
    good, bad = unique_event(), {"eventTime": "2024-01-01T00:00:00Z"}
    response = client.post("/api/v1/lineage/batch", json=[good, bad])
    assert response.status_code == 200
    assert response.json()["status"] == "partial_success"
    assert [f["index"] for f in response.json()["failed_events"]] == [1]
    all_bad = client.post("/api/v1/lineage/batch", json=[bad])
    assert all_bad.status_code == 400 and all_bad.json()["status"] == "failure"
    # The spec's batch response and the error shape of every 4xx, in one object.
    assert [f["index"] for f in all_bad.json()["failed_events"]] == [0]
    assert all_bad.json()["error"]["status"] == 400 and all_bad.json()["error"]["request_id"]
    assert_error(client.post("/api/v1/lineage/batch", json={"not": "an array"}), 400, "22023")


def test_datasets_api_pages_filters_and_details(client: httpx.Client) -> None:
    tag = uuid.uuid4().hex[:8]
    namespace = f"trino://api-{tag}:8080"
    inputs = [{"namespace": namespace, "name": f"cat.s.t{i:02d}"} for i in range(12)]
    inputs[0]["facets"] = {
        "symlinks": {"identifiers": [{"namespace": f"hive://{tag}", "name": "s.t00", "type": "TABLE"}]}
    }
    assert client.post("/api/v1/lineage", json=unique_event(inputs=inputs, outputs=[])).status_code == 201

    names: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"namespace": namespace, "limit": 5}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/api/v1/datasets", params=params)
        assert page.status_code == 200, (str(page.request.url), page.text)
        names += [d["name"] for d in page.json()["datasets"]]
        cursor = page.json()["next_cursor"]
        if not cursor:
            break
    assert names == [f"cat.s.t{i:02d}" for i in range(12)]

    found = client.get("/api/v1/datasets", params={"q": "S.T0", "namespace": namespace, "kind": "dataset"}).json()
    assert [d["name"] for d in found["datasets"]] == [f"cat.s.t{i:02d}" for i in range(10)]
    symlink = client.get("/api/v1/datasets", params={"scheme": "HIVE", "q": "s.t00"}).json()["datasets"]
    assert [(d["namespace"], d["kind"]) for d in symlink] == [(f"hive://{tag}", "symlink")]

    first = client.get("/api/v1/datasets", params={"namespace": namespace, "limit": 1}).json()["datasets"][0]
    detail = client.get(f"/api/v1/datasets/{first['id']}")
    assert detail.status_code == 200
    body = detail.json()
    assert body["name"] == "cat.s.t00"
    assert [s["namespace"] for s in body["symlinks"]] == [f"hive://{tag}"]
    assert [(e["direction"], e["event_type"]) for e in body["events"]] == [("input", "COMPLETE")]


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"limit": "abc"}, 400),
        ({"limit": "0"}, 400),
        ({"limit": "5000"}, 400),
        ({"kind": "table"}, 400),
        ({"cursor": "garbage"}, 400),
        ({"limit": ["1", "2"]}, 400),
    ],
)
def test_bad_query_parameters_get_400(params: dict[str, Any], status: int, client: httpx.Client) -> None:
    assert_error(client.get("/api/v1/datasets", params=params), status)


def test_unknown_dataset_is_404_and_unknown_path_is_json_404(client: httpx.Client) -> None:
    assert_error(client.get("/api/v1/datasets/999999999"), 404, "P0002")
    assert_error(client.get("/api/v1/nothing-here"), 404)
    assert_error(client.get("/api/v1/lineage"), 405)


def test_openapi_document_describes_the_routes(client: httpx.Client) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    for path in ("/api/v1/lineage", "/api/v1/lineage/batch", "/api/v1/datasets", "/api/v1/datasets/{id}"):
        assert path in spec["paths"]


def test_health_and_readiness(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


def test_plain_http_to_the_tls_port_is_not_served(server: Server) -> None:
    plain = httpx.Client(base_url=server.url.replace("https://", "http://"), timeout=5)
    with plain, pytest.raises(httpx.TransportError):
        plain.get("/healthz")
