"""metastore.read_events: the event feed. Pages, filters, and the property that matters: a reader
paging with the cursor while 8 writers ingest sees every stored event exactly once."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import READER_ROLE, Database, ingest
from tests.support.feed import FILTERS, PAGE_BYTES, READ, event, padded, page, read_all, text_pages


def test_pages_return_every_event_once_as_stored(service: psycopg.Connection[Any]) -> None:
    sent = [event(i) for i in range(23)]
    ids = [ingest(service, e)[1] for e in sent]
    got = read_all(service, limit=5)
    assert [e["id"] for e in got] == ids  # one transaction each, in commit order
    assert [e["event"] for e in got] == sent  # equal as JSON
    first = got[0]
    assert set(first) == {"id", "cursor", "received_at", "source_kind", "source_principal", "event"}
    assert first["source_kind"] == "unauthenticated" and first["source_principal"] is None
    assert datetime.fromisoformat(first["received_at"]).tzinfo is not None
    # The payload is the stored jsonb rendered by PostgreSQL, byte for byte.
    rows = service.execute(READ, (1, None, *([None] * len(FILTERS)))).fetchall()
    with psycopg.connect(service.info.dsn.replace("metastore_service", "metastore_owner")) as owner:
        stored = owner.execute("SELECT payload::text FROM metastore.events WHERE id = %s", (ids[0],)).fetchone()
    assert stored is not None and f'"event": {stored[0]}' in rows[0][0]


def test_the_last_page_says_no_more_and_its_cursor_resumes_later(service: psycopg.Connection[Any]) -> None:
    for i in range(4):
        ingest(service, event(i))
    events, cursor, more = page(service, limit=4)
    assert len(events) == 4 and not more
    assert page(service, 4, cursor) == ([], cursor, False)
    ingest(service, event(99))
    events, _, more = page(service, 4, cursor)
    assert [e["event"]["run"]["runId"] for e in events] == ["run-99"] and not more


def test_filters(service: psycopg.Connection[Any]) -> None:
    ingest(service, event(1, job="a", when="2024-03-01T10:00:00Z", kind="START", ds="x"))
    ingest(service, event(2, job="a", when="2024-03-02T10:00:00Z", kind="COMPLETE", ds="y"))
    ingest(service, event(3, job="b", when="2024-03-03T10:00:00", kind="FAIL", ds="x"))
    runs = lambda **f: [e["event"]["run"]["runId"] for e in read_all(service, **f)]  # noqa: E731
    assert runs() == ["run-1", "run-2", "run-3"]
    assert runs(event_time_from="2024-03-02T10:00:00Z") == ["run-2", "run-3"]
    assert runs(event_time_to="2024-03-02T10:00:00Z") == ["run-1"]  # [from, to)
    assert runs(event_time_from="2024-03-03 10:00:00+00", event_time_to="2024-03-03 10:00:01") == ["run-3"]
    assert runs(job_namespace="trino://h:8080", job_name="a-2") == ["run-2"]
    assert runs(job_namespace="elsewhere") == []
    assert runs(event_type="fail") == ["run-3"]
    assert runs(dataset_namespace="trino://h:8080", dataset_name="cat.sch.x") == ["run-1", "run-3"]
    assert runs(dataset_name="out/2") == ["run-2"]
    assert runs(dataset_namespace="s3://bucket") == ["run-1", "run-2", "run-3"]
    now = datetime.now(UTC)
    assert runs(received_from=(now - timedelta(minutes=5)).isoformat()) == ["run-1", "run-2", "run-3"]
    assert runs(received_to=(now - timedelta(minutes=5)).isoformat()) == []


def test_pages_are_cut_at_1_mib_of_text_and_hold_at_least_one_event(service: psycopg.Connection[Any]) -> None:
    """A page is the same prefix of the feed, shorter: at most 1 MiB of text, unless its one event is
    larger (that one comes alone)."""
    sizes = [300_000] * 7 + [3_000_000] + [200_000] * 6 + [1_100_000, 1_000]
    ids = [ingest(service, padded(i, size))[1] for i, size in enumerate(sizes)]
    got, pages = text_pages(service, 100)
    assert got == ids
    for texts in pages:
        assert len(texts) == 1 or sum(texts) <= PAGE_BYTES, pages
    # Full pages: the next event would not have fitted.
    assert [len(p) for p in pages] == [3, 3, 1, 1, 5, 1, 1, 1], pages


def test_events_stored_before_the_size_rule_are_served_one_per_page(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """Ten events of 60,000 x 1e308 (18.6 MB of text each, stored before validate_event refused such
    events: written here as the owner, through the store path) among ordinary ones: every page is
    read, each of them alone on its own, in the feed's order."""
    bomb = json.dumps(event(0)).replace('"run": {', '"run": {"stats": [' + ",".join(["1e308"] * 60_000) + "], ", 1)
    ids = []
    for i in range(10):
        ids.append(ingest(service, event(100 + i))[1])
        (row,) = owner.execute(
            "SELECT * FROM metastore.store_events(ARRAY[%s::jsonb], ARRAY[metastore.validate_event(%s::jsonb)])",
            (bomb.replace('"run-0"', f'"bomb-{i}"'), json.dumps(event(i))),
        ).fetchall()
        ids.append(row[0])
    got, pages = text_pages(service, 5)
    assert got == ids
    assert [len(p) for p in pages] == [1] * 20, pages


