"""Old days archived, not just dropped: `metastore db retention --archive DIR` writes each expiring
day's events to a gzip NDJSON file with a manifest, in the transaction that removes them; `metastore
import` brings a day back (its checksum checked first). Round trip: archive, drop, import, and the
store holds the same events and gives the same answers to every read call (event ids aside: import
stores events anew). As docs/operations.md sets the roles up: the owner runs retention, the service
role serves the import."""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from metastore import archive, maintenance, migrations
from metastore.transfer import split_line
from tests.conftest import CITUS, Database, ingest
from tests.support.certs import TLSFiles
from tests.support.events import run_event
from tests.support.reads import VIEWS, read_calls, without_unequal
from tests.support.servers import start_server
from tests.support.service_fixtures import tls_files  # noqa: F401

# On Citus the service may not read dataset_events_view, over the distributed events (docs/scale.md).
SERVICE_VIEWS = tuple(v for v in VIEWS if not (CITUS and v == "dataset_events_view"))

KEEP = "5 days"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    return subprocess.run(
        [sys.executable, "-m", "metastore", *map(str, args)], env=env, capture_output=True, text=True, timeout=300
    )


def days_ago(n: int, minute: int = 0) -> str:
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (midnight - timedelta(days=n) + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def seed(database: Database) -> None:
    """Events of 10, 9 and 8 days ago in their daily partitions, of a day of 2024 in the default
    partition (no partition for it), and of today: sharing datasets, jobs and runs across days."""
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("SELECT metastore.create_partitions(current_date - 12, 14)")
    with psycopg.connect(database.service_dsn, autocommit=True) as service:
        for i in range(120):
            when = (days_ago(10 - i % 3, i), "2024-02-29T23:59:59.5Z", days_ago(0, i))[i % 5 % 3]
            event = run_event(
                f"0190e000-0000-7000-8000-{i % 40:012d}",
                job=f"job{i % 7}",
                inputs=[f"s.t{i % 9}", {"namespace": "s3://b", "name": f"raw/{i % 4}"}],
                outputs=[f"s.o{i % 5}"],
                event_type=("START", "COMPLETE")[i % 2],
                event_time=when,
                run={"runId": f"0190e000-0000-7000-8000-{i:012d}"},
            )
            assert ingest(service, event)[0] == "stored"


def payloads(conn: psycopg.Connection[Any], older_than_days: int | None = None) -> dict[bytes, tuple[str, str, str]]:
    rows = conn.execute(
        "SELECT payload_sha256, payload::text, source_kind, event_time::text FROM metastore.events "
        "WHERE %(d)s::integer IS NULL OR event_time < now() - make_interval(days => %(d)s::integer)",
        {"d": older_than_days},
    ).fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def with_event_ids(value: Any, ids: dict[int, int], key: str = "") -> Any:
    """An answer with its event ids replaced (get_dataset's event_id, get_run's events' id)."""
    if isinstance(value, dict):
        return {
            k: (ids.get(v, v) if k == "event_id" or (k == "id" and key == "events") else with_event_ids(v, ids, k))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [with_event_ids(v, ids, key) for v in value]
    if isinstance(value, str) and value.startswith("{"):
        return with_event_ids(json.loads(value), ids, key)  # the views' rows, as JSON text
    return value


def test_archive_drop_import_gives_back_the_same_events_and_answers(
    database: Database,
    tls_files: TLSFiles,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    seed(database)
    owner = psycopg.connect(database.owner_dsn, autocommit=True)
    before = payloads(owner)
    old = payloads(owner, older_than_days=5)
    assert len(old) == 96
    ids_before = dict(owner.execute("SELECT payload_sha256, id FROM metastore.events").fetchall())
    answers_before = list(read_calls(database.service_dsn, SERVICE_VIEWS))
    archive = tmp_path / "archive"
    archive.mkdir()

    done = cli("db", "--database-url", database.owner_dsn, "retention", "--keep", KEEP, "--archive", archive)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["events_removed"] == len(old) and summary["partitions_dropped"] == 14
    assert sorted(a["day"] for a in summary["archived"]) == sorted(
        [days_ago(n)[:10] for n in (10, 9, 8)] + ["2024-02-29"]
    )
    assert payloads(owner) == {h: v for h, v in before.items() if h not in old}

    # Each day's file: what its manifest says, every event of the day once, as export writes them.
    archived: list[str] = []
    manifests = sorted(archive.glob("*.manifest.json"))
    assert len(manifests) == 4 and len(list(archive.iterdir())) == 8
    for path in manifests:
        manifest = json.loads(path.read_text())
        data = archive / manifest["file"]
        assert manifest["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
        assert manifest["bytes"] == data.stat().st_size
        with gzip.open(data, "rt", encoding="utf-8") as f:
            raw = f.read().splitlines()
        lines = [json.loads(line) for line in raw]
        archived += [split_line(line.encode()).payload.decode() for line in raw]  # the event's text, as stored
        assert manifest["events"] == len(lines) > 0
        assert [line["id"] for line in lines] == sorted(line["id"] for line in lines)
        assert (manifest["first_id"], manifest["last_id"]) == (lines[0]["id"], lines[-1]["id"])
        assert all(
            set(line) == {"id", "cursor", "received_at", "source_kind", "source_principal", "event"} for line in lines
        )
        assert all(line["event"]["eventTime"].startswith(manifest["day"]) for line in lines)
    assert sorted(archived) == sorted(v[0] for v in old.values())

    # A damaged file is refused whole: nothing is imported from any of the files given.
    server = start_server(database.service_dsn, tls_files, tmp_path / "server.log")
    try:
        damaged = tmp_path / "damaged"
        damaged.mkdir()
        for path in manifests[:2]:
            manifest = json.loads(path.read_text())
            (damaged / path.name).write_text(path.read_text())
            content = bytearray((archive / manifest["file"]).read_bytes())
            if path == manifests[1]:
                content[len(content) // 2] ^= 0x01
            (damaged / manifest["file"]).write_bytes(bytes(content))
        refused = cli("import", "--to", server.url, "--ca", tls_files.ca, *sorted(damaged.glob("*.ndjson.gz")))
        assert refused.returncode == 1 and "sha256" in refused.stderr and "nothing was imported" in refused.stderr
        assert payloads(owner) == {h: v for h, v in before.items() if h not in old}

        imported = cli("import", "--to", server.url, "--ca", tls_files.ca, *manifests)
        assert imported.returncode == 0, imported.stderr
        result = json.loads(imported.stdout.strip().splitlines()[-1])
        assert (result["read"], result["stored"], result["duplicates"], result["failed"]) == (len(old), len(old), 0, 0)
    finally:
        server.stop()

    # The same events, and after a rebuild of what the drop and the import counted twice, the same
    # answers (ids of datasets, jobs and runs are kept; events get new ids).
    assert payloads(owner) == before
    maintenance.backfill(database.owner_dsn)
    ids_after = dict(owner.execute("SELECT payload_sha256, id FROM metastore.events").fetchall())
    renumbered = {ids_before[h]: ids_after[h] for h in ids_before}
    answers_after = list(read_calls(database.service_dsn, SERVICE_VIEWS))
    assert [name for name, _ in answers_after] == [name for name, _ in answers_before]
    for (name, after), (_, earlier) in zip(answers_after, answers_before, strict=True):
        # received_at: when each event was stored, so the import's time for those imported.
        now, then = with_event_ids(without_unequal(after), {}), with_event_ids(without_unequal(earlier), renumbered)
        if name.endswith("_view"):  # rows in no order
            now, then = (sorted(json.dumps(r, sort_keys=True) for r in rows) for rows in (now, then))
        assert now == then, name
    owner.close()


def test_archive_refuses_a_directory_that_does_not_exist_and_removes_nothing(
    database: Database, tmp_path: Path
) -> None:
    seed(database)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before = payloads(owner)
        done = cli(
            "db", "--database-url", database.owner_dsn, "retention", "--keep", KEEP, "--archive", tmp_path / "no"
        )
        assert done.returncode == 1 and "not a directory" in done.stderr
        assert payloads(owner) == before


def test_a_failed_write_rolls_back_and_leaves_no_file(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills up at the second day: the run deletes the file it wrote, removes nothing."""
    seed(database)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before = payloads(owner)
    written = 0
    real = archive._write_day

    def fills_up(*args: Any) -> Any:
        nonlocal written
        written += 1
        if written == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args)

    monkeypatch.setattr(archive, "_write_day", fills_up)
    with pytest.raises(migrations.MigrationError, match="nothing was removed"):
        maintenance.retention(database.owner_dsn, KEEP, archive_dir=tmp_path)
    assert written == 2 and list(tmp_path.iterdir()) == []
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        assert payloads(owner) == before


def test_an_event_stored_for_an_expiring_day_meanwhile_rolls_the_run_back(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the days are written, an event arrives for an old day that has no partition (it goes
    to the default partition, which the archive does not hold still): retention would remove it
    unarchived, so the run compares counts, rolls back and says to run it again."""
    seed(database)
    real = archive._write_day
    late = run_event(event_time="2024-02-29T10:00:00Z", run={"runId": "late"})

    calls = 0

    def with_a_late_event(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # once 2024-02-29, the first day, is written
            with psycopg.connect(database.service_dsn, autocommit=True) as service:
                assert ingest(service, late)[0] == "stored"
        return real(*args)

    monkeypatch.setattr(archive, "_write_day", with_a_late_event)
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before = payloads(owner)
        with pytest.raises(migrations.MigrationError, match="run it again"):
            maintenance.retention(database.owner_dsn, KEEP, archive_dir=tmp_path)
        assert list(tmp_path.iterdir()) == []
        after = payloads(owner)
    assert len(after) == len(before) + 1 and set(before) < set(after)
