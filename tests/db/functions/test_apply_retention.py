"""metastore.apply_retention: whole old days of events and links go, datasets stay; for the owner only."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, ingest
from tests.support.partitions import create, event_at, noon, partitions, utc_today
from tests.support.rows import document


def retain(owner: psycopg.Connection[Any], keep: str) -> dict[str, Any]:
    return document(owner, "SELECT metastore.apply_retention(%s::interval)", (keep,))


def dataset(owner: psycopg.Connection[Any], name: str) -> tuple[Any, ...] | None:
    return owner.execute(
        "SELECT kind, first_seen, last_seen, input_events, output_events FROM metastore.datasets_view WHERE name = %s",
        (name,),
    ).fetchone()


def test_old_days_go_newer_days_stay_and_datasets_keep_what_was_learned(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    today = utc_today()
    create(owner, today - timedelta(days=10))
    owner.execute("UPDATE metastore.settings SET event_time_future = '100 days'")  # a DBA's choice
    ids: dict[int, int] = {}
    for back in range(11):  # today - 10 .. today: one event per day, each read its own table and a shared one
        event = event_at(noon(today - timedelta(days=back)), f"s.day{back}")
        event["inputs"].append({"namespace": "trino://h:8080", "name": "s.shared"})
        status, event_id, _, message = ingest(service, event)
        assert status == "stored" and event_id is not None, message
        ids[back] = event_id
    # Strays in the default partition: one older than any partition, one far ahead.
    assert ingest(service, event_at(noon(today - timedelta(days=400)), "s.ancient"))[0] == "stored"
    status, future_id, _, _ = ingest(service, event_at(noon(today + timedelta(days=60)), "s.future"))
    assert status == "stored"
    learned = {name: dataset(owner, name) for name in ("s.shared", "s.day9", "s.ancient")}

    result = retain(owner, "5 days 6 hours")
    cutoff = datetime.fromisoformat(result["cutoff"])
    days = [today - timedelta(days=back) for back in range(11)]
    gone_days = [day for day in days if noon(day) + timedelta(hours=12) <= cutoff]
    # Days that end at or before now - 5 days 6 hours: today - 10 .. today - 7 before 18:00 UTC,
    # .. today - 6 after.
    assert len(gone_days) in (4, 5)
    assert result["partitions_dropped"] == 2 * len(gone_days)
    assert result["events_removed"] == len(gone_days) + 1  # and the ancient stray

    for table in ("events", "event_datasets"):
        names = set(partitions(owner, table))
        for back in range(11):
            day = today - timedelta(days=back)
            assert (f"{table}_p{day:%Y%m%d}" in names) == (day not in gone_days), (table, day)
        assert f"{table}_default" in names
    remaining = {r[0] for r in owner.execute("SELECT id FROM metastore.events")}
    assert remaining == {ids[back] for back, day in enumerate(days) if day not in gone_days} | {future_id}
    linked = {r[0] for r in owner.execute("SELECT DISTINCT event_id FROM metastore.event_datasets")}
    assert linked == remaining

    # Datasets stay as they were, only without the links to what was dropped.
    assert {name: dataset(owner, name) for name in learned} == learned
    detail = service.execute(
        "SELECT metastore.get_dataset(id) FROM metastore.datasets_view WHERE name = 's.day9'"
    ).fetchone()
    assert detail is not None and detail[0]["events"] == [] and detail[0]["input_events"] == 1
    shared = service.execute(
        "SELECT metastore.get_dataset(id) FROM metastore.datasets_view WHERE name = 's.shared'"
    ).fetchone()
    assert shared is not None
    assert len(shared[0]["events"]) == 11 - len(gone_days)

    # Nothing left to do: a second run drops nothing.
    again = retain(owner, "5 days 6 hours")
    assert (again["partitions_dropped"], again["events_removed"]) == (0, 0)

    # A backfill then recomputes from what remains: only the shared dataset's count changes, and
    # datasets no remaining event mentions go.
    owner.execute("CALL metastore.backfill()")
    assert dataset(owner, "s.day9") is None and dataset(owner, "s.ancient") is None
    after = dataset(owner, "s.shared")
    assert after is not None and after[3] == 11 - len(gone_days)


def test_retention_while_ingest_goes_on_loses_no_new_event(database: Database) -> None:
    today = utc_today()
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        create(conn, today - timedelta(days=30))
    with psycopg.connect(database.service_dsn, autocommit=True) as conn:
        for back in range(10, 31):
            assert ingest(conn, event_at(noon(today - timedelta(days=back)), "s.old"))[0] == "stored"

    stored: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                i = 0
                while not done.is_set() or i < 50:
                    status, event_id, code, message = ingest(
                        conn, event_at(datetime.now(UTC) - timedelta(hours=i % 30), f"s.t{i % 9}", run=f"n{i}")
                    )
                    assert status == "stored" and event_id is not None, (code, message)
                    stored.append(event_id)
                    i += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
            while len(stored) < 20 and thread.is_alive():
                threading.Event().wait(0.05)
            result = retain(owner, "7 days")
    finally:
        done.set()
        thread.join(60)
    assert not errors, errors
    assert result["partitions_dropped"] >= 2 * 21 and result["events_removed"] == 21
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        kept = {r[0] for r in owner.execute("SELECT id FROM metastore.events")}
        linked = {r[0] for r in owner.execute("SELECT DISTINCT event_id FROM metastore.event_datasets")}
    assert set(stored) <= kept and kept == linked


def test_a_long_transaction_makes_it_give_up_with_55p03_and_remove_nothing(
    database: Database, service: psycopg.Connection[Any]
) -> None:
    today = utc_today()
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        create(owner, today - timedelta(days=12))
    assert ingest(service, event_at(noon(today - timedelta(days=12)), "s.old"))[0] == "stored"
    with psycopg.connect(database.owner_dsn) as reader, psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        reader.execute("SELECT count(*) FROM metastore.events")  # an open transaction that read them
        with pytest.raises(psycopg.Error) as caught:
            retain(owner, "7 days")
        assert caught.value.sqlstate == "55P03"
        reader.rollback()
        assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (1,)
        assert retain(owner, "7 days")["events_removed"] == 1


def test_the_app_role_cannot_apply_retention(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.Error) as caught:
        service.execute("SELECT metastore.apply_retention('7 days')")
    assert caught.value.sqlstate == "42501"


@pytest.mark.parametrize("keep", [None, "0", "23 hours", "-7 days"])
def test_a_keep_under_one_day_is_refused(owner: psycopg.Connection[Any], keep: str | None) -> None:
    with pytest.raises(psycopg.Error) as caught:
        owner.execute("SELECT metastore.apply_retention(%s::interval)", (keep,))
    assert caught.value.sqlstate == "22023"


def test_old_rows_of_the_default_partition_go_and_newer_ones_stay(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    today = utc_today()
    # Days without a partition (the deploy makes them from yesterday on): both in the default one.
    old = ingest(service, event_at(noon(today - timedelta(days=20)), "s.old"))
    recent = ingest(service, event_at(noon(today - timedelta(days=3)), "s.recent"))
    assert old[0] == recent[0] == "stored"
    for event_id in (old[1], recent[1]):
        row = owner.execute(
            "SELECT regexp_replace(tableoid::regclass::text, '_[0-9]+$', '') FROM metastore.events WHERE id = %s",
            (event_id,),
        )
        assert row.fetchone() == ("metastore.events_default",)
    result = retain(owner, "7 days")
    assert (result["partitions_dropped"], result["events_removed"]) == (0, 1)
    assert {r[0] for r in owner.execute("SELECT id FROM metastore.events")} == {recent[1]}
    links = owner.execute("SELECT DISTINCT event_id FROM metastore.event_datasets_default").fetchall()
    assert links == [(recent[1],)]


def test_rejected_events_received_before_the_cutoff_go(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    assert ingest(service, {"eventTime": "2024-01-01T00:00:00Z"})[0] == "rejected"  # received now
    # Rows as an older release (or a long-running store) left them.
    for days in (8, 30, 400):
        owner.execute(
            "INSERT INTO metastore.rejected_events "
            "(body_prefix, body_bytes, body_sha256, sqlstate, reason, received_at) "
            "VALUES ('{}', 2, sha256('{}'), '22023', 'old', now() - %s * interval '1 day')",
            (days,),
        )
    result = retain(owner, "7 days")
    assert result["rejected_removed"] == 3
    assert owner.execute("SELECT sqlstate FROM metastore.rejected_events").fetchall() == [("22023",)]
    assert owner.execute("SELECT count(*) FROM metastore.rejected_events WHERE reason = 'old'").fetchone() == (0,)
    assert retain(owner, "7 days")["rejected_removed"] == 0