@pytest.mark.parametrize(
    ("limit", "cursor", "filters", "sqlstate"),
    [
        (0, None, {}, "22023"),
        (1001, None, {}, "22023"),
        (10, "bm90IGEgY3Vyc29y", {}, "22023"),  # base64 of "not a cursor"
        (10, "!!!", {}, "22023"),
        (10, "OTk5OTk5OTk5OTk5OTk5OTk5OTk6MQ==", {}, "22023"),  # an xid past 2^64
        (10, None, {"event_time_from": "yesterday-ish"}, "22007"),
        (10, None, {"received_to": "2024-13-45"}, "22008"),
    ],
)
def test_bad_arguments_are_refused_with_their_sqlstate(
    service: psycopg.Connection[Any], limit: int, cursor: str | None, filters: dict[str, str], sqlstate: str
) -> None:
    with pytest.raises(psycopg.Error) as info:
        page(service, limit, cursor, **filters)
    assert info.value.sqlstate == sqlstate


def test_the_reader_role_may_read_the_feed(database: Database, service: psycopg.Connection[Any]) -> None:
    ingest(service, event(1))
    with psycopg.connect(database.server.dsn, autocommit=True) as admin:  # a DBA makes login roles
        admin.execute(f"CREATE ROLE feed_reader_t LOGIN IN ROLE {READER_ROLE}")
    try:
        with psycopg.connect(database.server.dsn_for("feed_reader_t", database.name)) as reader:
            assert len(read_all(reader)) == 1
            with pytest.raises(psycopg.Error) as info:
                reader.execute("SELECT * FROM metastore.ingest_event('{}'::bytea)")
            assert info.value.sqlstate == "42501"
    finally:
        with psycopg.connect(database.server.dsn, autocommit=True) as admin:
            admin.execute("DROP ROLE feed_reader_t")


