"""CALL metastore.backfill() against what runs beside it: ingest transactions naming the rows the
rebuild replaces, other sessions (of the same generation or an older one), create_partitions, stops
at every step. Each test is a race an independent review made happen; the expected state is always
the one live ingest alone gives."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from metastore import ledger, maintenance, migrations
from tests.conftest import CITUS, Database, ingest
from tests.support.derived import collect_notices, dangling, reference, stop_midway, whole
from tests.support.eventually import eventually
from tests.support.generated import allow_two_weeks_ahead, runs_of
from tests.support.ingesting import ingest_all


def wait_for(
    conn: psycopg.Connection[Any], query: str, until: Callable[[Any], bool], params: tuple[Any, ...] = ()
) -> Any:
    def answered() -> Any:
        row = conn.execute(query, params or None).fetchone()
        return row if until(row) else None

    return eventually(answered, timeout=60, interval=0.005, what=f"the answer wanted of {query}")


def waits_on_a_worker(cluster: Any, dbname: str) -> None:
    """Until a session of the database waits for a lock on one of the Citus workers."""
    workers = [psycopg.connect(w.dsn_for("postgres", dbname), autocommit=True) for w in cluster.workers]
    try:

        def waiting(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            return bool(row and row[0] > 0)

        eventually(
            lambda: any(waiting(conn) for conn in workers),
            timeout=60,
            interval=0.005,
            what="a session waiting for a lock on a worker",
        )
    finally:
        for conn in workers:
            conn.close()


def state(conn: psycopg.Connection[Any]) -> Any:
    return conn.execute("SELECT generation, rebuild FROM metastore.derive_state").fetchone()


class Session:
    """CALL metastore.backfill(batch_size) in a thread of its own; what it raised, if anything."""

    def __init__(self, database: Database, batch_size: int) -> None:
        self.conn = psycopg.connect(database.owner_dsn, autocommit=True)
        self.pid = self.conn.info.backend_pid
        self.notices = collect_notices(self.conn)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._call, args=(batch_size,))
        self.thread.start()

    def _call(self, batch_size: int) -> None:
        try:
            self.conn.execute("CALL metastore.backfill(%s)", (batch_size,))
        except BaseException as exc:  # reported by the test
            self.error = exc

    def join(self) -> None:
        self.thread.join(120)
        assert not self.thread.is_alive()
        self.conn.close()


def seconds_ago(i: int) -> str:
    return (datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1, seconds=-i)).strftime("%Y-%m-%dT%H:%M:%SZ")


def other_rules(owner: psycopg.Connection[Any]) -> None:
    """What a deploy of other rules does: another text of a derivation (here, one more comment)."""
    source = (ledger.db_dir() / "functions" / "041_derive_job_run.sql").read_text()
    owner.execute(source.replace("BEGIN\n", "BEGIN\n    -- other rules\n", 1))


def test_an_ingest_that_names_a_dataset_while_it_is_folded_keeps_it_a_dataset(
    database: Database, pg_server: Any
) -> None:
    """hive://m s.a is only a symlink in the events kept; an ingest transaction of the rebuild's
    generation names it directly while the rebuild's end waits for it: kind stays 'dataset'."""

    def through_symlink(i: int) -> dict[str, Any]:
        symlink = {"identifiers": [{"namespace": "hive://m", "name": "s.a", "type": "TABLE"}]}
        return {
            "eventTime": seconds_ago(i),
            "eventType": "COMPLETE",
            "run": {"runId": f"r{i}"},
            "job": {"namespace": "bench", "name": f"q{i}"},
            "inputs": [{"namespace": "trino://h", "name": "s.a", "facets": {"symlinks": symlink}}],
            "outputs": [{"namespace": "trino://h", "name": f"s.out{i % 3}"}],
        }

    def directly(time_: str, run: str) -> dict[str, Any]:
        return {
            "eventTime": time_,
            "eventType": "COMPLETE",
            "run": {"runId": run},
            "job": {"namespace": "bench", "name": f"direct-{run}"},
            "inputs": [{"namespace": "hive://m", "name": "s.a"}],
        }

    kept = [through_symlink(i) for i in range(300)]
    live = directly(seconds_ago(400), "live")
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        # In the default partition: retention drops it, so the rebuild finds s.a only as a symlink.
        assert ingest(service, directly("2024-01-01T00:00:00Z", "old"))[0] == "stored"
        for event in kept:
            assert ingest(service, event)[0] == "stored"
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("SELECT metastore.apply_retention('30 days')")
        session = Session(database, 1)
        wait_for(owner, "SELECT rebuild FROM metastore.derive_state", lambda r: r == ("deriving",))
        with psycopg.connect(database.service_dsn) as writer:
            body = json.dumps(live).encode()
            row = writer.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone()
            assert row == ("stored",)
            # It commits once the rebuild has folded and waits for the end's lock on events.
            wait_for(
                owner,
                "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted"
                " AND relation = 'metastore.events'::regclass",
                lambda r: r[0] > 0,
                (session.pid,),
            )
            writer.commit()
        session.join()
        assert session.error is None
        result = whole(owner)
        assert dangling(owner) == (0, 0, 0, 0)
    assert result == reference(pg_server, [*kept, live])


