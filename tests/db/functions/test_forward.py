"""The SQL of live forwarding: target keys without credentials (and the upgrade that renames the
targets of earlier releases), pages bounded by bytes in the feed's order, refusals kept only for
answers that judge an event, failures counted, and the owner's removal of a target."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from metastore import ledger, migrations
from metastore.outbound import target_key
from tests.conftest import SERVICE, Database, create_database, create_group_roles, drop_database, ingest
from tests.support.events import run_event

URLS = [
    "https://marquez:5000",
    "https://marquez:5000/",
    "https://marquez:5000/api/v1/lineage",
    "https://marquez:5000/api/v1/lineage/",
    "https://bot:s3cret@marquez:5000",
    "https://bot:p@ss:w@rd@marquez:5000/base/api/v1/lineage?token=abc&x=1#frag",
    "http://h/x/api/v1/lineage/api/v1/lineage//",
    "https://h?token=abc",
    "https://h/p?bare-token&&k=v=w",
    "https://h/p@q/?a=b",
    "https://[::1]:8443/",
    "https://h/api/v1/lineage2",
]


def test_the_key_of_a_target_is_the_same_in_sql_and_python_and_holds_no_credentials(
    owner: psycopg.Connection[Any],
) -> None:
    for url in URLS:
        (key,) = owner.execute("SELECT metastore.forward_key(%s)", (url,)).fetchone()  # type: ignore[misc]
        assert key == target_key(url), url
        # A key names itself: the upgrade renames rows once, and verify checks every name is a key.
        assert owner.execute("SELECT metastore.forward_key(%s)", (key,)).fetchone() == (key,)
        for secret in ("s3cret", "p@ss", "w@rd", "abc", "bare-token", "v=w"):
            assert secret not in key, (url, key)
    assert target_key("https://bot:s3cret@marquez:5000/api/v1/lineage/?token=abc") == "https://marquez:5000?token=***"
    assert target_key("https://h/api/v1/lineage2") == "https://h/api/v1/lineage2"


def events(conn: psycopg.Connection[Any], count: int, size: int = 0) -> None:
    for i in range(count):
        extra = {"pad": "x" * size} if size else {}
        event = run_event(f"run-fwd-{i}", job=f"j{i}", event_time=f"2024-05-01T12:00:{i % 60:02d}.{i:06d}Z", **extra)
        assert ingest(conn, event)[0] == "stored"


def feed(conn: psycopg.Connection[Any]) -> list[tuple[str, int, str]]:
    out, cursor = [], None
    while True:
        rows = conn.execute("SELECT event, cursor, more FROM metastore.read_events(7, %s)", (cursor,)).fetchall()
        for event, cursor, _ in rows:
            parsed = json.loads(event)
            out.append((cursor, parsed["id"], json.dumps(parsed["event"], sort_keys=True)))
        if not rows or not rows[0][2]:
            return out


def size_of(conn: psycopg.Connection[Any], event_id: int) -> int:
    row = conn.execute(
        "SELECT octet_length(payload) FROM metastore.forward_page(NULL, 1000, 1 << 30) WHERE event_id = %s",
        (event_id,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def forward_pages(conn: psycopg.Connection[Any], limit: int, max_bytes: int) -> list[list[tuple[str, int, str]]]:
    pages, cursor = [], None
    while True:
        rows = conn.execute(
            "SELECT cursor, event_id, payload FROM metastore.forward_page(%s, %s, %s)", (cursor, limit, max_bytes)
        ).fetchall()
        if not rows:
            return pages
        pages.append([(c, i, json.dumps(json.loads(p), sort_keys=True)) for c, i, p in rows])
        cursor = rows[-1][0]


def test_forward_pages_follow_the_feed_and_stop_after_max_bytes(service: psycopg.Connection[Any]) -> None:
    events(service, 12, size=1000)
    expected = feed(service)
    assert len(expected) == 12
    for limit, max_bytes in ((100, 1 << 22), (5, 1 << 22), (1000, 1), (100, 2500)):
        pages = forward_pages(service, limit, max_bytes)
        assert [e for page in pages for e in page] == expected, (limit, max_bytes)
        assert all(len(page) <= limit for page in pages)
        if max_bytes == 1:
            assert [len(page) for page in pages] == [1] * 12  # always one event, whatever its size
        if max_bytes == 2500:
            # A page stops at the event that makes it reach max_bytes, never before.
            sizes = [[size_of(service, i) for _, i, _ in page] for page in pages]
            assert all(sum(s) >= max_bytes > sum(s[:-1]) for s in sizes[:-1]), sizes
            assert sum(sizes[-1][:-1]) < max_bytes and len(pages) < 12
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        service.execute("SELECT * FROM metastore.forward_page('not-a-cursor', 10, 100)")
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        service.execute("SELECT * FROM metastore.forward_page(NULL, 0, 100)")


def test_refusals_are_kept_for_answers_that_judge_the_event_only_and_are_bounded(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    target = "https://bot:pw@receiver:5000?token=t0k3n"
    assert service.execute("SELECT claimed FROM metastore.forward_claim(%s, 'me', 30)", (target,)).fetchone() == (True,)
    for status in (401, 404, 413, 429, 500, 302):
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            service.execute("SELECT metastore.forward_refused(%s, 'me', 1, 'MDox', %s, 'no')", (target, status))
    # Another owner (the lease is not its own) records nothing.
    assert service.execute(
        "SELECT metastore.forward_refused(%s, 'other', 1, 'MDox', 400, 'no')", (target,)
    ).fetchone() == (False,)
    for event_id in range(1, 1006):
        status = 422 if event_id % 2 else 400
        row = service.execute(
            "SELECT metastore.forward_refused(%s, 'me', %s, 'MDox', %s, %s)", (target, event_id, status, "b" * 5000)
        ).fetchone()
        assert row == (True,)
    rows = owner.execute("SELECT target, min(event_id), max(event_id), count(*), max(length(body)) "
                         "FROM metastore.forward_refusals GROUP BY target").fetchall()  # fmt: skip
    assert rows == [("https://receiver:5000?token=***", 6, 1005, 1000, 2000)]
    status = json.loads(service.execute("SELECT metastore.forward_status()::text").fetchone()[0])  # type: ignore[index]
    [shown] = status["targets"]
    assert shown["target"] == "https://receiver:5000?token=***"
    assert shown["last_refusal"]["event_id"] == 1005 and shown["last_refusal"]["status"] == 422


def test_failures_are_counted_in_a_row_and_end_with_an_attempt_that_ends_well(
    service: psycopg.Connection[Any],
) -> None:
    target = "https://receiver:5000"
    service.execute("SELECT * FROM metastore.forward_claim(%s, 'me', 30)", (target,))

    def state() -> tuple[Any, ...]:
        status = json.loads(service.execute("SELECT metastore.forward_status()::text").fetchone()[0])  # type: ignore[index]
        t = status["targets"][0]
        return t["failures"], t["failing_since"] is not None, t["last_error"]

    for i in range(3):
        service.execute("SELECT metastore.forward_ack(%s, 'me', NULL, 0, 0, %s)", (target, f"answered 503 ({i})"))
    assert state() == (3, True, "answered 503 (2)")
    service.execute("SELECT metastore.forward_ack(%s, 'me', NULL, 1, 0, NULL)", (target,))
    assert state() == (0, False, "answered 503 (2)")  # the last error stays, with its time


def test_the_owner_removes_a_target_that_is_no_longer_in_use(database: Database) -> None:
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        service.execute("SELECT * FROM metastore.forward_claim('https://old:5000', 'me', 1)")
        service.execute("SELECT metastore.forward_refused('https://old:5000', 'me', 1, 'MDox', 400, 'bad')")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            service.execute("SELECT metastore.forward_remove('https://old:5000')")
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        with pytest.raises(psycopg.errors.ObjectInUse):  # a replica still holds its lease
            owner.execute("SELECT metastore.forward_remove('https://old:5000')")
        owner.execute("UPDATE metastore.forward_targets SET lease_until = now() - interval '1 s'")
        # Any URL that names the target removes it, with its refusals.
        assert owner.execute("SELECT metastore.forward_remove('https://u:p@old:5000/api/v1/lineage')").fetchone() == (
            True,
        )
        assert owner.execute("SELECT count(*) FROM metastore.forward_targets").fetchone() == (0,)
        assert owner.execute("SELECT count(*) FROM metastore.forward_refusals").fetchone() == (0,)
        assert owner.execute("SELECT metastore.forward_remove('https://old:5000')").fetchone() == (False,)


def forward_change() -> int:
    [change] = [c.version for c in ledger.changes() if c.name.endswith("__forward_keys.sql")]
    return change


def test_the_upgrade_names_existing_targets_by_their_key_and_keeps_the_furthest_cursor(pg_server: Any) -> None:
    """Rows of earlier releases are named by the whole URL: the same target under two passwords is
    two rows. The upgrade makes one of them, at the cursor furthest in the feed, without the errors
    that may quote the credentials."""
    db = create_database(pg_server, template="template0")
    app, _ = create_group_roles(pg_server, db.name)
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"GRANT {app} TO {SERVICE}")
    try:
        before = max(c.version for c in ledger.changes() if c.version < forward_change())
        migrations.deploy(db.owner_dsn, before, partial=True)
        # Cursors as the feed makes them: transaction 0 (events stored before the feed existed) and later ones.
        old_cursor, new_cursor, other_cursor = ("MDoy", "MTAwOjk=", "NTA6MTI=")  # 0:2, 100:9, 50:12
        with psycopg.connect(db.owner_dsn, autocommit=True) as owner:
            owner.execute(
                "INSERT INTO metastore.forward_targets (name, cursor, sent, refused, last_error) VALUES "
                "('https://bot:old-pw@marquez:5000', %s, 40, 1, 'event 3: https://bot:old-pw@marquez:5000 down'), "
                "('https://bot:new-pw@marquez:5000', %s, 446, 0, 'cannot reach https://bot:new-pw@marquez:5000'), "
                "('https://datahub/?token=t0k3n', %s, 7, 0, NULL), "
                "('https://plain:8080', NULL, 0, 0, 'event 1: timed out')",
                (old_cursor, new_cursor, other_cursor),
            )
        migrations.deploy(db.owner_dsn)
        assert migrations.verify(db.owner_dsn) == []
        with psycopg.connect(db.owner_dsn) as owner:
            rows = owner.execute(
                "SELECT name, cursor, sent, refused, last_error FROM metastore.forward_targets ORDER BY name"
            ).fetchall()
        assert rows == [
            ("https://datahub?token=***", other_cursor, 7, 0, None),
            ("https://marquez:5000", new_cursor, 486, 1, None),
            ("https://plain:8080", None, 0, 0, "event 1: timed out"),
        ]
    finally:
        drop_database(db)
