"""The one builder of OpenLineage events for tests and benchmarks."""

from __future__ import annotations

import uuid
from typing import Any

Dataset = str | dict[str, Any]


def run_event(
    run_id: str | None = None,
    *,
    job: str = "q",
    namespace: str = "tests",
    inputs: list[Dataset] | None = None,
    outputs: list[Dataset] | None = None,
    dataset_namespace: str = "trino://h:8080",
    event_type: str = "COMPLETE",
    event_time: str = "2024-05-01T12:00:00Z",
    producer: str = "https://example.com/tests",
    **extra: Any,
) -> dict[str, Any]:
    """A valid RunEvent of job namespace/job (run_id: a new UUID if not given). Datasets are names in
    dataset_namespace, or whole dataset objects; extra keys are added or replace the built ones."""

    def datasets(given: list[Dataset] | None, default: str) -> list[dict[str, Any]]:
        names: list[Dataset] = [default] if given is None else given
        return [d if isinstance(d, dict) else {"namespace": dataset_namespace, "name": d} for d in names]

    event: dict[str, Any] = {
        "eventTime": event_time,
        "eventType": event_type,
        "producer": producer,
        "run": {"runId": run_id or str(uuid.uuid4())},
        "job": {"namespace": namespace, "name": job},
        "inputs": datasets(inputs, "s.t"),
        "outputs": datasets(outputs, "s.o"),
    }
    event.update(extra)
    return event


def symlinked(namespace: str, name: str, table_namespace: str, table_name: str) -> dict[str, Any]:
    """The dataset namespace/name with a symlinks facet that names it also as a TABLE (Hive's, say)."""
    return {
        "namespace": namespace,
        "name": name,
        "facets": {"symlinks": {"identifiers": [{"namespace": table_namespace, "name": table_name, "type": "TABLE"}]}},
    }