def test_old_jobs_are_deleted_without_deadlocking_an_ingest_that_names_two(database: Database) -> None:
    """The end deletes jobs no event names in the order ingest upserts them, (namespace, name), not in
    the order of their key's hash, which for a1 and b1 is the other way round."""

    def start(job: str, run: str, time_: str) -> dict[str, Any]:
        return {
            "eventTime": time_,
            "eventType": "START",
            "run": {"runId": run},
            "job": {"namespace": "dl", "name": job},
        }

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        ingest(service, start("a1", "old-a", "2024-01-01T00:00:00Z"))  # the default partition:
        ingest(service, start("b1", "old-b", "2024-01-01T00:00:01Z"))  # retention drops them
        for i in range(200):
            ingest(service, start(f"other{i}", f"r{i}", now))
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("SELECT metastore.apply_retention('30 days')")
        session = Session(database, 1)
        wait_for(owner, "SELECT rebuild FROM metastore.derive_state", lambda r: r == ("deriving",))
        with psycopg.connect(database.service_dsn) as writer:
            # One transaction naming a1, then b1, with the end of the rebuild between its statements.
            writer.execute("SELECT metastore.ingest_event(%b)", (json.dumps(start("a1", "new-a", now)).encode(),))
            wait_for(
                owner,
                "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                lambda r: r == ("Lock",),
                (session.pid,),
            )
            writer.execute("SELECT metastore.ingest_event(%b)", (json.dumps(start("b1", "new-b", now)).encode(),))
            writer.commit()
        session.join()
        assert session.error is None
        assert state(owner) == (2, "none")
        jobs = owner.execute("SELECT name FROM metastore.jobs WHERE namespace = 'dl' AND name IN ('a1', 'b1')")
        assert sorted(r[0] for r in jobs) == ["a1", "b1"]
        assert dangling(owner) == (0, 0, 0, 0)


def test_a_stopped_rebuild_keeps_the_counts_of_datasets_it_had_not_reached(database: Database) -> None:
    """A session that runs out of ranges folds only datasets the new generation has counted: u, whose
    two events are in a range another session is stuck on, keeps its old counts, during the rebuild
    and after both sessions are stopped."""
    allow_two_weeks_ahead(database.owner_dsn)
    u = {"namespace": "pg://h", "name": "u"}
    x = {
        "eventTime": "2024-03-01T00:00:00Z",
        "eventType": "START",
        "run": {"runId": "x"},
        "job": {"namespace": "j", "name": "jobU"},
        "inputs": [u],
    }
    y = {**x, "eventType": "COMPLETE", "eventTime": "2024-03-01T00:01:00Z"}
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        for event in runs_of(20, "r"):
            ingest(service, event)
        x_id = ingest(service, x)[1]
        ingest(service, y)
    assert x_id is not None and x_id % 2 == 1  # x and y share a range of 2
    counts = "SELECT input_events FROM metastore.datasets_view WHERE name = 'u'"
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        assert owner.execute(counts).fetchone() == (2,)
        with psycopg.connect(database.owner_dsn) as holder:
            # The session that claims x and y's range waits on jobU's row.
            holder.execute("SELECT FROM metastore.jobs WHERE name = 'jobU' FOR UPDATE")
            sessions = [Session(database, 2) for _ in range(2)]
            # Both wait: one on jobU, the other, done with its ranges and its fold, for the first to
            # commit before it can end the rebuild.
            wait_for(
                owner,
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY (%s) AND wait_event_type = 'Lock'",
                lambda r: r == (2,),
                ([s.pid for s in sessions],),
            )
            assert owner.execute(counts).fetchone() == (2,)
            for s in sessions:
                owner.execute("SELECT pg_cancel_backend(%s::integer)", (s.pid,))
            for s in sessions:
                s.join()
            holder.rollback()
        assert state(owner) == (2, "deriving")
        assert owner.execute(counts).fetchone() == (2,)


