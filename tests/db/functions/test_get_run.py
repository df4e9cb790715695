"""metastore.get_run: one run with its datasets, SQL and facets."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture
from tests.support.rows import document, value


def get(conn: psycopg.Connection[Any], run_id: int) -> dict[str, Any]:
    return document(conn, "SELECT metastore.get_run(%s)", (run_id,))


def run_pk(owner: psycopg.Connection[Any], run_id: str) -> int:
    return int(value(owner, "SELECT id FROM metastore.runs WHERE run_id = %s", (run_id,)))


def test_ctas_run_reads_and_writes(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    for name in ("04-ctas-complete.json", "03-ctas-start.json"):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    complete = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    run = get(service, run_pk(owner, complete["run"]["runId"]))
    assert run["state"] == "COMPLETE" and run["duration_s"] > 0
    assert [e["event_type"] for e in run["events"]] == ["COMPLETE", "START"]
    assert [d["name"] for d in run["inputs"]] == ["tpch.tiny.nation"]
    assert [d["name"] for d in run["outputs"]] == ["memory.default.nation_copy"]
    assert run["sql"] == complete["job"]["facets"]["sql"]["query"]
    assert run["job"]["name"] == complete["job"]["name"]
    assert run["facets"]["trino_query_context"]["user"] == "alice"
    assert "nominalTime" in run["facets"] and "trino_query_statistics" not in run["facets"]
    assert (run["trino_user"], run["trino_source"]) == ("alice", "trino-python-client")


def test_failed_run_shows_its_error(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    fail = load_fixture(FIXTURES / "trino" / "06-ctas-analysis-fail.json")
    ingest(service, fail)
    run = get(service, run_pk(owner, fail["run"]["runId"]))
    assert run["state"] == "FAIL"
    assert run["error_message"] == fail["run"]["facets"]["errorMessage"]["message"]
    assert run["facets"]["errorMessage"]["message"] == run["error_message"]
    assert run["inputs"] == [] and run["outputs"] == []


def test_unknown_run_is_no_data_found(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        get(service, 777)
    assert caught.value.sqlstate == "P0002"
