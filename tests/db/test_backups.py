"""docs/operations.md, Backups: a logical dump without the derived tables' data, restored as the
guide says, is a working store again after backfill and a deploy."""

from __future__ import annotations

import subprocess
from typing import Any

import psycopg

from metastore import migrations
from tests.conftest import Database, create_database, drop_database, fixture_files, ingest

# The guide's list: every table derived from metastore.events (the links' partitions are tables too).
DERIVED = (
    "datasets",
    "dataset_activity",
    "event_datasets*",
    "dataset_symlinks",
    "dataset_schema_versions",
    "lineage_edges",
    "column_lineage",
    "jobs",
    "runs",
)
# What must come back: the events, what was refused, and every derived table but the roll-up buffer,
# which backfill empties (its activity is folded into the datasets).
COUNTED = ("events", "rejected_events", *(t.rstrip("*") for t in DERIVED if t != "dataset_activity"))


def contents(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for table in COUNTED:
        row = conn.execute(f"SELECT count(*) FROM metastore.{table}").fetchone()  # type: ignore[arg-type]
        found[table] = row[0] if row else None
    found["names"] = conn.execute("SELECT namespace, name, kind FROM metastore.datasets ORDER BY 1, 2").fetchall()
    return found


def test_a_dump_without_derived_data_restores_and_backfill_rebuilds_it(
    database: Database, service: psycopg.Connection[Any], owner: psycopg.Connection[Any], tmp_path: Any
) -> None:
    for path in fixture_files():
        ingest(service, path.read_bytes())
    before = contents(owner)
    assert before["events"] > 20 and before["lineage_edges"] and before["column_lineage"] and before["runs"]
    dump = tmp_path / "metastore.dump"
    bin_dir = database.server.bin
    subprocess.run(
        [
            str(bin_dir / "pg_dump"),
            "--format=custom",
            "--schema=metastore",
            "--schema=metastore_migrations",
            *[f"--exclude-table-data=metastore.{t}" for t in DERIVED],
            "-f",
            str(dump),
            database.owner_dsn,
        ],
        check=True,
        capture_output=True,
    )
    target = create_database(database.server, template="template0")
    try:
        with psycopg.connect(target.owner_dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_trgm")
            restored = subprocess.run(
                [str(bin_dir / "pg_restore"), "--exit-on-error", "-d", target.owner_dsn, str(dump)],
                capture_output=True,
                text=True,
            )
            assert restored.returncode == 0, restored.stderr
            assert conn.execute("SELECT count(*) FROM metastore.lineage_edges").fetchone() == (0,)
            conn.execute("CALL metastore.backfill()")
            assert contents(conn) == before
        migrations.deploy(target.owner_dsn)
        assert migrations.verify(target.owner_dsn) == []
        with psycopg.connect(target.owner_dsn, autocommit=True) as conn:
            # Name search's index came back: the extension was there before the restore.
            assert conn.execute("SELECT to_regclass('metastore.datasets_name_trgm_idx')::text").fetchone() == (
                "metastore.datasets_name_trgm_idx",
            )
        namespace, name, _ = before["names"][-1]
        with psycopg.connect(target.service_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT metastore.list_datasets(p_namespace => %s, p_q => %s)", (namespace, name[-5:])
            ).fetchone()
            assert row is not None and name in [d["name"] for d in row[0]["datasets"]]
    finally:
        drop_database(target)