def test_a_naive_id_cursor_skips_an_event_that_commits_late_and_the_feed_does_not(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """The deterministic case: a transaction takes id N, a later one takes N+1 and commits first."""
    with psycopg.connect(database.service_dsn) as slow:  # a transaction left open
        # Different datasets: the two writers do not wait for each other's dataset rows.
        slow_id = ingest(slow, event(1, ds="a"))[1]
        fast_id = ingest(service, event(2, ds="b"))[1]  # autocommit: visible at once
        assert slow_id is not None and fast_id is not None and fast_id > slow_id

        naive = [r[0] for r in owner.execute("SELECT id FROM metastore.events WHERE id > 0 ORDER BY id")]
        assert naive == [fast_id]
        naive_cursor = naive[-1]
        events, cursor, _ = page(service)
        assert events == [] and cursor is None  # fast_id waits: a transaction below it is still open
        slow.commit()

    after_naive = [r[0] for r in owner.execute("SELECT id FROM metastore.events WHERE id > %s", (naive_cursor,))]
    assert after_naive == []  # slow_id is behind the naive cursor: skipped for good
    assert [e["id"] for e in read_all(service)] == [slow_id, fast_id]


def test_rows_moved_out_of_the_default_partition_keep_their_place(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    owner.execute("UPDATE metastore.settings SET event_time_future = '60 days'")  # a DBA's choice
    far = (datetime.now(UTC) + timedelta(days=40)).strftime("%Y-%m-%dT12:00:00Z")
    ids = [ingest(service, event(i, when=far if i == 1 else None))[1] for i in range(3)]
    before = owner.execute(
        "SELECT id, xact_id::text, tableoid::regclass::text FROM metastore.events ORDER BY id"
    ).fetchall()
    assert before[1][2] == "metastore.events_default"
    _, cursor, _ = page(service, limit=2)
    day = (datetime.now(UTC) + timedelta(days=40)).date()
    owner.execute("SELECT metastore.create_partitions(%s, 45)", (day,))
    after = owner.execute(
        "SELECT id, xact_id::text, tableoid::regclass::text FROM metastore.events ORDER BY id"
    ).fetchall()
    assert after[1][2] == f"metastore.events_p{day:%Y%m%d}"
    assert [r[:2] for r in after] == [r[:2] for r in before]  # the xact_id moved with the row
    events, _, _ = page(service, 10, cursor)
    assert [e["id"] for e in events] == ids[2:]  # nothing seen twice or lost across the move
    assert [e["id"] for e in read_all(service)] == ids


def test_a_reader_paging_under_8_writers_sees_every_event_exactly_once(database: Database, owner: Any) -> None:
    """8 writers ingest as the service role while a reader pages without pause; afterwards the
    union of the pages equals exactly what was stored. A naive `id > last` reader runs alongside,
    and what it would have skipped is counted (typically dozens to hundreds of events here; the
    deterministic case is the test above)."""
    writers, per_writer, page_size = 8, 150, 50
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                for i in range(per_writer):
                    n = w * 100_000 + i
                    # Several datasets per event: a transaction spans the id and the commit.
                    e = event(n, ds=f"d{n % 7}")
                    e["inputs"] += [{"namespace": "trino://h:8080", "name": f"cat.sch.extra{k}"} for k in range(n % 5)]
                    assert ingest(conn, e)[0] == "stored"
        except BaseException as exc:
            errors.append(exc)

    feed: list[int] = []
    naive: list[int] = []

    def read_feed() -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                cursor = None
                while True:
                    done = stop.is_set()  # read once more after the writers stopped
                    events, cursor, more = page(conn, page_size, cursor)
                    feed.extend(e["id"] for e in events)
                    if done and not more:
                        return
        except BaseException as exc:
            errors.append(exc)

    def read_naive() -> None:
        try:
            with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
                last = 0
                while True:
                    done = stop.is_set()
                    rows = conn.execute(
                        "SELECT id FROM metastore.events WHERE id > %s ORDER BY id LIMIT %s", (last, page_size)
                    ).fetchall()
                    naive.extend(r[0] for r in rows)
                    if rows:
                        last = rows[-1][0]
                    if done and len(rows) < page_size:
                        return
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read_feed), threading.Thread(target=read_naive)]
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    started = time.monotonic()
    for t in readers + threads:
        t.start()
    for t in threads:
        t.join(300)
    read_while_writing = len(feed)
    stop.set()
    for t in readers:
        t.join(60)
    assert errors == []
    stored = [r[0] for r in owner.execute("SELECT id FROM metastore.events")]
    assert len(stored) == writers * per_writer
    assert len(feed) == len(set(feed)), "the feed returned an event twice"
    assert sorted(feed) == sorted(stored), f"the feed skipped {len(set(stored) - set(feed))} events"
    assert read_while_writing > 0, "the reader must page while the writers run"
    skipped_naively = len(set(stored) - set(naive))
    print(
        f"\n{len(stored)} events by {writers} writers in {time.monotonic() - started:.1f} s; "
        f"feed: {read_while_writing} read while writing, 0 skipped, 0 repeated; "
        f"a naive id cursor skipped {skipped_naively}"
    )


