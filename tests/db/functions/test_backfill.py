"""CALL metastore.backfill(): rebuilds the derived tables from the raw events while ingest goes on, in
one session or several at once, resuming where a stopped rebuild was."""

from __future__ import annotations

import os
import threading
from typing import Any

import psycopg
import pytest
from psycopg import sql

from metastore import ledger, maintenance
from tests.conftest import OWNER, Database, ingest
from tests.support.derived import (
    collect_notices,
    dangling,
    reference,
    snapshot,
    stop_midway,
    whole,
)
from tests.support.generated import (
    allow_two_weeks_ahead,
    generated_events,
    ingest_fixtures_and_generated,
    runs_of,
)
from tests.support.ingesting import ingest_all, ingesting_meanwhile


def test_backfill_rebuilds_exactly_what_live_ingest_gave(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest_fixtures_and_generated(database, service, 40, "a")
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
    ingest_all(database.service_dsn, first)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        with ingesting_meanwhile(database.service_dsn, second, timeout=60):
            owner.execute("CALL metastore.backfill(25)")
        result = snapshot(owner)

    # The same events ingested live only, in another database, must give the same state.
    assert result == reference(pg_server, first + second, read=snapshot)


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
        notices = collect_notices(admin)
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


def test_sessions_share_a_rebuild_while_ingest_goes_on(database: Database, pg_server: Any) -> None:
    first, second = runs_of(150, "before"), runs_of(100, "during")
    allow_two_weeks_ahead(database.owner_dsn)
    ingest_all(database.service_dsn, first)
    with ingesting_meanwhile(database.service_dsn, second, timeout=120):
        maintenance.backfill(database.owner_dsn, sessions=3, batch_size=4)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        result = whole(owner)
        assert dangling(owner) == (0, 0, 0, 0)
        state = owner.execute("SELECT generation, rebuild FROM metastore.derive_state").fetchone()
        assert state == (2, "none")
        assert owner.execute("SELECT count(*) FROM metastore.rebuild_ranges").fetchone() == (0,)
    assert all(result.values())
    # Sources that only column-lineage facets name are datasets with edges, rebuilt as ingest made them.
    assert {d[4] for d in result["datasets"] if d[0] == "bigtable://p/i"} == {"dataset"}
    assert any(e[0] == "bigtable://p/i" for e in result["edges"])
    assert result == reference(pg_server, first + second)


def test_ingest_is_held_only_for_the_cut_not_for_the_rebuild(database: Database) -> None:
    """With a lock_timeout of 300 ms, every event posted while a rebuild runs is stored: the SHARE
    lock on metastore.events lasts a few statements at the cut and at the end, not the rebuild."""
    allow_two_weeks_ahead(database.owner_dsn)
    ingest_all(database.service_dsn, runs_of(200, "stored"))
    done = threading.Event()
    failures: list[BaseException] = []

    def rebuild() -> None:
        try:
            maintenance.backfill(database.owner_dsn, batch_size=1)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=rebuild)
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        service.execute("SET lock_timeout = '300ms'")
        thread.start()
        during = 0
        for event in runs_of(150, "posted"):
            assert ingest(service, event)[0] == "stored"
            with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
                row = owner.execute("SELECT rebuild FROM metastore.derive_state").fetchone()
            during += row == ("deriving",)
            if done.is_set():
                break
    thread.join(120)
    assert not failures
    assert during >= 20, "the rebuild ended before the events were posted"


def test_a_rebuild_stopped_midway_shows_the_old_datasets_and_resumes(database: Database) -> None:
    allow_two_weeks_ahead(database.owner_dsn)
    ingest_all(database.service_dsn, runs_of(150, "r"))
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before, datasets_before = whole(owner), snapshot(owner)["datasets"]
        stop_midway(database, 2)
        assert owner.execute("SELECT generation, rebuild FROM metastore.derive_state").fetchone() == (2, "deriving")
        assert owner.execute("SELECT count(*) FROM metastore.rebuild_ranges").fetchone()[0] > 0  # type: ignore[index]
        # Datasets keep the numbers of the generation they were rebuilt from until the rebuild ends.
        assert snapshot(owner)["datasets"] == datasets_before
        notices = collect_notices(owner)
        owner.execute("CALL metastore.backfill(2)")
        assert any("joined the rebuild of generation 2" in n for n in notices), notices
        assert owner.execute("SELECT generation, rebuild FROM metastore.derive_state").fetchone() == (2, "none")
        assert whole(owner) == before
        assert dangling(owner) == (0, 0, 0, 0)


def test_a_deploy_that_changed_the_rules_starts_the_rebuild_again(database: Database) -> None:
    allow_two_weeks_ahead(database.owner_dsn)
    ingest_all(database.service_dsn, runs_of(150, "r"))
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before = whole(owner)
        stop_midway(database, 2)
        # What a deploy of other rules does: another text of a derivation (here, one more comment).
        source = (ledger.db_dir() / "functions" / "041_derive_job_run.sql").read_text()
        owner.execute(source.replace("BEGIN\n", "BEGIN\n    -- other rules\n", 1))  # type: ignore[arg-type]
        notices = collect_notices(owner)
        owner.execute("CALL metastore.backfill(50)")
        assert any("generation 3 started" in n for n in notices), notices
        assert owner.execute("SELECT generation, rebuild FROM metastore.derive_state").fetchone() == (3, "none")
        assert whole(owner) == before
