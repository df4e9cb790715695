"""metastore.create_partitions: daily partitions ahead of time; strays wait in the default partition
and move into their day when it is created; safe to call concurrently and while ingest goes on."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, ingest
from tests.support.partitions import create, event_at, noon, partitions, utc_today


def where_is(owner: psycopg.Connection[Any], event_id: int) -> tuple[str, list[str]]:
    row = owner.execute(
        "SELECT regexp_replace(tableoid::regclass::text, '_[0-9]+$', '') FROM metastore.events WHERE id = %s",
        (event_id,),
    ).fetchone()
    links = owner.execute(
        "SELECT DISTINCT regexp_replace(tableoid::regclass::text, '_[0-9]+$', '') "
        "FROM metastore.event_datasets WHERE event_id = %s",
        (event_id,),
    ).fetchall()
    assert row is not None
    return row[0], [r[0] for r in links]


def test_the_deploy_made_daily_partitions_from_yesterday_to_two_weeks_ahead(owner: psycopg.Connection[Any]) -> None:
    create(owner)  # the day may have changed since the template was deployed
    today = utc_today()
    for table in ("events", "event_datasets"):
        parts = partitions(owner, table)
        assert parts.pop(f"{table}_default") is None
        for offset in range(-1, 15):
            day = today + timedelta(days=offset)
            name = f"{table}_p{day:%Y%m%d}"
            assert parts[name] == (noon(day) - timedelta(hours=12), noon(day) + timedelta(hours=12)), name
        # Each partition carries the parent's indexes (and for events the append-only trigger), and
        # no leftover CHECK constraint of its making.
        for name in parts:
            indexes = owner.execute(
                "SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass", (f"metastore.{name}",)
            ).fetchone()
            # events: pkey, de-duplication, event_time, run_id, job, and the feed's (xact_id, id).
            assert indexes == ((6,) if table == "events" else (2,)), name
            bounds = owner.execute(
                "SELECT count(*) FROM pg_constraint WHERE conrelid = %s::regclass AND conname LIKE '%%bounds'",
                (f"metastore.{name}",),
            ).fetchone()
            assert bounds == (0,)
    triggers = owner.execute(
        "SELECT count(*) FROM pg_inherits i JOIN pg_trigger t ON t.tgrelid = i.inhrelid "
        "WHERE i.inhparent = 'metastore.events'::regclass AND t.tgname = 'events_append_only' AND t.tgenabled = 'O'"
    ).fetchone()
    assert triggers == (len(partitions(owner, "events")),)
    assert create(owner) == 0  # idempotent


def test_an_event_outside_the_days_waits_in_default_and_moves_into_its_day(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    today = utc_today()
    past, future = today - timedelta(days=20), today + timedelta(days=30)
    owner.execute("UPDATE metastore.settings SET event_time_future = '31 days'")  # a DBA's choice
    old, ahead, now = event_at(noon(past), "s.old"), event_at(noon(future), "s.ahead"), event_at(noon(today), "s.now")
    ids = {}
    for key, event in (("old", old), ("ahead", ahead), ("now", now)):
        status, event_id, _, message = ingest(service, event)
        assert status == "stored", message
        assert event_id is not None
        ids[key] = event_id
    assert where_is(owner, ids["old"]) == ("metastore.events_default", ["metastore.event_datasets_default"])
    assert where_is(owner, ids["ahead"]) == ("metastore.events_default", ["metastore.event_datasets_default"])
    assert where_is(owner, ids["now"]) == (
        f"metastore.events_p{today:%Y%m%d}",
        [f"metastore.event_datasets_p{today:%Y%m%d}"],
    )
    assert ingest(service, old)[:2] == ("duplicate", ids["old"])  # found in the default partition

    created = create(owner, past, 30)
    # 19 days before yesterday and 16 days after today + 14, for both tables.
    assert created == 2 * (19 + 16)
    assert where_is(owner, ids["old"]) == (
        f"metastore.events_p{past:%Y%m%d}",
        [f"metastore.event_datasets_p{past:%Y%m%d}"],
    )
    assert where_is(owner, ids["ahead"]) == (
        f"metastore.events_p{future:%Y%m%d}",
        [f"metastore.event_datasets_p{future:%Y%m%d}"],
    )
    assert owner.execute("SELECT count(*) FROM metastore.events_default").fetchone() == (0,)
    assert owner.execute("SELECT count(*) FROM metastore.event_datasets_default").fetchone() == (0,)

    # Still one copy of each: a resent event is a duplicate of the moved row, with its id.
    assert ingest(service, old)[:2] == ("duplicate", ids["old"])
    assert ingest(service, ahead)[:2] == ("duplicate", ids["ahead"])
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (3,)
    detail = service.execute(
        "SELECT metastore.get_dataset(id) FROM metastore.datasets_view WHERE name = 's.old'"
    ).fetchone()
    assert detail is not None
    assert [e["event_id"] for e in detail[0]["events"]] == [ids["old"]]

    # The moved rows are as append-only as ever, in their partition and through the parent; the
    # trigger of the default partition was enabled again.
    for statement in (
        f"DELETE FROM metastore.events_p{past:%Y%m%d}",
        "UPDATE metastore.events SET event_type = 'X'",
    ):
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            owner.execute(statement)
    enabled = owner.execute(
        "SELECT tgenabled FROM pg_trigger WHERE tgrelid = 'metastore.events_default'::regclass "
        "AND tgname = 'events_append_only'"
    ).fetchone()
    assert enabled == ("O",)
    assert create(owner, past, 30) == 0


def test_concurrent_callers_create_each_partition_once_while_ingest_goes_on(database: Database) -> None:
    today = utc_today()
    p_from = today - timedelta(days=40)
    results: list[int] = []
    errors: list[BaseException] = []
    stored: list[int] = []
    start = threading.Barrier(4)
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute("UPDATE metastore.settings SET event_time_future = '21 days'")

    def maintainer() -> None:
        try:
            with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
                start.wait(10)
                results.append(create(conn, p_from, 20))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def writer() -> None:
        # Events on the days being created (waiting in the default partition until then) and on
        # existing days, stored one by one while the partitions are made.
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                start.wait(10)
                for i in range(400):
                    day = today + timedelta(days=(i % 61) - 40)
                    status, event_id, code, message = ingest(conn, event_at(noon(day), f"s.t{i % 7}", run=f"w{i}"))
                    assert status == "stored", (code, message)
                    assert event_id is not None
                    stored.append(event_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=maintainer) for _ in range(3)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    # 39 days before yesterday, 6 after today + 14: made once, by whichever caller came first.
    assert sorted(results) == [0, 0, 2 * (39 + 6)]
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (len(stored),)
        assert owner.execute("SELECT count(*) FROM metastore.events_default").fetchone() == (0,)
        assert owner.execute("SELECT count(*) FROM metastore.event_datasets_default").fetchone() == (0,)
        for table in ("events", "event_datasets"):
            parts = partitions(owner, table)
            assert len(parts) == 1 + 40 + 1 + 20  # default, p_from .. today + 20


def test_a_long_reader_makes_it_give_up_with_55p03_without_holding_ingest_up(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    today = utc_today()
    with psycopg.connect(database.owner_dsn) as reader:
        # An open transaction that read the default partition: creating a partition must wait for it.
        reader.execute("SELECT count(*) FROM metastore.events")
        latencies: list[float] = []
        done = threading.Event()

        def writer() -> None:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                i = 0
                while not done.is_set():
                    started = time.perf_counter()
                    assert ingest(conn, event_at(noon(today), "s.live", run=f"l{i}"))[0] == "stored"
                    latencies.append(time.perf_counter() - started)
                    i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            with pytest.raises(psycopg.Error) as caught:
                create(owner, today - timedelta(days=5))
            assert caught.value.sqlstate == "55P03"
        finally:
            done.set()
            thread.join(30)
        reader.rollback()
    assert latencies, "the writer stored nothing"
    # Each attempt holds ingest off for lock_timeout (100 ms) at most; a slow shared machine adds noise.
    assert max(latencies) < 1.5, max(latencies)
    assert create(owner, today - timedelta(days=5)) == 2 * 4  # nothing was left half made


@pytest.mark.parametrize(
    ("p_from", "days"),
    [(None, 14), ("2024-01-01", -1), ("2024-01-01", 367), ("2024-01-01", None), ("1990-01-01", 14)],
)
def test_bad_arguments_are_refused(owner: psycopg.Connection[Any], p_from: str | None, days: int | None) -> None:
    with pytest.raises(psycopg.Error) as caught:
        owner.execute("SELECT metastore.create_partitions(%s::date, %s::integer)", (p_from, days))
    assert caught.value.sqlstate == "22023"


def test_the_app_role_cannot_create_partitions_at_all(service: psycopg.Connection[Any]) -> None:
    """Any range was the app role's: 1502 partitions took 137 s, with every ingest at 503 meanwhile."""
    for args in ((None, None), (utc_today() - timedelta(days=1), 14), (utc_today() - timedelta(days=1500), 2)):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            service.execute("SELECT metastore.create_partitions(%s::date, %s::integer)", args)


def test_an_advisory_lock_of_the_app_role_holds_no_maintenance_up(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Maintainers took turns through an advisory lock, which any role that connects may hold for
    as long as its session lasts: the app role could hold every partition maintenance and deploy
    up (waits without a lock_timeout). Now they lock a table the app role may not lock itself; it
    takes that lock only inside metastore.ensure_partitions, for the transaction that called it."""
    service.execute("SELECT pg_advisory_lock(7262002)")  # the key they used
    for mode in ("SHARE UPDATE EXCLUSIVE", "ACCESS SHARE"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), service.transaction():
            service.execute(f"LOCK TABLE metastore_migrations.schema_version IN {mode} MODE")  # type: ignore[arg-type]
    owner.execute("SET statement_timeout = '10s'")
    made = owner.execute("SELECT metastore.create_partitions(%s::date, 20)", (utc_today(),)).fetchone()
    assert made is not None and made[0] > 0
    row = owner.execute("SELECT metastore.apply_retention('3650 days')").fetchone()
    assert row is not None and row[0]["partitions_dropped"] == 0
