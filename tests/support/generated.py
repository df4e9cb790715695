"""Many events at once for the derivation tests: every fixture, generated queries spread over the
daily partitions, and runs (START and COMPLETE with sql, schema and column-lineage facets) that give
every derived table rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from tests.conftest import Database, fixture_files, ingest, load_fixture


def all_fixture_events() -> list[Any]:
    events: list[Any] = []
    for path in fixture_files():
        data = load_fixture(path)
        events += data if isinstance(data, list) else [data]
    return events


def event_time(i: int) -> str:
    """Spread over the daily partitions (yesterday .. two weeks ahead) and, one in seven, the default one."""
    if i % 7 == 0:
        return f"2024-01-01T00:00:{i % 60:02d}Z"
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    return (start + timedelta(minutes=(i * 7919) % (15 * 24 * 60))).strftime("%Y-%m-%dT%H:%M:%SZ")


def allow_two_weeks_ahead(owner_dsn: str) -> None:
    """generated_events reach two weeks ahead: past the default eventTime window, as a DBA may allow."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute("UPDATE metastore.settings SET event_time_future = '15 days'")


def generated_events(n: int, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "eventTime": event_time(i),
            "run": {"runId": f"{prefix}-{i}"},
            "job": {"namespace": "bench", "name": f"q{i}"},
            "inputs": [
                {
                    "namespace": "trino://h:8080",
                    "name": f"s.t{i % 17}",
                    "facets": {
                        "symlinks": {"identifiers": [{"namespace": "hive://m", "name": f"s.t{i % 5}", "type": "TABLE"}]}
                    },
                }
            ],
            "outputs": [{"namespace": "trino://h:8080", "name": f"s.out{i % 11}"}],
        }
        for i in range(n)
    ]


def runs_of(n: int, prefix: str) -> list[dict[str, Any]]:
    """START and COMPLETE of n queries, with sql facets, output schemas and column lineage: every derived
    table gets rows. Every other COMPLETE lists no inputs (as Spark's: its START did), and every third
    one's facet also names a source that no event lists."""
    events: list[dict[str, Any]] = []
    for i, event in enumerate(generated_events(n, prefix)):
        sql_facet = {"sql": {"query": f"SELECT {len(events)}", "dialect": "trino"}}
        schema = {"schema": {"fields": [{"name": "c", "type": "int"}] + ([{"name": "d"}] if len(events) % 3 else [])}}
        start = {**event, "eventType": "START", "job": {**event["job"], "facets": sql_facet}}
        done = {**event, "eventType": "COMPLETE", "job": {**event["job"], "facets": sql_facet}}
        source = {"namespace": event["inputs"][0]["namespace"], "name": event["inputs"][0]["name"], "field": "c"}
        columns: dict[str, Any] = {"fields": {"c": {"inputFields": [source]}}}
        if i % 3 == 0:
            columns["dataset"] = [{"namespace": "bigtable://p/i", "name": f"t{i % 4}", "field": "key"}]
        done["outputs"] = [{**o, "facets": {**schema, "columnLineage": columns}} for o in event["outputs"]]
        if i % 2:
            done["inputs"] = []
        events += [start, done]
    return events


def ingest_fixtures_and_generated(database: Database, service: psycopg.Connection[Any], n: int, prefix: str) -> None:
    """Every fixture and n generated events (reaching two weeks ahead, which this allows first)."""
    allow_two_weeks_ahead(database.owner_dsn)
    for event in all_fixture_events() + generated_events(n, prefix):
        ingest(service, event)
