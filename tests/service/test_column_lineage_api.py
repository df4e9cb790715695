"""Column lineage as GET /api/v1/datasets/{id} serves it, over TLS through the real server: the union
of the columnLineage facets' edges of the events posted, whether or not an event lists the input
datasets among its inputs. A module of its own: the test compares everything the store serves."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.lineage_rules import column_lineage, lineage_edges
from tests.support.lineage_events import (
    OUTPUT,
    SOURCE,
    fixture_events,
    malformed_entries,
    spark_run,
    two_outputs,
)


def every_dataset(client: httpx.Client) -> list[dict[str, Any]]:
    datasets: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/v1/datasets", params=params)
        assert page.status_code == 200, page.text
        datasets += page.json()["datasets"]
        cursor = page.json()["next_cursor"]
        if not cursor:
            return datasets


def by_name(client: httpx.Client, namespace: str, name: str) -> dict[str, Any]:
    (match,) = [d for d in every_dataset(client) if (d["namespace"], d["name"]) == (namespace, name)]
    return match


@pytest.fixture(scope="module")
def posted(server: Any) -> list[dict[str, Any]]:
    """Every fixture event, and runs as Spark sends them (inputs in the START only, a source no
    inputs list), an event whose two outputs' facets name different inputs, and one of malformed
    entries: those the server stored."""
    events = fixture_events() + spark_run("api-1") + spark_run("api-2", "2026-01-02T08:00:00Z", "2026-01-02T09:00:00Z")
    events += [two_outputs(), malformed_entries()]
    stored = []
    with server.client() as client:
        for event in events:
            answer = client.post("/api/v1/lineage", json=event)
            assert answer.status_code in (200, 201, 400), answer.text
            if answer.status_code != 400:
                stored.append(event)
    return stored


def test_served_column_lineage_is_the_union_of_the_facets_edges(
    client: httpx.Client, posted: list[dict[str, Any]]
) -> None:
    expected: set[tuple[Any, ...]] = set()
    for event in posted:
        expected |= column_lineage(event)
    unlisted = {
        e
        for event in posted
        for e in column_lineage(event)
        if (e[3], e[4]) not in {(i["namespace"], i["name"]) for i in event.get("inputs") or []}
    }
    assert len(unlisted) >= 5 and any(e[3] == SOURCE["namespace"] for e in unlisted)
    served: set[tuple[Any, ...]] = set()
    for dataset in every_dataset(client):
        page = client.get(f"/api/v1/datasets/{dataset['id']}")
        assert page.status_code == 200, page.text
        for c in page.json()["column_lineage"]:
            served.add(
                (
                    dataset["namespace"],
                    dataset["name"],
                    c["field"],
                    c["input"]["namespace"],
                    c["input"]["name"],
                    c["input_field"],
                    c["transformation_type"],
                    c["transformation_subtype"],
                )
            )
    assert served == expected


def test_a_source_only_a_facet_names_is_listed_and_in_the_graph(
    client: httpx.Client, posted: list[dict[str, Any]]
) -> None:
    source = by_name(client, SOURCE["namespace"], SOURCE["name"])
    output = by_name(client, OUTPUT["namespace"], OUTPUT["name"])
    # Read by both Spark COMPLETEs and by the two other events: first and last seen are theirs.
    readers = [e for e in posted if (SOURCE["namespace"], SOURCE["name"], "input") in _inputs_named(e)]
    assert len(readers) == 4
    assert source["kind"] == "dataset" and source["input_events"] == 4 and source["output_events"] == 0
    times = sorted(e["eventTime"] for e in readers)
    assert (source["first_seen"][:19], source["last_seen"][:19]) == (times[0][:19], times[-1][:19])
    page = client.get(f"/api/v1/datasets/{source['id']}").json()
    assert {(e["event_id"], e["direction"]) for e in page["events"]} == {
        (i, "input") for i in _event_ids(client, readers)
    }
    assert sorted(d["name"] for d in page["downstream"]) == [OUTPUT["name"], "a"]
    graph = client.get(f"/api/v1/datasets/{output['id']}/lineage", params={"direction": "upstream", "depth": 1})
    assert graph.status_code == 200, graph.text
    nodes = {n["id"]: (n["namespace"], n["name"]) for n in graph.json()["nodes"]}
    upstream = {nodes[e["from"]] for e in graph.json()["edges"] if e["to"] == output["id"]}
    expected = {
        (u[0], u[1]) for event in posted for u in lineage_edges(event) if (u[2], u[3]) == tuple(OUTPUT.values())
    }
    assert upstream == expected and (SOURCE["namespace"], SOURCE["name"]) in upstream


def _inputs_named(event: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(e[3], e[4], "input") for e in column_lineage(event)} | {
        (i["namespace"], i["name"], "input") for i in event.get("inputs") or []
    }


def _event_ids(client: httpx.Client, events: list[dict[str, Any]]) -> set[int]:
    """The ids the store gave these events (posting one again answers its id as a duplicate)."""
    ids = set()
    for event in events:
        answer = client.post("/api/v1/lineage", json=event)
        assert answer.status_code == 200 and answer.json()["status"] == "duplicate", answer.text
        ids.add(int(answer.json()["event_id"]))
    return ids
