"""The event feed on Citus (docs/events.md, "On Citus"): read in the order one sequencer assigns
after commit (metastore.feed_order), as the roles of docs/operations.md use it. A reader following
the feed while writers ingest reads every stored event exactly once; an event whose worker commit
is not yet visible waits without being passed; filters, bounds and cursors behave as on one server."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from metastore import ledger, migrations
from tests.conftest import READER_ROLE, Database, ingest
from tests.support import feed as feed_support
from tests.support.eventually import eventually
from tests.support.feed import PAGE_BYTES, event, padded, page, text_pages


def sequenced_page(
    conn: psycopg.Connection[Any], limit: int = 100, cursor: str | None = None, **filters: str
) -> tuple[list[dict[str, Any]], str | None, bool]:
    """A page as the service reads it: a sequencing pass in its own transaction, then the page."""
    conn.execute("SELECT metastore.sequence_feed()")
    return page(conn, limit, cursor, **filters)


def pending(owner: psycopg.Connection[Any]) -> int:
    row = owner.execute("SELECT count(*) FROM metastore.feed_pending").fetchone()
    assert row is not None
    return int(row[0])


def read_all(conn: psycopg.Connection[Any], limit: int = 100, **filters: str) -> list[dict[str, Any]]:
    return feed_support.read_all(conn, limit, sequenced_page, **filters)


def test_pages_filters_and_cursors_as_on_one_server(service: psycopg.Connection[Any]) -> None:
    sent = [event(i, kind="START" if i % 3 == 0 else "COMPLETE", ds=f"d{i % 4}") for i in range(23)]
    ids = [ingest(service, e)[1] for e in sent]
    got = read_all(service, limit=5)
    assert [e["id"] for e in got] == ids  # one transaction each, numbered in the order they were stored
    assert [e["event"] for e in got] == sent
    # Filters: the same events as filtering the whole feed.
    assert [e["id"] for e in read_all(service, limit=3, event_type="start")] == [
        e["id"] for e in got if e["event"]["eventType"] == "START"
    ]
    of_d1 = read_all(service, limit=2, dataset_namespace="trino://h:8080", dataset_name="cat.sch.d1")
    assert [e["id"] for e in of_d1] == [e["id"] for e in got if e["event"]["inputs"][0]["name"] == "cat.sch.d1"]
    assert read_all(service, dataset_namespace="nowhere", dataset_name="x") == []
    # A cursor resumes after its event; a cursor of the feed on one server names no place here.
    events, _, more = sequenced_page(service, 10, got[9]["cursor"])
    assert [e["id"] for e in events] == ids[10:20] and more
    for bad in ("MTox", "czotMQ==", "not a cursor"):  # "1:1" (one server's), "s:-1"
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            sequenced_page(service, 10, bad)
    # Nothing new: the same cursor back, nothing more.
    assert sequenced_page(service, 10, got[-1]["cursor"]) == ([], got[-1]["cursor"], False)


def test_an_event_not_yet_visible_waits_and_comes_after_those_numbered_before(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The state Citus's commit leaves for an instant: the coordinator's pending row committed, the
    event not yet visible on its worker. Made here by storing the event in a transaction kept open
    and its pending row in another, committed one: the sequencer leaves it pending and numbers the
    events after it; once it commits it comes next, and a reader past the others still gets it."""
    first = ingest(service, event(1))[1]
    with psycopg.connect(database.owner_dsn) as late:  # a transaction, kept open
        late.execute(
            "INSERT INTO metastore.events (id, payload, payload_sha256, event_kind, event_type, event_time, run_id,"
            " job_namespace, job_name, producer, schema_url, source_kind, source_principal) OVERRIDING SYSTEM VALUE"
            " SELECT 1000000, payload, sha256('late'), event_kind, event_type, event_time, run_id, job_namespace,"
            " job_name, producer, schema_url, source_kind, source_principal FROM metastore.events WHERE id = %s",
            (first,),
        )
        owner.execute(
            "INSERT INTO metastore.feed_pending (event_id, event_time)"
            " SELECT 1000000, event_time FROM metastore.events WHERE id = %s",
            (first,),
        )
        second = ingest(service, event(2))[1]
        events, cursor, _ = sequenced_page(service, 10)
        assert [e["id"] for e in events] == [first, second]
        assert owner.execute("SELECT event_id FROM metastore.feed_pending").fetchall() == [(1000000,)]
        late.commit()
    events, cursor, more = sequenced_page(service, 10, cursor)
    assert [e["id"] for e in events] == [1000000] and not more
    assert pending(owner) == 0