def test_events_stored_before_the_feed_existed_come_first_in_the_feed(pg_server: Any) -> None:
    """V0004 on a store that already has events: no rewrite, they read as transaction 0."""
    from metastore import migrations
    from tests.conftest import SERVICE, create_database, create_group_roles, drop_database

    db = create_database(pg_server, template="template0")
    app, _ = create_group_roles(pg_server, db.name)
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"GRANT {app} TO {SERVICE}")
    try:
        migrations.deploy(db.owner_dsn, 3, partial=True)  # before the feed (change 4)
        # Stored as that release's ingest stored them (this release's functions need change 5).
        with psycopg.connect(db.owner_dsn, autocommit=True) as owner:
            old = [
                owner.execute(
                    "INSERT INTO metastore.events (payload, payload_sha256, event_kind, event_time) "
                    "SELECT j, sha256(convert_to(j::text, 'UTF8')), 'run', (j ->> 'eventTime')::timestamptz "
                    "FROM (SELECT %s::jsonb AS j) AS e RETURNING id",
                    (json.dumps(event(i)),),
                ).fetchone()[0]  # type: ignore[index]
                for i in range(3)
            ]
        migrations.deploy(db.owner_dsn)
        assert migrations.verify(db.owner_dsn) == []
        with psycopg.connect(db.service_dsn, autocommit=True) as service:
            new = ingest(service, event(9))[1]
            assert [e["id"] for e in read_all(service, limit=2)] == [*old, new]
        with psycopg.connect(db.owner_dsn) as owner:
            rows = owner.execute("SELECT xact_id::text FROM metastore.events ORDER BY id").fetchall()
        assert [r[0] for r in rows[:3]] == ["0", "0", "0"] and int(rows[3][0]) > 0
    finally:
        drop_database(db)


def test_a_dataset_filter_finds_the_same_events_whether_it_walks_the_feed_or_its_links(
    owner: psycopg.Connection[Any], service: psycopg.Connection[Any]
) -> None:
    """Over 10 000 events mention "hot" (the feed is walked) and every 997th mentions "cold" (the page
    is chosen among its few events): both as the owner's reading of the payloads says, in feed order."""
    owner.execute(
        """
        INSERT INTO metastore.events (payload, payload_sha256, event_kind, event_type, event_time, run_id,
                                      job_namespace, job_name, producer)
        SELECT p, sha256(convert_to(p::text, 'UTF8')), 'run', 'COMPLETE', (p ->> 'eventTime')::timestamptz,
               p #>> '{run,runId}', 'jobs', p #>> '{job,name}', 'test'
          FROM (SELECT jsonb_build_object(
                    'eventTime', '2024-03-01T00:00:00Z'::timestamptz + i * interval '1 minute',
                    'eventType', 'COMPLETE', 'producer', 'test',
                    'run', jsonb_build_object('runId', 'r' || i),
                    'job', jsonb_build_object('namespace', 'jobs', 'name', 'j' || i),
                    'inputs', jsonb_build_array(jsonb_build_object('namespace', 'n',
                        'name', CASE WHEN i % 997 = 0 THEN 'cold' WHEN i % 3 = 0 THEN 'other' ELSE 'hot' END)))
                    AS p
                  FROM generate_series(1, 16000) AS i) AS g
        """
    )
    owner.execute("CALL metastore.backfill()")
    for name, at_least in (("hot", 10_001), ("cold", 16)):
        expected = [
            r[0]
            for r in owner.execute(
                "SELECT id FROM metastore.events WHERE payload @> jsonb_build_object('inputs',"
                " jsonb_build_array(jsonb_build_object('name', %s::text))) ORDER BY xact_id, id",
                (name,),
            )
        ]
        assert len(expected) >= at_least
        found = [e["id"] for e in read_all(service, limit=1000, dataset_namespace="n", dataset_name=name)]
        assert found == expected, name
        first, cursor, _ = page(service, 7, dataset_name=name)
        second, _, _ = page(service, 7, cursor, dataset_name=name)
        assert [e["id"] for e in first + second] == expected[:14]
