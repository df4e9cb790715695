"""The durable spool (METASTORE_SPOOL_DIR): what was answered 202 survives a SIGKILL, sync mode
hands a locked database's events to it within the ingest budget, a torn tail is cut off (and
kept in quarantine) without losing the whole records before it, and a spool written by an
earlier release is replayed. Faults of the disk: test_spool_faults.py."""

from __future__ import annotations

import json
import signal
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.checks import stored_run_ids
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server

INGEST_TIMEOUT_MS = 300


def event(run_id: str) -> dict[str, Any]:
    return run_event(run_id, namespace="spool")


def wait_stored(db: Database, tag: str, expected: set[str], timeout: float = 30) -> set[str]:
    """The run ids of this test stored, once they include every one expected."""

    def complete() -> tuple[set[str]] | None:
        got = stored_run_ids(db, tag)
        return (got,) if expected <= got else None

    return eventually(complete, timeout=timeout, interval=0.2, what=f"the {len(expected)} events expected stored")[0]


def post_all(server: Server, run_ids: list[str]) -> list[tuple[int, float]]:
    out = []
    with server.client() as http:
        for run_id in run_ids:
            started = time.perf_counter()
            status = http.post("/api/v1/lineage", json=event(run_id)).status_code
            out.append((status, time.perf_counter() - started))
    return out


def spooled(database: Database, tls: TLSFiles, log: Path, spool: Path, mode: str, **env: str) -> Server:
    return start_server(
        database.service_dsn,
        tls,
        log,
        METASTORE_INGEST_MODE=mode,
        METASTORE_SPOOL_DIR=str(spool),
        METASTORE_DB_TIMEOUT_MS="1000",
        METASTORE_INGEST_TIMEOUT_MS=str(INGEST_TIMEOUT_MS),
        **env,
    )


def spooled_then_killed(database: Database, tls_files: TLSFiles, tmp_path: Path, n: int) -> tuple[Path, str, list[str]]:
    """n events of a new tag answered 202 by an async server (log first.log) that is then SIGKILLed:
    its spool directory, the tag and the events' run ids."""
    spool = tmp_path / "spool"
    server = spooled(database, tls_files, tmp_path / "first.log", spool, "async")
    tag = uuid.uuid4().hex[:8]
    run_ids = [f"{tag}-{i}" for i in range(n)]
    answers = post_all(server, run_ids)
    assert {s for s, _ in answers} == {202}, answers
    server.stop(signal.SIGKILL)
    return spool, tag, run_ids


