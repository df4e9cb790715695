"""GET /api/v1/datasets/{id}/lineage and the dataset page's lineage keys, over TLS through the real server."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.conftest import FIXTURES, load_fixture
from tests.support.checks import assert_error


def dataset_id(client: httpx.Client, namespace: str, name: str) -> int:
    page = client.get("/api/v1/datasets", params={"namespace": namespace, "q": name}).json()
    (match,) = [d for d in page["datasets"] if d["name"] == name]
    return int(match["id"])


@pytest.fixture
def chain(client: httpx.Client) -> tuple[str, dict[str, int]]:
    """a -> b -> c through two jobs, in a namespace of its own; the CTAS fixture writes into c's namespace too."""
    ns = f"trino://lineage-{uuid.uuid4().hex[:8]}:8080"
    for i, (src, dst) in enumerate((("a", "b"), ("b", "c"))):
        event = {
            "eventTime": f"2024-05-01T12:00:0{i}Z",
            "eventType": "COMPLETE",
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": "tests", "name": f"{ns}-{i}"},
            "inputs": [{"namespace": ns, "name": src}],
            "outputs": [{"namespace": ns, "name": dst}],
        }
        assert client.post("/api/v1/lineage", json=event).status_code == 201
    return ns, {n: dataset_id(client, ns, n) for n in "abc"}


def test_lineage_walks_both_ways(client: httpx.Client, chain: tuple[str, dict[str, int]]) -> None:
    _, ids = chain
    graph = client.get(f"/api/v1/datasets/{ids['b']}/lineage").json()
    assert {n["name"]: n["side"] for n in graph["nodes"]} == {"a": "upstream", "b": "self", "c": "downstream"}
    assert {(e["from"], e["to"]) for e in graph["edges"]} == {(ids["a"], ids["b"]), (ids["b"], ids["c"])}
    assert graph["truncated"] is False
    down = client.get(f"/api/v1/datasets/{ids['a']}/lineage", params={"direction": "downstream", "depth": 1})
    assert [n["name"] for n in down.json()["nodes"]] == ["a", "b"]
    cut = client.get(f"/api/v1/datasets/{ids['a']}/lineage", params={"direction": "downstream", "limit": 2}).json()
    assert len(cut["nodes"]) == 2 and cut["truncated"] is True


@pytest.mark.parametrize(
    "params",
    [{"direction": "sideways"}, {"depth": "0"}, {"depth": "11"}, {"limit": "0"}, {"limit": "5000"}],
)
def test_bad_parameters_are_400(client: httpx.Client, chain: tuple[str, dict[str, int]], params: Any) -> None:
    assert_error(client.get(f"/api/v1/datasets/{chain[1]['a']}/lineage", params=params), 400, "22023")


def test_not_a_number_and_unknown_dataset(client: httpx.Client, chain: tuple[str, dict[str, int]]) -> None:
    assert_error(client.get(f"/api/v1/datasets/{chain[1]['a']}/lineage", params={"depth": "two"}), 400)
    assert_error(client.get("/api/v1/datasets/999999999/lineage"), 404, "P0002")


def test_dataset_page_has_fields_column_lineage_and_one_hop(client: httpx.Client) -> None:
    event = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    ns = f"trino://page-{uuid.uuid4().hex[:8]}:8080"
    for side in ("inputs", "outputs"):
        for dataset in event[side]:
            dataset["namespace"] = ns
    for field in event["outputs"][0]["facets"]["columnLineage"]["fields"].values():
        for item in field["inputFields"]:
            item["namespace"] = ns
    del event["outputs"][0]["facets"]["columnLineage"]["dataset"]
    assert client.post("/api/v1/lineage", json=event).status_code in (200, 201)
    page = client.get(f"/api/v1/datasets/{dataset_id(client, ns, 'memory.default.nation_copy')}").json()
    assert [f["name"] for f in page["fields"]] == ["nationkey", "name", "regionkey", "comment"]
    assert len(page["schema_versions"]) == 1
    assert sorted((c["field"], c["input_field"]) for c in page["column_lineage"]) == [
        ("comment", "comment"),
        ("name", "name"),
        ("nationkey", "nationkey"),
        ("regionkey", "regionkey"),
    ]
    assert [u["name"] for u in page["upstream"]] == ["tpch.tiny.nation"] and page["downstream"] == []
    assert "events" in page and "symlinks" in page  # the keys it had before


def test_the_route_is_documented(client: httpx.Client) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    assert "/api/v1/datasets/{id}/lineage" in spec["paths"]
    detail = spec["components"]["schemas"]["DatasetDetail"]["allOf"][1]["required"]
    assert {"fields", "schema_versions", "column_lineage", "upstream", "downstream"} <= set(detail)


def test_datasets_by_field_name(client: httpx.Client) -> None:
    ns = f"trino://fields-{uuid.uuid4().hex[:8]}:8080"
    field = f"col_{uuid.uuid4().hex[:8]}"
    event = {
        "eventTime": "2024-05-01T12:00:00Z",
        "eventType": "COMPLETE",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "tests", "name": ns},
        "outputs": [{"namespace": ns, "name": "t", "facets": {"schema": {"fields": [{"name": field}]}}}],
    }
    assert client.post("/api/v1/lineage", json=event).status_code == 201
    found = client.get("/api/v1/datasets/by-field", params={"name": field}).json()
    assert [(d["namespace"], d["name"]) for d in found["datasets"]] == [(ns, "t")]
    assert_error(client.get("/api/v1/datasets/by-field"), 400, "22023")
    assert_error(client.get("/api/v1/datasets/by-field", params={"name": field, "limit": "0"}), 400, "22023")
