"""metastore db deploy | verify | revert | status, against a real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

import psycopg

from metastore import ledger, migrations
from tests.conftest import APP_ROLE, Database
from tests.schema_dump import SCHEMA_FILE, dump
from tests.support.schema import schema_exists


def test_round_trip_deploy_verify_revert_to_zero_and_deploy_again(empty_db: Database) -> None:
    dsn = empty_db.owner_dsn
    assert migrations.deploy(dsn) == [c.version for c in ledger.changes()]
    assert migrations.verify(dsn) == []
    assert dump(empty_db.server, empty_db.name) == SCHEMA_FILE.read_text(), "db/schema.sql is stale: run make schema"

    assert migrations.revert(dsn, 0) == sorted((c.version for c in ledger.changes()), reverse=True)
    assert not schema_exists(empty_db)
    assert migrations.status(dsn)["applied"] == []

    migrations.deploy(dsn)
    assert migrations.verify(dsn) == []
    assert migrations.deploy(dsn) == []  # a second deploy has nothing to do and does no harm
    assert dump(empty_db.server, empty_db.name) == SCHEMA_FILE.read_text()


def test_concurrent_deploys_apply_each_change_once(empty_db: Database) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            migrations.deploy(empty_db.owner_dsn)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert migrations.status(empty_db.owner_dsn)["applied"] == [c.version for c in ledger.changes()]
    assert migrations.verify(empty_db.owner_dsn) == []


def test_functions_are_reapplied_even_when_no_change_is_pending(database: Database) -> None:
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute("DROP FUNCTION metastore.get_dataset(bigint, integer)")
    assert migrations.verify(database.owner_dsn) != []
    assert migrations.deploy(database.owner_dsn) == []
    assert migrations.verify(database.owner_dsn) == []


def test_verify_names_a_function_added_dropped_or_whose_signature_changed(database: Database) -> None:
    def findings() -> list[str]:
        failures = migrations.verify(database.owner_dsn)
        assert all(f.startswith("functions.sql:") for f in failures), failures
        return failures

    assert findings() == []
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION metastore.helper() RETURNS integer LANGUAGE sql "
            "SET search_path = pg_catalog, pg_temp AS 'SELECT 1'"
        )
    [failure] = findings()
    assert "missing or changed: none; not in the list: metastore.helper() -> integer" in failure

    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute("DROP FUNCTION metastore.helper()")
        # The same name and result, one more argument (with a default: old calls still work).
        conn.execute(
            "CREATE FUNCTION metastore.schema_version(p_x integer DEFAULT 0) RETURNS bigint LANGUAGE sql "
            "SET search_path = pg_catalog, pg_temp AS 'SELECT 1::bigint'"
        )
        conn.execute("DROP FUNCTION metastore.schema_version()")
    [failure] = findings()
    assert "missing or changed: metastore.schema_version() -> bigint;" in failure
    assert "not in the list: metastore.schema_version(p_x integer DEFAULT 0) -> bigint" in failure


def test_verify_catches_a_grant_that_lets_the_service_rewrite_history(database: Database) -> None:
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute(f"GRANT UPDATE ON metastore.events TO {APP_ROLE}")
    failures = migrations.verify(database.owner_dsn)
    assert len(failures) == 1 and "V0001" in failures[0]


def test_revert_to_the_current_version_does_nothing(database: Database) -> None:
    assert migrations.revert(database.owner_dsn, ledger.latest_version()) == []
    assert schema_exists(database)


def test_the_cli_reports_status_as_json_and_fails_clearly_without_a_database_url(database: Database) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    out = subprocess.run(
        [sys.executable, "-m", "metastore", "db", "--database-url", database.owner_dsn, "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    status = json.loads(out.stdout)
    assert status["pending"] == [] and status["applied"] == [c.version for c in ledger.changes()]
    missing = subprocess.run(
        [sys.executable, "-m", "metastore", "db", "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2
    assert "METASTORE_ADMIN_DATABASE_URL" in missing.stderr


def test_verify_via_cli_exits_non_zero_on_failure(database: Database) -> None:
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute(
            "GRANT EXECUTE ON FUNCTION metastore.store_events(jsonb[], metastore.valid_event[], text, text) TO PUBLIC"
        )
    env = {**os.environ, "METASTORE_ADMIN_DATABASE_URL": database.owner_dsn}
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "db", "verify"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert "functions.sql" in result.stdout


def test_events_are_compressed_with_lz4_where_the_server_has_it(owner: psycopg.Connection[Any]) -> None:
    try:
        owner.execute("SET default_toast_compression = 'lz4'")
        has_lz4 = True
    except psycopg.errors.InvalidParameterValue:
        has_lz4 = False
    # The parent, the default partition and every daily partition.
    rows = owner.execute(
        "SELECT DISTINCT attcompression FROM pg_attribute WHERE attname = 'payload' AND attrelid IN "
        "(SELECT 'metastore.events'::regclass UNION ALL "
        " SELECT inhrelid FROM pg_inherits WHERE inhparent = 'metastore.events'::regclass)"
    ).fetchall()
    assert rows == [("l" if has_lz4 else "",)]


def test_v0002_keeps_what_rejected_events_held_and_its_revert_gives_it_back(empty_db: Database) -> None:
    dsn = empty_db.owner_dsn
    assert migrations.deploy(dsn, 1, partial=True) == [1]
    small = {"eventTime": "x", "run": {"runId": "r"}}
    large = {"eventTime": "x", "facets": {"plan": "p" * 10_000}}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for payload, kind, principal in (
            (small, "unauthenticated", None),
            (large, "authenticated", "CN=trino"),
            (small, "made-up", None),  # V0001 had no CHECK here
            (small, "unauthenticated", "someone"),
        ):
            conn.execute(
                "INSERT INTO metastore.rejected_events (payload, sqlstate, reason, source_kind, source_principal) "
                "VALUES (%s, '22007', 'why', %s, %s)",
                (json.dumps(payload), kind, principal),
            )
    assert migrations.deploy(dsn, 2, partial=True) == [2]
    # Short of the release's version, verify says so, and finds nothing else wrong.
    assert [f for f in migrations.verify(dsn) if not f.startswith("change(s) not deployed")] == []
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT body_prefix, body_bytes, body_sha256 = sha256(convert_to(body_prefix, 'UTF8')), reason, "
            "source_kind, source_principal FROM metastore.rejected_events ORDER BY id"
        ).fetchall()
    assert [json.loads(r[0]) for r in rows[::2]] == [small, small]
    assert rows[0][1:] == (len(rows[0][0].encode()), True, "why", "unauthenticated", None)
    assert len(rows[1][0]) == 4096 and rows[1][1] > 10_000 and rows[1][4:] == ("authenticated", "CN=trino")
    # What the CHECKs now refuse became unauthenticated, the claim kept in the reason.
    assert [r[3:] for r in rows[2:]] == [
        ("why [recorded with source_kind 'made-up', source_principal NULL]", "unauthenticated", None),
        ("why [recorded with source_kind 'unauthenticated', source_principal 'someone']", "unauthenticated", None),
    ]

    assert migrations.revert(dsn, 1) == [2]
    with psycopg.connect(dsn, autocommit=True) as conn:
        payloads = [r[0] for r in conn.execute("SELECT payload FROM metastore.rejected_events ORDER BY id")]
    assert payloads[0] == small and payloads[2] == small
    # Only its first 4096 bytes were kept: the revert gives back what there is.
    assert set(payloads[1]) == {"body_prefix", "body_bytes", "body_sha256"}
    assert payloads[1]["body_bytes"] == rows[1][1]