def test_pages_are_cut_at_1_mib_of_text_and_hold_at_least_one_event(service: psycopg.Connection[Any]) -> None:
    """The page bounds of one server (tests/db/functions/test_read_events.py) on Citus, where a page
    fetches its events from the workers in steps: at most 1 MiB of text unless its one event is
    larger (that one comes alone)."""
    sizes = [300_000] * 7 + [3_000_000] + [200_000] * 6 + [1_100_000, 1_000]
    ids = [ingest(service, padded(i, size))[1] for i, size in enumerate(sizes)]
    got, pages = text_pages(service, 100, sequenced=True)
    assert got == ids
    assert all(len(texts) == 1 or sum(texts) <= PAGE_BYTES for texts in pages), pages
    assert [len(p) for p in pages] == [3, 3, 1, 1, 5, 1, 1, 1], pages  # the next event would not have fitted


def test_events_stored_before_the_size_rule_come_one_per_page(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Events of 18.6 MB of text each (stored before validate_event refused such events: written
    here as the owner, through the store path) among ordinary ones, each alone on its page."""
    bomb = json.dumps(event(0)).replace('"run": {', '"run": {"stats": [' + ",".join(["1e308"] * 60_000) + "], ", 1)
    ids = []
    for i in range(3):
        (row,) = owner.execute(
            "SELECT * FROM metastore.store_events(ARRAY[%s::jsonb], ARRAY[metastore.validate_event(%s::jsonb)])",
            (bomb.replace('"run-0"', f'"bomb-{i}"'), json.dumps(event(i))),
        ).fetchall()
        ids += [row[0], ingest(service, event(100 + i))[1]]
    got, pages = text_pages(service, 5, sequenced=True)
    assert got == ids
    assert [len(p) for p in pages] == [1] * 6, pages


def test_one_sequencer_at_a_time_and_the_reader_role_may_run_it(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest(service, event(1))
    with psycopg.connect(database.owner_dsn) as other:
        assert other.execute("SELECT metastore.sequence_feed()").fetchone() == (1,)
        ingest(service, event(2))
        # The first pass has not committed: a second one waits for it up to its lock_timeout, then
        # numbers nothing.
        assert service.execute("SELECT metastore.sequence_feed()").fetchone() == (0,)
        # Nor longer than half the caller's statement_timeout: a short read budget is not spent waiting.
        with psycopg.connect(database.service_dsn, options="-c statement_timeout=100") as short:
            assert short.execute("SELECT metastore.sequence_feed()").fetchone() == (0,)
        other.commit()
    assert service.execute("SELECT metastore.sequence_feed()").fetchone() == (1,)
    assert [r[0] for r in owner.execute("SELECT seq FROM metastore.feed_order ORDER BY seq")] == [1, 2]
    with psycopg.connect(database.server.dsn, autocommit=True) as admin:  # a DBA makes login roles
        admin.execute(f"CREATE ROLE feed_reader_citus LOGIN IN ROLE {READER_ROLE}")  # type: ignore[arg-type]
    try:
        with psycopg.connect(database.server.dsn_for("feed_reader_citus", database.name), autocommit=True) as reader:
            ingest(service, event(3))
            assert reader.execute("SELECT metastore.sequence_feed()").fetchone() == (1,)
            assert len(read_all(reader)) == 3
            # The tables themselves are the owner's alone.
            for statement in ("SELECT * FROM metastore.feed_order", "DELETE FROM metastore.feed_pending"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    reader.execute(statement)  # type: ignore[arg-type]
    finally:
        with psycopg.connect(database.server.dsn, autocommit=True) as admin:
            admin.execute("DROP ROLE feed_reader_citus")
    for statement in ("SELECT * FROM metastore.feed_order", "INSERT INTO metastore.feed_pending VALUES (1, now())"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            service.execute(statement)  # type: ignore[arg-type]


def test_a_pass_that_meets_a_running_one_waits_for_it_and_numbers_what_it_could_not_see(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A page read after an event's commit holds it, even when another reader's pass, begun before
    that commit, holds the sequencer: the page's pass waits for that one and then numbers the event."""
    first = ingest(service, event(1))[1]
    got: list[list[int]] = []
    with psycopg.connect(database.owner_dsn) as other:
        assert other.execute("SELECT metastore.sequence_feed()").fetchone() == (1,)  # holds the lock
        second = ingest(service, event(2))[1]  # committed after that pass's snapshot
        reader = threading.Thread(target=lambda: got.append([e["id"] for e in sequenced_page(service, 10)[0]]))
        reader.start()
        eventually(
            lambda: owner.execute(
                "SELECT 1 FROM pg_catalog.pg_locks WHERE NOT granted AND relation = 'metastore.feed_order'::regclass"
            ).fetchone(),
            what="the page's pass waiting for the running one",
        )
        other.commit()
        reader.join(30)
    assert got == [[first, second]]
    assert pending(owner) == 0


def test_a_reader_following_the_feed_under_8_writers_sees_every_event_exactly_once(
    database: Database, owner: psycopg.Connection[Any]
) -> None:
    """As tests/db/functions/test_read_events.py on one server: 8 writers ingest as the service
    role while two readers page without pause (each running the sequencer before its pages, so
    passes meet); afterwards each reader's pages hold exactly what was stored, each event once."""
    writers, per_writer, page_size = 8, 60, 25
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                for i in range(per_writer):
                    n = w * 100_000 + i
                    # Events of many days, so that they lie on both workers; several datasets each.
                    e = event(n, ds=f"d{n % 7}", when=f"2024-03-{1 + n % 28:02d}T00:00:{i % 60:02d}.{n:06d}Z")
                    e["inputs"] += [{"namespace": "trino://h:8080", "name": f"cat.sch.extra{k}"} for k in range(n % 5)]
                    assert ingest(conn, e)[0] == "stored"
        except BaseException as exc:
            errors.append(exc)

    feeds: list[list[int]] = [[], []]

    def read_feed(feed: list[int]) -> None:
        try:
            with (
                psycopg.connect(database.service_dsn, autocommit=True) as conn,
                psycopg.connect(database.owner_dsn, autocommit=True) as watch,
            ):
                cursor = None
                while True:
                    done = stop.is_set()  # read once more after the writers stopped
                    events, cursor, more = sequenced_page(conn, page_size, cursor)
                    feed.extend(e["id"] for e in events)
                    # A reader that stops at its first short page could stop before a pass that
                    # waited out its lock_timeout numbered the last events: that is lag, not a skip.
                    if done and not more and pending(watch) == 0:
                        return
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read_feed, args=(f,)) for f in feeds]
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    started = time.monotonic()
    for t in readers + threads:
        t.start()
    for t in threads:
        t.join(600)
    read_while_writing = [len(f) for f in feeds]
    stop.set()
    for t in readers:
        t.join(120)
    assert errors == []
    stored = [r[0] for r in owner.execute("SELECT id FROM metastore.events")]
    assert len(stored) == writers * per_writer
    nodes = owner.execute(
        "SELECT count(DISTINCT nodeport) FROM run_command_on_placements('metastore.events', 'SELECT count(*) FROM %s')"
        " WHERE result::bigint > 0"
    ).fetchone()
    assert nodes == (2,), "the events lie on both workers"
    for feed in feeds:
        assert len(feed) == len(set(feed)), "the feed returned an event twice"
        assert sorted(feed) == sorted(stored), f"the feed skipped {len(set(stored) - set(feed))} events"
    assert feeds[0] == feeds[1], "both readers read the one order"
    assert min(read_while_writing) > 0, "the readers must page while the writers run"
    assert pending(owner) == 0
    print(
        f"\n{len(stored)} events by {writers} writers in {time.monotonic() - started:.1f} s on Citus; "
        f"feed: {read_while_writing} read while writing by two readers, 0 skipped, 0 repeated"
    )


