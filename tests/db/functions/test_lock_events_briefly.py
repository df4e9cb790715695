"""metastore.lock_events_briefly: the SHARE lock a rebuild's cut and end take on metastore.events.
Ingest waits for it, and an ingest transaction in flight holds it off (55P03 after 20 tries of
100 ms); a VACUUM of a partition, which holds SHARE UPDATE EXCLUSIVE on it for as long as it runs
(autovacuum on the events of a restore or a bulk load does), does not."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, ingest
from tests.support.eventually import eventually


def event(i: int) -> dict[str, Any]:
    return {
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "eventType": "COMPLETE",
        "run": {"runId": f"vacuumed-{i}"},
        "job": {"namespace": "trino://h:8080", "name": f"q{i}"},
        "inputs": [{"namespace": "trino://h:8080", "name": f"cat.s.t{i}", "facets": {"pad": {"x": "y" * 400}}}],
    }


def test_a_vacuum_of_a_partition_does_not_hold_it_off(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for i in range(300):
        assert ingest(service, event(i))[0] == "stored"
    # The newest event's partition (at midnight UTC the events span two).
    row = owner.execute(
        "SELECT regexp_replace(tableoid::regclass::text, '_[0-9]+$', ''), id "
        "FROM metastore.events ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert row is not None
    partition, newest = row
    assert partition != "metastore.events"

    # A real VACUUM of the events' partition, as its owner runs one (autovacuum takes the same lock),
    # slowed to hundreds of ms per page (cost-based delay) so that it runs for many seconds.
    vacuum_error: list[BaseException] = []
    with psycopg.connect(database.owner_dsn, autocommit=True) as vacuumer:
        vacuum_pid = vacuumer.info.backend_pid

        def run_vacuum() -> None:
            try:
                vacuumer.execute("SET vacuum_cost_delay = 100")
                vacuumer.execute("SET vacuum_cost_limit = 1")
                vacuumer.execute("SET vacuum_cost_page_hit = 10000")
                vacuumer.execute("SET vacuum_cost_page_miss = 10000")
                vacuumer.execute(f"VACUUM (ANALYZE) {partition}")
            except BaseException as exc:
                vacuum_error.append(exc)

        thread = threading.Thread(target=run_vacuum)
        thread.start()
        try:

            def vacuum_holds_the_partition() -> bool:
                found = owner.execute(
                    "SELECT count(*) FROM pg_locks WHERE pid = %s AND granted AND mode = 'ShareUpdateExclusiveLock' "
                    "AND relation = %s::regclass",
                    (vacuum_pid, partition),
                ).fetchone()
                return bool(found and found[0])

            eventually(vacuum_holds_the_partition, timeout=10, interval=0.05, what="the VACUUM locking the partition")

            with psycopg.connect(database.owner_dsn) as cut:
                started = time.monotonic()
                got = cut.execute("SELECT metastore.lock_events_briefly()").fetchone()
                waited = time.monotonic() - started
                assert got == (newest,)
                # The VACUUM still runs: what the lock did not wait for was there all along.
                assert vacuum_holds_the_partition()
                # Well under the 20 tries of 100 ms it would have taken to give up.
                assert waited < 1.5, waited

                # And ingest, which locks the partitioned table before its partition, waits for it.
                service.execute("SET lock_timeout = '300ms'")
                with pytest.raises(psycopg.Error) as caught:
                    ingest(service, event(1000))
                assert caught.value.sqlstate == "55P03"
                service.execute("RESET lock_timeout")
                cut.rollback()
        finally:
            # Ended, not cancelled: a cancel that came between its statements would leave the VACUUM
            # to run at its full delay. A role may end its own sessions.
            owner.execute("SELECT pg_terminate_backend(%s::integer)", (vacuum_pid,))
            thread.join(30)
            assert not thread.is_alive()
    assert all(isinstance(e, psycopg.OperationalError) for e in vacuum_error), vacuum_error
    assert ingest(service, event(1001))[0] == "stored"


def test_an_ingest_transaction_in_flight_holds_it_off_with_55p03(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(database.service_dsn) as writer:
        assert ingest(writer, event(1))[0] == "stored"  # not committed: its lock is held
        with psycopg.connect(database.owner_dsn) as cut:
            started = time.monotonic()
            with pytest.raises(psycopg.Error) as caught:
                cut.execute("SELECT metastore.lock_events_briefly()")
            assert caught.value.sqlstate == "55P03"
            assert time.monotonic() - started >= 2.0  # 20 tries of 100 ms
        writer.commit()
    with psycopg.connect(database.owner_dsn) as cut:
        got = cut.execute("SELECT metastore.lock_events_briefly()").fetchone()
        assert got is not None and got[0] is not None


def test_create_partitions_which_moves_rows_between_partitions_waits_for_it(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    # create_partitions writes the partitions themselves (rows out of the default partition into a
    # new day's); it must not slip between a rebuild's cut and its derivation.
    day = datetime.now(UTC).date() - timedelta(days=5)
    with psycopg.connect(database.owner_dsn) as cut:
        assert cut.execute("SELECT metastore.lock_events_briefly()").fetchone() is not None
        with pytest.raises(psycopg.Error) as caught:
            owner.execute("SELECT metastore.create_partitions(%s::date, 0)", (day,))
        assert caught.value.sqlstate == "55P03"
        cut.rollback()
    row = owner.execute("SELECT metastore.create_partitions(%s::date, 0)", (day,)).fetchone()
    assert row is not None and row[0] > 0  # made once the cut is gone
