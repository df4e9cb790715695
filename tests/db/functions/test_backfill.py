"""CALL metastore.backfill(): rebuilds the derived tables from the raw events, also while ingest goes on."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import OWNER, Database, create_database, drop_database, fixture_files, ingest, load_fixture


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Derived state by natural keys (ids of datasets aside)."""
    return {
        "datasets": conn.execute(
            "SELECT namespace, name, scheme, authority, kind, first_seen, last_seen, input_events, output_events "
            "FROM metastore.datasets_view ORDER BY 1, 2"
        ).fetchall(),
        "links": conn.execute(
            "SELECT e.payload_sha256, d.namespace, d.name, l.direction, l.event_time, l.tableoid::regclass::text "
            "FROM metastore.event_datasets l "
            "JOIN metastore.events e ON e.id = l.event_id AND e.event_time = l.event_time "
            "JOIN metastore.datasets d ON d.id = l.dataset_id ORDER BY 1, 2, 3, 4"
        ).fetchall(),
        "symlinks": conn.execute(
            "SELECT c.namespace, c.name, s.namespace, s.name, y.type FROM metastore.dataset_symlinks y "
            "JOIN metastore.datasets c ON c.id = y.dataset_id JOIN metastore.datasets s ON s.id = y.symlink_id "
            "ORDER BY 1, 2, 3, 4, 5"
        ).fetchall(),
    }


def all_fixture_events() -> list[Any]:
    events: list[Any] = []
    for path in fixture_files():
        data = load_fixture(path)
        events += data if isinstance(data, list) else [data]
    return events


def event_time(i: int) -> str:
    """Spread over the daily partitions (yesterday .. two weeks ahead) and, one in seven, the default one."""
    if i % 7 == 0:
        return f"2024-01-01T00:00:{i % 60:02d}Z"
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    return (start + timedelta(minutes=(i * 7919) % (15 * 24 * 60))).strftime("%Y-%m-%dT%H:%M:%SZ")