def test_async_events_answered_202_survive_sigkill(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    spool, tag, run_ids = spooled_then_killed(database, tls_files, tmp_path, 60)
    assert sum(p.stat().st_size for p in spool.glob("*.spool")) > 0
    # Nothing got through the lock: at the kill, all of it was in the spool only. (Once the lock
    # goes, a statement the dead process had sent may still commit: the replay dedupes it.)
    rows = locked_events.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",))
    assert rows.fetchall() == []
    locked_events.rollback()

    again = spooled(database, tls_files, tmp_path / "second.log", spool, "async")
    try:
        assert wait_stored(database, tag, set(run_ids)) == set(run_ids)
    finally:
        assert again.stop() == 0, again.log.read_text()
    assert not any(p.stat().st_size for p in spool.glob("*.spool"))  # released once stored


def test_sync_mode_hands_a_locked_database_to_the_spool_within_the_budget(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    server = spooled(database, tls_files, tmp_path / "server.log", tmp_path / "spool", "sync")
    try:
        tag = uuid.uuid4().hex[:8]
        run_ids = [f"{tag}-{i}" for i in range(10)]
        answers = post_all(server, run_ids)
        assert {s for s, _ in answers} == {202}, answers
        # The ingest budget, then an fsync: far inside Trino's 5 s, with room for its one retry.
        assert max(t for _, t in answers) < INGEST_TIMEOUT_MS / 1000 + 0.7, answers
        rows = locked_events.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",))
        assert rows.fetchall() == []
        locked_events.rollback()
        assert wait_stored(database, tag, set(run_ids)) == set(run_ids)
        # Once the lock is gone, sync mode is sync again (as soon as the circuit breaker's probe
        # has found the database back: within its one-second cool-down).
        with server.client() as http:
            eventually(
                lambda: http.post("/api/v1/lineage", json=event(f"{tag}-after-{time.monotonic()}")).status_code == 201,
                timeout=10,
                interval=0.2,
                what="sync mode coming back",
            )
    finally:
        assert server.stop() == 0, server.log.read_text()


def test_a_torn_tail_is_cut_off_and_the_whole_records_before_it_are_stored(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    spool, tag, run_ids = spooled_then_killed(database, tls_files, tmp_path, 5)
    (segment,) = spool.glob("*.spool")
    original = segment.read_bytes()
    size = len(original)
    with segment.open("r+b") as f:  # a crash in the middle of writing the last record
        f.truncate(size - 7)

    again = spooled(database, tls_files, tmp_path / "second.log", spool, "async")
    try:
        # Cut off at the start (the table still locked: nothing is stored, the segment stays), so
        # that once newer segments exist it is not taken for damage.
        (kept,) = (spool / "quarantine").glob("*.bad")  # the torn bytes, kept for inspection
        torn = kept.read_bytes()
        assert original[: size - 7].endswith(torn) and run_ids[4].encode() in torn
        assert segment.stat().st_size == size - 7 - len(torn)
        locked_events.rollback()
        # The four whole records are stored; the torn one is gone from the spool (a statement the
        # killed process had sent may have stored it once the lock went: that is not a loss).
        assert set(run_ids[:4]) <= wait_stored(database, tag, set(run_ids[:4]))
        torn_lines = [json.loads(x) for x in again.log_lines() if "cut short at its end" in x]
        assert [x["levelname"] for x in torn_lines] == ["WARNING"], torn_lines
        assert 'metastore_spool_quarantined_total{damage="torn"} 1.0' in again.metrics()
        with again.client() as http:  # and the spool takes new events after the cut
            assert http.post("/api/v1/lineage", json=event(f"{tag}-new")).status_code == 202
        assert f"{tag}-new" in wait_stored(database, tag, {f"{tag}-new"})
    finally:
        assert again.stop() == 0, again.log.read_text()


def test_a_spool_written_by_the_earlier_release_is_replayed(
    database: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """Its records (magic MSp1, little-endian length and crc32, a 2-byte meta length, the meta
    JSON, the body) are stored at start, as an upgraded pod finds them."""
    spool = tmp_path / "spool"
    spool.mkdir()
    tag = uuid.uuid4().hex[:8]
    run_ids = [f"{tag}-{i}" for i in range(3)]
    records = b""
    for run_id in run_ids:
        meta = json.dumps({"r": run_id, "k": "unauthenticated", "p": None}).encode()
        payload = struct.pack("<H", len(meta)) + meta + json.dumps(event(run_id)).encode()
        records += struct.pack("<4sII", b"MSp1", len(payload), zlib.crc32(payload)) + payload
    (spool / "000000000007.spool").write_bytes(records)
    server = spooled(database, tls_files, tmp_path / "server.log", spool, "async")
    try:
        assert wait_stored(database, tag, set(run_ids)) == set(run_ids)
        with server.client() as http:  # new records go to a new segment
            assert http.post("/api/v1/lineage", json=event(f"{tag}-new")).status_code == 202
        assert f"{tag}-new" in wait_stored(database, tag, {f"{tag}-new"})
    finally:
        assert server.stop() == 0, server.log.read_text()
    assert not list(spool.glob("*.spool"))


def test_a_small_spool_keeps_taking_events_once_they_are_stored(
    database: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    """Segments are a sixteenth of METASTORE_SPOOL_MAX_BYTES: 1.5 MB of events through a 1 MiB
    spool are all accepted (the segment being written counts whole until it is closed)."""
    spool = tmp_path / "spool"
    server = spooled(
        database,
        tls_files,
        tmp_path / "server.log",
        spool,
        "async",
        METASTORE_SPOOL_MAX_BYTES=str(1 << 20),
        METASTORE_ASYNC_QUEUE_FULL="reject",
    )
    tag = uuid.uuid4().hex[:8]
    run_ids = [f"{tag}-{i}" for i in range(600)]
    try:
        with server.client() as http:
            for run_id in run_ids:
                body = event(run_id)
                body["run"]["facets"] = {
                    "pad": {"_producer": "t", "_schemaURL": "https://example.com/s", "p": "x" * 2400}
                }
                answer = http.post("/api/v1/lineage", json=body)
                assert answer.status_code == 202, (run_id, answer.text)
        assert wait_stored(database, tag, set(run_ids)) == set(run_ids)
    finally:
        assert server.stop() == 0, server.log.read_text()