def test_retention_removes_the_feed_rows_of_the_events_it_removes(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    old = [ingest(service, event(i))[1] for i in range(3)]  # March 2024
    now = datetime.now(UTC)
    recent = [ingest(service, event(10 + i, when=(now - timedelta(minutes=i)).isoformat()))[1] for i in range(3)]
    pending = ingest(service, event(20))[1]  # old, and not yet numbered when retention runs
    _, cursor, _ = sequenced_page(service, 1)  # a reader that has read the first old event
    owner.execute("DELETE FROM metastore.feed_order WHERE event_id = %s", (pending,))
    owner.execute("INSERT INTO metastore.feed_pending VALUES (%s, '2024-03-01T00:00:20Z')", (pending,))
    result = owner.execute("SELECT metastore.apply_retention('30 days')").fetchone()
    assert result is not None and result[0]["events_removed"] == 4
    assert [r[0] for r in owner.execute("SELECT event_id FROM metastore.feed_order ORDER BY seq")] == recent
    assert owner.execute("SELECT count(*) FROM metastore.feed_pending").fetchone() == (0,)
    # The reader goes on with what remains; a new one reads it from the start.
    events, _, _ = sequenced_page(service, 10, cursor)
    assert [e["id"] for e in events] == recent
    assert [e["id"] for e in read_all(service)] == recent
    assert old[0] not in recent


def test_a_forwarding_cursor_survives_a_revert_of_the_feed_order_and_a_deploy_again(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Moving between the layouts' orders (revert V0011, deploy again) keeps each target's place:
    nothing it was not sent is skipped (what it was sent may come again: at least once)."""
    target = "https://t.example:5000"
    stored = [ingest(service, event(i, when=f"2024-03-{1 + i % 9:02d}T00:00:00.{i:06d}Z"))[1] for i in range(12)]
    assert service.execute("SELECT claimed FROM metastore.forward_claim(%s, 'me', 60)", (target,)).fetchone() == (True,)
    service.execute("SELECT metastore.sequence_feed()")
    sent = service.execute("SELECT cursor, event_id FROM metastore.forward_page(NULL, 5, 1000000)").fetchall()
    assert len(sent) == 5
    assert service.execute("SELECT metastore.forward_ack(%s, 'me', %s, 5)", (target, sent[-1][0])).fetchone() == (True,)
    stored += [ingest(service, event(20 + i))[1] for i in range(3)]  # pending: not numbered yet

    change = next(c.version for c in ledger.changes() if c.name.endswith("__citus_feed_order.sql"))
    previous = max(v for v in migrations.applied_versions(owner) if v < change)
    migrations.revert(database.owner_dsn, previous)
    (plain,) = owner.execute("SELECT cursor FROM metastore.forward_targets").fetchone() or (None,)
    assert plain is not None and ":" in base64.urlsafe_b64decode(plain + "==").decode() and plain != sent[-1][0]
    migrations.deploy(database.owner_dsn)
    assert migrations.verify(database.owner_dsn) == []

    claim = service.execute("SELECT cursor FROM metastore.forward_claim(%s, 'me', 60)", (target,)).fetchone()
    cursor = claim[0] if claim else None
    assert cursor is not None and base64.urlsafe_b64decode(cursor + "==").startswith(b"s:")
    service.execute("SELECT metastore.sequence_feed()")
    page_after = service.execute("SELECT event_id FROM metastore.forward_page(%s, 1000, 100000000)", (cursor,))
    rest = [r[0] for r in page_after]
    assert set(stored) - {r[1] for r in sent} <= set(rest), "an event not yet sent was skipped"
    assert len(rest) == len(set(rest))
    status = service.execute("SELECT metastore.forward_status()").fetchone()
    assert status is not None and status[0]["targets"][0]["oldest_pending_received_at"] is not None