def allow_two_weeks_ahead(owner_dsn: str) -> None:
    """generated_events reach two weeks ahead: past the default eventTime window, as a DBA may allow."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute("UPDATE metastore.settings SET event_time_future = '15 days'")


def generated_events(n: int, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "eventTime": event_time(i),
            "run": {"runId": f"{prefix}-{i}"},
            "job": {"namespace": "bench", "name": f"q{i}"},
            "inputs": [
                {
                    "namespace": "trino://h:8080",
                    "name": f"s.t{i % 17}",
                    "facets": {
                        "symlinks": {"identifiers": [{"namespace": "hive://m", "name": f"s.t{i % 5}", "type": "TABLE"}]}
                    },
                }
            ],
            "outputs": [{"namespace": "trino://h:8080", "name": f"s.out{i % 11}"}],
        }
        for i in range(n)
    ]


def test_backfill_rebuilds_exactly_what_live_ingest_gave(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    allow_two_weeks_ahead(database.owner_dsn)
    for event in all_fixture_events() + generated_events(40, "a"):
        ingest(service, event)
    live = snapshot(owner)
    ids_before = dict(((ns, n), i) for i, ns, n in owner.execute("SELECT id, namespace, name FROM metastore.datasets"))
    assert len(live["datasets"]) > 50 and live["symlinks"]
    # Links in the default partition and in several daily ones.
    assert len({link[-1] for link in live["links"]}) > 5
    assert "metastore.event_datasets_default" in {link[-1] for link in live["links"]}

    # Damage every derived table the way a buggy release might have.
    owner.execute("DELETE FROM metastore.dataset_symlinks WHERE type = 'TABLE'")
    owner.execute("DELETE FROM metastore.event_datasets WHERE direction = 'output'")
    owner.execute("UPDATE metastore.datasets SET kind = 'symlink', last_seen = '1999-01-01', input_events = 7")
    owner.execute(
        "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen) "
        "VALUES ('ghost://x', 'y', 'dataset', now(), now())"
    )
    assert snapshot(owner) != live

    owner.execute("CALL metastore.backfill(7)")
    assert snapshot(owner) == live
    ids_after = dict(((ns, n), i) for i, ns, n in owner.execute("SELECT id, namespace, name FROM metastore.datasets"))
    assert ids_after == ids_before  # links from Cockpit keep working


def test_backfill_of_an_empty_store_is_a_no_op(owner: psycopg.Connection[Any]) -> None:
    owner.execute("CALL metastore.backfill()")
    assert snapshot(owner) == {"datasets": [], "links": [], "symlinks": []}


def test_backfill_while_ingest_goes_on_misses_nothing(database: Database, pg_server: Any) -> None:
    first, second = generated_events(300, "before"), generated_events(300, "during")
    allow_two_weeks_ahead(database.owner_dsn)
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        for event in first:
            ingest(service, event)

    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                for event in second:
                    assert ingest(conn, event)[0] == "stored"
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("CALL metastore.backfill(25)")
        thread.join(60)
        assert not thread.is_alive() and not errors
        result = snapshot(owner)

    # The same events ingested live only, in another database, must give the same state.
    reference = create_database(pg_server)
    try:
        allow_two_weeks_ahead(reference.owner_dsn)
        with psycopg.connect(reference.service_dsn, autocommit=True) as conn:
            for event in first + second:
                ingest(conn, event)
        with psycopg.connect(reference.owner_dsn, autocommit=True) as conn:
            assert result == snapshot(conn)
    finally:
        drop_database(reference)


def test_backfill_rebuilds_names_of_10_kb_identically(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    def name(tag: str) -> str:
        return tag + os.urandom(5_000).hex()  # 10 KB that does not compress

    table, symlink, job = name("t"), name("s"), name("j")
    for i in range(3):
        event = {
            "eventTime": f"2024-01-01T00:00:0{i}Z",
            "run": {"runId": f"long-{i}"},
            "job": {"namespace": "j", "name": job},
            "inputs": [
                {
                    "namespace": "hdfs://nn:8020",
                    "name": table,
                    "facets": {"symlinks": {"identifiers": [{"namespace": "hive://m", "name": symlink, "type": "T"}]}},
                }
            ],
            "outputs": [{"namespace": "hdfs://nn:8020", "name": name(f"o{i}")}],
        }
        assert ingest(service, event)[0] == "stored"
    live = snapshot(owner)
    assert len(live["datasets"]) == 5 and len(live["symlinks"]) == 1
    owner.execute("DELETE FROM metastore.dataset_symlinks")
    owner.execute("UPDATE metastore.datasets SET input_events = 0")
    owner.execute("CALL metastore.backfill(2)")
    assert snapshot(owner) == live


def test_no_statement_is_jit_compiled(database: Database, service: psycopg.Connection[Any]) -> None:
    """Its sets of 1000 events cost more than jit_above_cost: compiling took 0.6 s per statement per set
    on PostgreSQL 15 with LLVM. Here JIT is made the default for every statement; backfill turns it off."""
    for event in generated_events(30, "jit"):
        ingest(service, {**event, "eventTime": "2024-01-01T00:00:00Z"})
    with psycopg.connect(database.server.dsn_for("postgres", database.name), autocommit=True) as admin:
        available = admin.execute("SELECT pg_jit_available()").fetchone()
        if not (available and available[0]):
            pytest.skip("this PostgreSQL was built without JIT (LLVM)")
        # Watching only (auto_explain needs a superuser to load); the backfill runs as the owner.
        notices: list[str] = []
        admin.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        admin.execute("LOAD 'auto_explain'")
        for setting, value in [
            ("auto_explain.log_min_duration", "0"),
            ("auto_explain.log_nested_statements", "on"),
            ("auto_explain.log_level", "notice"),
            ("jit", "on"),
            ("jit_above_cost", "0"),
        ]:
            admin.execute("SELECT set_config(%s, %s, false)", (setting, value))
        admin.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(OWNER)))
        admin.execute("SELECT count(*) FROM metastore.events")
        assert any("JIT:" in n for n in notices), "the watch sees JIT where it is on"
        notices.clear()
        admin.execute("CALL metastore.backfill()")
    # Only the statement that turns it off, which starts each transaction, runs with it on.
    compiled = [n for n in notices if "JIT:" in n and "set_config('jit', 'off', true)" not in n]
    assert len(notices) > 20 and not compiled
