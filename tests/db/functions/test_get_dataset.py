"""metastore.get_dataset: one dataset, its symlinks both ways, and its recent events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture
from tests.support.rows import document, value


def get(conn: psycopg.Connection[Any], dataset_id: int, events_limit: int = 50) -> dict[str, Any]:
    return document(conn, "SELECT metastore.get_dataset(%s, %s::int)", (dataset_id, events_limit))


def dataset_id(owner: psycopg.Connection[Any], name: str) -> int:
    return int(value(owner, "SELECT id FROM metastore.datasets WHERE name = %s", (name,)))


def test_detail_shows_symlinks_both_ways(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    path = FIXTURES / "openlineage" / "compatibility-tests" / "spark_dataproc_simple_producer_test" / "4.json"
    ingest(service, load_fixture(path))
    table = get(service, dataset_id(owner, "/user/hive/warehouse/t1"))
    assert [(s["namespace"], s["name"], s["type"], s["kind"]) for s in table["symlinks"]] == [
        ("hive://dataproc-producer-test-m:9083", "default.t1", "TABLE", "symlink")
    ]
    assert table["symlink_of"] == []
    alias = get(service, dataset_id(owner, "default.t1"))
    assert [s["name"] for s in alias["symlink_of"]] == ["/user/hive/warehouse/t1"]
    assert alias["kind"] == "symlink"


def test_detail_lists_recent_events_newest_first(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for name in ("03-ctas-start.json", "04-ctas-complete.json", "07-ctas-complete-trino476.json"):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    source = get(service, dataset_id(owner, "tpch.tiny.nation"))
    assert [(e["event_type"], e["direction"]) for e in source["events"]] == [("COMPLETE", "input")] * 2
    # Newest eventTime first, whatever the order they arrived in (07 is from 2025, 04 from 2026).
    complete = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    newest = source["events"][0]
    assert (newest["run_id"], newest["job_namespace"], newest["job_name"]) == (
        complete["run"]["runId"],
        complete["job"]["namespace"],
        complete["job"]["name"],
    )
    assert len(get(service, source["id"], events_limit=1)["events"]) == 1


def test_unknown_dataset_is_no_data_found(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        get(service, 123456)
    assert caught.value.sqlstate == "P0002"


def test_recent_events_come_newest_first_from_every_day_and_the_default_partition(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    # One dataset read on days far apart: ahead, today, yesterday (daily partitions), and years
    # back (the default partition), so that the look-back windows all have to be walked.
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    owner.execute("UPDATE metastore.settings SET event_time_future = '15 days'")  # a DBA's choice
    times = [today + timedelta(days=14), today, today - timedelta(days=1), today - timedelta(days=700)]
    times += [datetime(2019, 3, 4, 5, 6, 7, 1, tzinfo=UTC), datetime(2019, 3, 4, 5, 6, 7, tzinfo=UTC)]
    for i, when in enumerate(reversed(times)):
        event = {
            "eventTime": when.isoformat(),
            "run": {"runId": f"r{i}"},
            "job": {"namespace": "n", "name": f"j{i}"},
            "inputs": [{"namespace": "pg://h:5432", "name": "db.s.busy"}],
            "outputs": [{"namespace": "pg://h:5432", "name": "db.s.busy"}] if i == 0 else [],
        }
        assert ingest(service, event)[0] == "stored"
    busy = dataset_id(owner, "db.s.busy")
    events = get(service, busy)["events"]
    got = [(datetime.fromisoformat(e["event_time"]), e["direction"]) for e in events]
    # The oldest event both read and wrote it: one entry per direction.
    assert got == [(t, "input") for t in times] + [(times[-1], "output")]
    assert [datetime.fromisoformat(e["event_time"]) for e in get(service, busy, 3)["events"]] == times[:3]
    assert get(service, busy, 0)["events"] == []