def test_a_session_of_an_older_generation_joins_the_newer_one(database: Database) -> None:
    """Rules change while a session derives generation 2; a CALL starts generation 3 and is stopped
    at once. The session of generation 2 adopts generation 3 rather than fold with its own."""
    allow_two_weeks_ahead(database.owner_dsn)
    ingest_all(database.service_dsn, runs_of(150, "r"))
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before = whole(owner)
        older = Session(database, 1)
        total = wait_for(owner, "SELECT count(*) FROM metastore.rebuild_ranges", lambda r: r[0] > 0)[0]
        wait_for(owner, "SELECT count(*) FROM metastore.rebuild_ranges", lambda r: r[0] < total - 10)
        other_rules(owner)
        newer = Session(database, 1)
        wait_for(owner, "SELECT generation FROM metastore.derive_state", lambda r: r[0] == 3)
        owner.execute("SELECT pg_cancel_backend(%s::integer)", (newer.pid,))
        newer.join()
        older.join()
        assert older.error is None
        if state(owner) == (3, "none"):  # the older session finished generation 3 itself
            assert whole(owner) == before
        else:  # generation 3 is left to a CALL that resumes it
            assert state(owner) in ((3, "starting"), (3, "deriving"))
            owner.execute("CALL metastore.backfill(50)")
        assert state(owner)[1] == "none"
        assert whole(owner) == before
        assert dangling(owner) == (0, 0, 0, 0)


def test_sessions_resuming_the_end_of_a_rebuild_do_not_deadlock(database: Database) -> None:
    """A rebuild stopped in 'finishing' with many datasets no event names: four sessions resume it, and
    their folds and deletes take rows in one order."""
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        event = {"eventTime": seconds_ago(0), "eventType": "START", "run": {"runId": "a"}}
        ingest(service, {**event, "job": {"namespace": "x", "name": "y"}})
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        for _ in range(3):
            # Stale datasets, then a rebuild stopped in its end.
            owner.execute(
                "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)"
                " SELECT 'ghost', 'g' || i, 'dataset', now(), now() FROM generate_series(1, 100000) i"
                " ON CONFLICT DO NOTHING"
            )
            owner.execute("UPDATE metastore.datasets SET generation = (SELECT generation FROM metastore.derive_state)")
            stopped = Session(database, 1000)
            wait_for(owner, "SELECT rebuild FROM metastore.derive_state", lambda r: r == ("finishing",))
            owner.execute("SELECT pg_cancel_backend(%s::integer)", (stopped.pid,))
            stopped.join()
            if stopped.error is None:  # it finished before the cancel came: nothing to resume
                continue
            assert state(owner)[1] == "finishing"
            maintenance.backfill(database.owner_dsn, sessions=4, batch_size=1000)
            assert state(owner)[1] == "none"
            assert owner.execute("SELECT count(*) FROM metastore.datasets WHERE namespace = 'ghost'").fetchone() == (0,)


def test_a_call_that_waited_for_a_rebuild_to_end_does_not_start_another(database: Database) -> None:
    """A session comes to a rebuild as its last session ends it: it waits for the derive_state row
    that session holds and finds 'none'. It leaves, rather than derive everything again in a third
    generation (the last of `metastore db backfill --sessions N` to arrive did)."""
    ingest_all(database.service_dsn, runs_of(20, "w"))
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        # An edge no event makes: the end deletes it, and waits while another transaction locks it.
        owner.execute(
            "INSERT INTO metastore.lineage_edges (upstream_id, downstream_id, job_sha256, job_namespace, job_name,"
            " first_seen, last_seen, generation) VALUES (-1, -2, '\\x00', 'x', 'y', now(), now(), 1)"
        )
        with psycopg.connect(database.owner_dsn) as holder:
            holder.execute("SELECT FROM metastore.lineage_edges WHERE upstream_id = -1 FOR UPDATE")
            last = Session(database, 1000)
            wait_for(owner, "SELECT rebuild FROM metastore.derive_state", lambda r: r == ("finishing",))
            waits = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s"
            wait_for(owner, waits, lambda r: r == ("Lock",), (last.pid,))
            # An ingest in flight, which the end's lock on metastore.events waits for.
            with psycopg.connect(database.service_dsn) as writer:
                assert ingest(writer, runs_of(1, "late")[0])[0] == "stored"
                holder.rollback()
                on_events = (
                    "SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted"
                    " AND relation = 'metastore.events'::regclass"
                )
                wait_for(owner, on_events, lambda r: r == (1,), (last.pid,))
                comer = Session(database, 1000)
                wait_for(owner, waits, lambda r: r == ("Lock",), (comer.pid,))
                writer.commit()
            last.join()
            comer.join()
        assert last.error is None and comer.error is None, (last.error, comer.error)
        assert state(owner) == (2, "none")
        assert dangling(owner) == (0, 0, 0, 0)


