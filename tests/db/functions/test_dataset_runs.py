"""metastore.dataset_runs: the latest runs that read or wrote a dataset, with their SQL."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture
from tests.support.rows import value


def runs(conn: psycopg.Connection[Any], dataset_id: int, limit: int = 20) -> list[dict[str, Any]]:
    row = conn.execute("SELECT metastore.dataset_runs(%s, %s::int)", (dataset_id, limit)).fetchone()
    assert row is not None
    assert row[0]["dataset_id"] == dataset_id
    return list(row[0]["runs"])


def dataset_id(owner: psycopg.Connection[Any], name: str) -> int:
    return int(value(owner, "SELECT id FROM metastore.datasets WHERE name = %s", (name,)))


def test_writers_and_readers_newest_first_with_sql(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for name in ("02-select-complete.json", "03-ctas-start.json", "04-ctas-complete.json"):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    select = load_fixture(FIXTURES / "trino" / "02-select-complete.json")
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    nation = runs(service, dataset_id(owner, "tpch.tiny.nation"))
    # The CTAS ended after the SELECT: newest first. Both read nation.
    assert [(r["run_id"], r["read"], r["wrote"]) for r in nation] == [
        (ctas["run"]["runId"], True, False),
        (select["run"]["runId"], True, False),
    ]
    assert nation[0]["sql"] == ctas["job"]["facets"]["sql"]["query"]
    assert nation[0]["state"] == "COMPLETE" and nation[0]["trino_user"] == "alice"
    copy = runs(service, dataset_id(owner, "memory.default.nation_copy"))
    assert [(r["run_id"], r["read"], r["wrote"]) for r in copy] == [(ctas["run"]["runId"], False, True)]
    assert len(runs(service, dataset_id(owner, "tpch.tiny.nation"), limit=1)) == 1


def test_bounded_by_limit_among_many_runs(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    for i in range(12):
        ingest(
            service,
            {
                "eventTime": f"2026-07-20T10:00:{i:02d}Z",
                "eventType": "COMPLETE",
                "run": {"runId": f"r{i}"},
                "job": {"namespace": "ns", "name": "j", "facets": {"sql": {"query": f"INSERT {i}"}}},
                "outputs": [{"namespace": "ns", "name": "t"}],
            },
        )
    latest = runs(service, dataset_id(owner, "t"), limit=5)
    assert [r["run_id"] for r in latest] == ["r11", "r10", "r9", "r8", "r7"]
    assert {r["sql"] for r in latest} == {"INSERT 11"}  # the job's latest SQL


def test_unknown_dataset_and_bad_limit(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        runs(service, 99999)
    assert caught.value.sqlstate == "P0002"
    for limit in (0, 101):
        with pytest.raises(psycopg.Error) as caught:
            runs(service, 1, limit)
        assert caught.value.sqlstate == "22023"


def test_jobs_are_found_by_key_not_by_a_scan(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    """Job names may be of any length, so no index holds them: runs are joined to their job by
    name_key. With 50k jobs, the page scans neither jobs nor runs."""
    owner.execute(
        "INSERT INTO metastore.jobs (namespace, name, first_seen, last_seen)"
        " SELECT 'seed', 'job' || i, now(), now() FROM generate_series(1, 50000) AS i"
    )
    owner.execute("ANALYZE metastore.jobs")
    for name in ("03-ctas-start.json", "04-ctas-complete.json"):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    nation = dataset_id(owner, "tpch.tiny.nation")
    with service.transaction():
        assert len(runs(service, nation)) == 1
        scans = service.execute(
            "SELECT relname, seq_scan FROM pg_stat_xact_user_tables"
            " WHERE schemaname = 'metastore' AND relname IN ('jobs', 'runs') ORDER BY 1"
        ).fetchall()
        assert scans == [("jobs", 0), ("runs", 0)]
