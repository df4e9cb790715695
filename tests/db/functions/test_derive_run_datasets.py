"""metastore.derive_run_datasets: the datasets each run read and wrote, derived at ingest from the same
sets of events as jobs and runs, rebuilt by backfill, whatever order the events come in."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

import psycopg

from tests.conftest import Database, create_database, drop_database, ingest
from tests.support.generated import (
    allow_two_weeks_ahead,
    generated_events,
    ingest_fixtures_and_generated,
)


def rows(owner: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """metastore.run_datasets by natural keys: the run's job and run id, the dataset, the direction, run_time."""
    return owner.execute(
        "SELECT j.namespace, j.name, r.run_id, d.namespace, d.name, x.direction, x.run_time, "
        "       x.run_time = r.first_event_time "
        "  FROM metastore.run_datasets AS x JOIN metastore.runs AS r ON r.id = x.run_id "
        "  JOIN metastore.jobs AS j ON j.id = r.job_id JOIN metastore.datasets AS d ON d.id = x.dataset_id "
        " ORDER BY 1, 2, 3, 4, 5, 6"
    ).fetchall()


def oracle(owner: psycopg.Connection[Any]) -> set[tuple[Any, ...]]:
    """What the stored events say, read again from their payloads: each run event's inputs and
    outputs, not the symlink identifiers their facets name."""
    return set(
        owner.execute(
            "SELECT DISTINCT e.job_namespace, e.job_name, e.run_id, m.namespace, m.name, m.direction "
            "  FROM metastore.events AS e CROSS JOIN LATERAL metastore.extract_datasets(e.payload) AS m "
            " WHERE e.run_id IS NOT NULL AND e.job_name IS NOT NULL AND m.symlink_of_namespace IS NULL "
            "   AND m.direction IN ('input', 'output')"
        ).fetchall()
    )


def test_every_run_has_the_datasets_its_events_read_and_wrote(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest_fixtures_and_generated(database, service, 60, "a")
    got = rows(owner)
    assert len(got) > 100
    assert {r[:6] for r in got} == oracle(owner)
    assert all(r[7] for r in got), "run_time is the run's first_event_time"
    # The generated events carry a hive symlink on their input: not one of the run's datasets.
    assert not [r for r in got if r[3] == "hive://m"]


def test_any_order_and_any_split_gives_the_same_rows(pg_server: Any) -> None:
    allowed: list[dict[str, Any]] = []
    for i, event in enumerate(generated_events(80, "o")):
        allowed.append(event)
        # One run in three has a START a minute before its event, arriving after it or before it.
        if i % 3 == 0:
            at = datetime.strptime(event["eventTime"], "%Y-%m-%dT%H:%M:%SZ") - timedelta(minutes=1)
            allowed.append(dict(event, eventType="START", eventTime=at.strftime("%Y-%m-%dT%H:%M:%SZ"), outputs=[]))
    results = []
    for seed in (1, 2, 3):
        db = create_database(pg_server)
        try:
            allow_two_weeks_ahead(db.owner_dsn)
            events = list(allowed)
            random.Random(seed).shuffle(events)
            with psycopg.connect(db.service_dsn, autocommit=True) as conn:
                i = 0
                while i < len(events):
                    size = random.Random(seed * 1000 + i).randint(1, 12)
                    bodies = [json.dumps(e).encode() for e in events[i : i + size]]
                    conn.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies,))
                    i += size
            with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
                results.append(rows(conn))
        finally:
            drop_database(db)
    assert results[0] == results[1] == results[2]
    assert len(results[0]) > 100 and all(r[7] for r in results[0])


def test_backfill_rebuilds_them_and_removes_what_no_event_says(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest_fixtures_and_generated(database, service, 40, "b")
    live = rows(owner)
    owner.execute("DELETE FROM metastore.run_datasets WHERE direction = 'output'")
    owner.execute("UPDATE metastore.run_datasets SET run_time = '1999-01-01'")
    owner.execute(
        "INSERT INTO metastore.run_datasets (run_id, dataset_id, direction, run_time) "
        "SELECT min(r.id), max(d.id), 'output', now() FROM metastore.runs AS r, metastore.datasets AS d"
    )
    assert rows(owner) != live
    owner.execute("CALL metastore.backfill(9)")
    assert rows(owner) == live


def test_ingest_goes_on_after_reverting_the_change_and_a_deploy_rebuilds_them(empty_db: Database) -> None:
    """The revert drops run_datasets and derive_run_datasets; store_events (the newer one until the
    older release deploys its functions) skips them and stores the event; deployed again, a backfill
    derives them."""
    from metastore import ledger, migrations

    dsn = empty_db.owner_dsn
    migrations.deploy(dsn)
    newest = ledger.latest_version()
    assert migrations.revert(dsn, 7) == sorted((c.version for c in ledger.changes() if c.version > 7), reverse=True)
    with psycopg.connect(dsn, autocommit=True) as owner:
        event = generated_events(1, "rv")[0] | {"eventTime": "2026-07-20T10:00:00Z"}
        assert ingest(owner, event)[0] == "stored"
        gone = owner.execute(
            "SELECT to_regclass('metastore.run_datasets'), to_regclass('metastore.hidden'),"
            " to_regprocedure('metastore.derive_run_datasets(metastore.valid_event[], jsonb)')"
        ).fetchone()
        assert gone == (None, None, None)
    migrations.deploy(dsn)
    assert ledger.latest_version() == newest and migrations.verify(dsn) == []
    with psycopg.connect(dsn, autocommit=True) as owner:
        owner.execute("CALL metastore.backfill()")
        assert [r[1:6] for r in rows(owner)] == [
            ("q0", "rv-0", "trino://h:8080", "s.out0", "output"),
            ("q0", "rv-0", "trino://h:8080", "s.t0", "input"),
        ]