def days_ahead(events: list[dict[str, Any]], days: int) -> list[dict[str, Any]]:
    """One event in five `days` to `days` + 5 ahead: the default partition, until create_partitions
    reaches their day."""
    start = datetime.now(UTC) + timedelta(days=days)
    return [
        {**e, "eventTime": (start + timedelta(days=i % 6, minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if i % 5 == 1
        else e
        for i, e in enumerate(events)
    ]


def partitions_to_22_days_ahead(owner_dsn: str) -> None:
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute("UPDATE metastore.settings SET event_time_future = '30 days'")
        conn.execute("SELECT metastore.create_partitions(current_date - 1, 22)")


def test_a_range_read_while_create_partitions_moves_its_rows_misses_none(database: Database, pg_server: Any) -> None:
    """create_partitions moves a day's rows out of the default partition as a session joins a rebuild:
    its first range read (planned anew, not from a cached plan) waits for the move, then finds the
    rows where they went. It used to be planned without the new partition and run after the move."""
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("UPDATE metastore.settings SET event_time_future = '30 days'")
    later = (datetime.now(UTC) + timedelta(days=20)).replace(hour=12)
    events = [{**e, "eventTime": (later + timedelta(seconds=i)).isoformat()} for i, e in enumerate(runs_of(150, "m"))]
    ingest_all(database.service_dsn, events)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        assert owner.execute("SELECT count(*) FROM metastore.events_default").fetchone() == (300,)
        stop_midway(database, 1)
        assert state(owner) == (2, "deriving")
        with psycopg.connect(database.owner_dsn) as mover:
            assert mover.execute("SELECT metastore.create_partitions(current_date - 1, 22)").fetchone() != (0,)
            session = Session(database, 1)
            if CITUS:  # the read waits on a worker; the coordinator's session waits for its answer
                waits_on_a_worker(pg_server, database.name)
            else:
                wait_for(
                    owner,
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                    lambda r: r == ("Lock",),
                    (session.pid,),
                )
            mover.commit()
        session.join()
        assert session.error is None
        assert owner.execute("SELECT count(*) FROM metastore.events_default").fetchone() == (0,)
        payloads = [r[0] for r in owner.execute("SELECT payload FROM metastore.events ORDER BY id")]
        result = whole(owner)
    assert result == reference(pg_server, payloads, partitions_to_22_days_ahead)


@pytest.mark.parametrize("seed", [4, 5])
def test_sessions_writers_and_create_partitions_all_at_once(database: Database, pg_server: Any, seed: int) -> None:
    """Five sessions; two writers posting sets of events, copies of stored ones and later events of the
    same runs; create_partitions moving rows out of the default partition a day at a time meanwhile
    (a range read planned before a move and run after it missed the rows moved)."""
    rnd = random.Random(seed)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("UPDATE metastore.settings SET event_time_future = '30 days', max_batch_events = 1000")
    first = days_ahead(runs_of(400, "a"), 16)
    during = days_ahead(runs_of(300, "b"), 16) + [{**e, "eventType": "RUNNING"} for e in first[::3]]
    during += rnd.sample(first, 60)
    rnd.shuffle(during)
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        for e in first:
            ingest(service, e)
    errors: list[BaseException] = []

    def writer(events: list[dict[str, Any]]) -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                i = 0
                while i < len(events):
                    n = rnd.randint(1, 6)
                    bodies = [json.dumps(e).encode() for e in events[i : i + n]]
                    conn.execute("SELECT * FROM metastore.ingest_events(%s)", (bodies,)).fetchall()
                    i += n
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def maintain() -> None:
        try:
            with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
                for days in range(15, 23):
                    time.sleep(0.1)
                    for _ in range(50):
                        try:
                            conn.execute("SELECT metastore.create_partitions(current_date - 1, %s)", (days,))
                            break
                        except psycopg.errors.LockNotAvailable:
                            pass
                    else:
                        raise AssertionError("create_partitions never had its lock")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    half = len(during) // 2
    threads = [
        threading.Thread(target=writer, args=(during[:half],)),
        threading.Thread(target=writer, args=(during[half:] + during[:20],)),
        threading.Thread(target=maintain),
    ]
    for t in threads:
        t.start()
    maintenance.backfill(database.owner_dsn, sessions=5, batch_size=2)
    for t in threads:
        t.join(300)
    assert not errors, errors
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        assert dangling(owner) == (0, 0, 0, 0)
        assert state(owner) == (2, "none")
        payloads = [r[0] for r in owner.execute("SELECT payload FROM metastore.events ORDER BY id")]
        result = whole(owner)
    assert result == reference(pg_server, payloads, partitions_to_22_days_ahead)


def test_a_revert_during_a_rebuild_is_refused_whole(database: Database) -> None:
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("UPDATE metastore.derive_state SET rebuild = 'deriving'")
    applied = migrations.status(database.owner_dsn)["applied"]
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        migrations.revert(database.owner_dsn, 4)
    assert migrations.status(database.owner_dsn)["applied"] == applied
