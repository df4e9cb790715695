"""Events for the lineage tests, in the database and over HTTP: every fixture, and the shapes real
producers send that the column-lineage rules must hold for (Spark's run with inputs only in its
START, an event with two outputs, facets with malformed entries), and the Trino CTAS as a new query."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from tests.conftest import FIXTURES, fixture_files, load_fixture

SOURCE = {"namespace": "bigtable://project/instance", "name": "input_table"}
TABLE = {"namespace": "gs://bucket", "name": "/data/in"}
OUTPUT = {"namespace": "gs://bucket", "name": "/data/out"}
A, B = {"namespace": "s3://w", "name": "a"}, {"namespace": "s3://w", "name": "b"}


def fixture_events() -> list[dict[str, Any]]:
    """Every fixture event, the Marquez seed template with its placeholders filled as Marquez does."""
    events: list[dict[str, Any]] = []
    for path in fixture_files():
        if path.name == "metadata.template.json":
            text = re.sub(r"\{\{(\w+)\}\}", lambda m: f"2024-01-01T00:{len(m.group(1)) % 60:02d}:00Z", path.read_text())
            data = json.loads(text)
        else:
            data = load_fixture(path)
        events += [e for e in (data if isinstance(data, list) else [data]) if isinstance(e, dict)]
    return events


def spark_run(run: str, start: str = "2026-01-01T10:00:00Z", end: str = "2026-01-01T12:30:00Z") -> list[dict[str, Any]]:
    """A run as Spark's integration sends it: START lists the inputs it read; COMPLETE lists none, and
    its output's columnLineage names them, and a source that no inputs list names (a Bigtable table
    read through a connector the integration does not list), per field and at dataset level."""
    base = {"run": {"runId": run}, "job": {"namespace": "spark", "name": "etl"}, "producer": "spark-test"}
    started = {**base, "eventType": "START", "eventTime": start, "inputs": [TABLE], "outputs": [OUTPUT]}
    lineage = {
        "fields": {
            "stringCol": {"inputFields": [{**SOURCE, "field": "stringCol", "transformations": [{"type": "DIRECT"}]}]},
            "intCol": {"inputFields": [{**TABLE, "field": "intCol"}]},
        },
        "dataset": [{**SOURCE, "field": "rowKey", "transformations": [{"type": "INDIRECT", "subtype": "FILTER"}]}],
    }
    done = {
        **base,
        "eventType": "COMPLETE",
        "eventTime": end,
        "inputs": [],
        "outputs": [{**OUTPUT, "facets": {"columnLineage": lineage}}],
    }
    return [started, done]


def two_outputs() -> dict[str, Any]:
    """One listed input, two outputs whose facets name different inputs (one of them an output)."""
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-01-01T00:00:00Z",
        "run": {"runId": "two-outputs"},
        "job": {"namespace": "j", "name": "split"},
        "inputs": [TABLE],
        "outputs": [
            {**A, "facets": {"columnLineage": {"fields": {"x": {"inputFields": [{**SOURCE, "field": "x"}]}}}}},
            {**B, "facets": {"columnLineage": {"fields": {}, "dataset": [{**OUTPUT, "field": "k"}]}}},
        ],
    }


def malformed_entries() -> dict[str, Any]:
    """Facets of entries extraction cannot read, and one it can."""
    good = {**SOURCE, "field": "ok"}
    junk: list[Any] = [
        5,
        "x",
        None,
        [SOURCE],
        {**SOURCE, "namespace": 7, "field": "a"},
        {**SOURCE, "name": "", "field": "a"},
        {**SOURCE, "namespace": "", "field": "a"},
        {"name": "t", "field": "a"},
        {**SOURCE, "name": "no-field"},
        {**SOURCE, "name": "field-not-text", "field": 3},
    ]
    lineage = {"fields": {"f": {"inputFields": [*junk, good]}, "g": 1}, "dataset": junk}
    outputs = [
        {**OUTPUT, "facets": {"columnLineage": lineage}},
        {
            "namespace": "gs://bucket",
            "name": "o2",
            "facets": {"columnLineage": {"fields": [good], "dataset": {"a": good}}},
        },
        {"namespace": "gs://bucket", "name": "o3", "facets": {"columnLineage": "lineage"}},
        {
            "namespace": "gs://bucket",
            "name": "o4",
            "facets": {"columnLineage": {"fields": {"f": {"inputFields": good}}}},
        },
    ]
    return {
        "eventType": "COMPLETE",
        "eventTime": "2026-01-01T00:00:00Z",
        "run": {"runId": "junk"},
        "job": {"namespace": "j", "name": "junk"},
        "outputs": outputs,
    }


def ctas(i: int, job: str, fields: list[dict[str, Any]] | None = None, when: str | None = None) -> dict[str, Any]:
    """The Trino CTAS COMPLETE, as a new query (run and time) each time."""
    event = copy.deepcopy(load_fixture(FIXTURES / "trino" / "04-ctas-complete.json"))
    event["eventTime"] = when or f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"
    event["run"]["runId"] = f"01900000-0000-7000-8000-{i:012d}"
    event["job"]["name"] = job
    if fields is not None:
        event["outputs"][0]["facets"]["schema"]["fields"] = fields
    return event
