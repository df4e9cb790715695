"""Small lineage graphs for the graph functions' tests: COMPLETE events of a job between datasets
(with or without column-lineage facets), loaded as the service role, and the datasets' ids."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.conftest import ingest

NS = "trino://h:8080"


def run(i: int, job: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    def ds(d: Any) -> dict[str, Any]:
        return d if isinstance(d, dict) else {"namespace": NS, "name": d}

    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-02-01T00:00:{i:02d}Z",
        "run": {"runId": f"r{i}"},
        "job": {"namespace": "jobs", "name": job},
        "inputs": [ds(d) for d in inputs],
        "outputs": [ds(d) for d in outputs],
    }


def ids(owner: psycopg.Connection[Any]) -> dict[str, int]:
    return {name: i for i, name in owner.execute("SELECT id, name FROM metastore.datasets")}


def load(service: psycopg.Connection[Any], events: list[dict[str, Any]]) -> None:
    for event in events:
        assert ingest(service, event)[0] == "stored"


def ds(name: str, **facets: Any) -> dict[str, Any]:
    namespace, _, short = name.rpartition("|")
    return {"namespace": namespace or NS, "name": short, **({"facets": facets} if facets else {})}


def derive(
    i: int,
    job: str,
    inputs: list[dict[str, Any]],
    output: dict[str, Any],
    fields: dict[str, list[Any]],
    dataset_level: list[Any] | None = None,
) -> dict[str, Any]:
    """An event of `job` reading inputs and writing output, whose columnLineage facet says
    fields[out] = [(input dataset, input field, type, subtype), ...]."""

    def item(source: dict[str, Any], field: str, *transformation: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"namespace": source["namespace"], "name": source["name"], "field": field}
        if transformation:
            entry["transformations"] = [{"type": transformation[0], "subtype": transformation[1]}]
        return entry

    facet: dict[str, Any] = {
        "fields": {out: {"inputFields": [item(*x) for x in ins]} for out, ins in fields.items()},
    }
    if dataset_level is not None:
        facet["dataset"] = [item(*x) for x in dataset_level]
    output = dict(output)
    output["facets"] = {**output.get("facets", {}), "columnLineage": facet}
    return {
        "eventType": "COMPLETE",
        "eventTime": f"2026-02-01T00:00:{i:02d}Z",
        "run": {"runId": f"r{i}"},
        "job": {"namespace": "jobs", "name": job},
        "inputs": inputs,
        "outputs": [output],
    }
