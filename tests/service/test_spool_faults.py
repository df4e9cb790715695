"""The spool where it meets the disk: a file system that fills (a small tmpfs where this machine
lets us mount one, else a file-size limit on the service), a SIGKILL while appending under load,
and bytes changed on disk between a stop and a start or while the service runs. For each, every
event answered 2xx is stored exactly once afterwards; what could not be written was refused, not
acknowledged; a damaged record costs that record alone, and its bytes are kept in quarantine.

The service runs as its own login role (the service DSN); the checks read metastore.events as
the owner, as a DBA would."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.disks import FillableDisk, fillable_disk, piped_log
from tests.support.events import run_event
from tests.support.eventually import eventually
from tests.support.servers import ROOT, Server, free_port, service_env, wait_until_serving

ACKNOWLEDGED = (200, 201, 202)


def event(run_id: str, pad: int = 0) -> dict[str, Any]:
    ev = run_event(run_id, namespace="spool-faults")
    if pad:
        ev["run"]["facets"] = {"pad": {"_producer": "tests", "_schemaURL": "https://example.com/s", "pad": "x" * pad}}
    return ev


def launch(database: Database, tls: TLSFiles, log: Path, spool: Path, **env: str) -> Server:
    """The service in async mode with its spool in `spool`, its output through a pipe."""
    port = free_port()
    settings = {
        "METASTORE_INGEST_MODE": "async",
        "METASTORE_SPOOL_DIR": str(spool),
        "METASTORE_DB_TIMEOUT_MS": "1000",
        "METASTORE_INGEST_TIMEOUT_MS": "300",
        "PYTHONUNBUFFERED": "1",
    }
    environ = service_env(database.service_dsn, tls, port, **{**settings, **env})
    process = subprocess.Popen(
        [sys.executable, "-m", "metastore", "serve"],
        env=environ,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    piped_log(process, log)
    server = Server(process, f"https://localhost:{port}", tls.ca, log)
    try:
        wait_until_serving(server)
    except BaseException:
        server.stop(signal.SIGKILL)
        raise
    return server


def counts(db: Database, tag: str) -> collections.Counter[str]:
    """How many times each run id of this test is stored."""
    with psycopg.connect(db.owner_dsn) as conn:
        rows = conn.execute(
            "SELECT run_id, count(*) FROM metastore.events WHERE run_id LIKE %s GROUP BY run_id", (f"{tag}-%",)
        ).fetchall()
    return collections.Counter({r[0]: r[1] for r in rows})


def wait_stored(db: Database, tag: str, expected: set[str], timeout: float = 45) -> collections.Counter[str]:
    """How many times each run id of this test is stored, once every one expected is."""

    def complete() -> tuple[collections.Counter[str]] | None:
        got = counts(db, tag)
        return (got,) if expected <= set(got) else None

    return eventually(complete, timeout=timeout, interval=0.3, what=f"the {len(expected)} events expected stored")[0]


def metric(server: Server, name: str) -> float:
    total = 0.0
    for line in server.metrics().splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
            total += float(line.split()[-1])
    return total


def wait_log(server: Server, text: str, timeout: float = 5) -> bool:
    return eventually(
        lambda: any(text in line for line in server.log_lines()),
        timeout,
        interval=0.1,
        what=f"a log line with {text!r}",
    )


def stop_quietly(server: Server, db: Database) -> None:
    """SIGTERM, and wait until none of the service's statements is left in the database: one
    still waiting for the lock would store what it had read from the spool once the lock goes."""
    assert server.stop() == 0, server.log.read_text()
    deadline = time.monotonic() + 15
    with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = %s",
            ("metastore_service",),
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, "the stopped service's sessions are still there"
            time.sleep(0.1)


def boundary(data: bytes, run_id: str) -> int:
    """Where the record holding run_id starts: just after the end of the event before it."""
    return data.rindex(b"}]}", 0, data.index(f'"{run_id}"'.encode())) + 3


def level(server: Server, text: str) -> list[str]:
    """The levels of the log lines that say text."""
    return [json.loads(x)["levelname"] for x in server.log_lines() if text in x]


@pytest.fixture(params=["tmpfs", "file size limit"])
def disk(request: pytest.FixtureRequest) -> Iterator[FillableDisk]:
    """A small tmpfs where this machine lets us mount one (else a file-size limit), or a
    file-size limit: both always run, whatever happens in the test."""
    fillable = fillable_disk(prefer=request.param)
    try:
        yield fillable
    finally:
        fillable.close()


class Poster:
    """Posts distinct events, remembering which were acknowledged (2xx)."""

    def __init__(self, server: Server, tag: str, pad: int = 1500) -> None:
        self.server, self.tag, self.pad = server, tag, pad
        self.acknowledged: set[str] = set()
        self.answers: list[tuple[str, int, str]] = []
        self._n = 0

    def post(self, count: int, label: str) -> list[int]:
        statuses = []
        with self.server.client() as http:
            for _ in range(count):
                self._n += 1
                run_id = f"{self.tag}-{label}-{self._n}"
                response = http.post("/api/v1/lineage", json=event(run_id, self.pad))
                statuses.append(response.status_code)
                self.answers.append((run_id, response.status_code, response.text))
                if response.status_code in ACKNOWLEDGED:
                    self.acknowledged.add(run_id)
        return statuses


def assert_exactly_once(got: collections.Counter[str], acknowledged: set[str]) -> None:
    missing = acknowledged - set(got)
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged events are not stored: {sorted(missing)}"
    twice = {k: v for k, v in got.items() if v != 1}
    assert not twice, f"stored more than once: {twice}"


def test_a_full_disk_refuses_what_it_cannot_write_and_a_restart_stores_all_it_acknowledged(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any], disk: FillableDisk
) -> None:
    spool = disk.path / "spool"
    tag = uuid.uuid4().hex[:8]
    server = launch(
        database,
        tls_files,
        tmp_path / "first.log",
        spool,
        METASTORE_ASYNC_QUEUE_FULL="reject",
        METASTORE_SPOOL_MAX_BYTES=str(1 << 20),
    )
    try:
        poster = Poster(server, tag)
        assert poster.post(5, "before") == [202] * 5
        disk.fill(server.process.pid)
        statuses = poster.post(12, "full")
        refused = [(s, text) for _, s, text in poster.answers[5:] if s not in ACKNOWLEDGED]
        # Whatever still fit was written whole (202); the rest was refused, and said why.
        assert len(refused) >= 3, (disk.kind, statuses)
        assert all(s == 503 and "the spool cannot write" in text for s, text in refused), refused
        with server.client() as http:
            ready = http.get("/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["status"] == "spool unwritable", ready.text
        assert any(e in ready.json()["reason"] for e in ("No space left on device", "File too large")), ready.text
        assert metric(server, "metastore_spool_writable") == 0
        assert metric(server, "metastore_spool_write_failures_total") >= 3
        assert metric(server, 'metastore_http_refused_total{reason="spool_unwritable"}') >= 3
        assert wait_log(server, "the spool cannot write")
        assert level(server, "the spool cannot write") == ["ERROR"]  # once, not per refused event

        disk.free(server.process.pid)
        deadline = time.monotonic() + 10
        with server.client() as http:  # the readiness probe's own write finds the room again
            while http.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "still unready after the disk had room again"
                time.sleep(0.3)
        assert metric(server, "metastore_spool_writable") == 1
        assert poster.post(20, "after") == [202] * 20
        assert wait_log(server, "the spool writes again")
        assert level(server, "the spool writes again") == ["WARNING"]
    finally:
        server.stop(signal.SIGKILL)
    locked_events.rollback()

    again = launch(database, tls_files, tmp_path / "second.log", spool)
    try:
        got = wait_stored(database, tag, poster.acknowledged)
        assert_exactly_once(got, poster.acknowledged)
        # The refused events were undone, not left half-written: nothing else is stored, and
        # the restart found no damage in the spool.
        assert set(got) == poster.acknowledged, (disk.kind, set(got) - poster.acknowledged)
        assert not (spool / "quarantine").exists()
        assert metric(again, "metastore_spool_quarantined_total") == 0
    finally:
        assert again.stop() == 0, again.log.read_text()


def test_a_full_disk_with_the_database_up_stores_at_once_and_the_writers_keep_storing(
    database: Database, tls_files: TLSFiles, tmp_path: Path, disk: FillableDisk
) -> None:
    """No restart: the writers read back exactly what was acknowledged, before and after the
    failed writes; while the spool cannot write, the queue-full policy (`sync`) stores at once."""
    spool = disk.path / "spool"
    tag = uuid.uuid4().hex[:8]
    server = launch(database, tls_files, tmp_path / "server.log", spool, METASTORE_SPOOL_MAX_BYTES=str(1 << 20))
    try:
        poster = Poster(server, tag)
        assert poster.post(5, "before") == [202] * 5
        disk.fill(server.process.pid)
        statuses = poster.post(12, "full")
        assert set(statuses) <= {201, 202}, statuses
        assert statuses.count(201) >= 3, (disk.kind, statuses)  # stored within the budget instead
        with server.client() as http:
            assert http.get("/readyz").json()["status"] == "spool unwritable"
        disk.free(server.process.pid)
        deadline = time.monotonic() + 10
        with server.client() as http:
            while http.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "still unready after the disk had room again"
                time.sleep(0.3)
        assert poster.post(20, "after") == [202] * 20
        got = wait_stored(database, tag, poster.acknowledged)
        assert_exactly_once(got, poster.acknowledged)
        assert set(got) == poster.acknowledged
        assert metric(server, "metastore_events_total") == len(poster.acknowledged)
        assert not any("damaged" in line for line in server.log_lines())
    finally:
        assert server.stop() == 0, server.log.read_text()
    assert not any(p.stat().st_size for p in spool.glob("*.spool"))  # all released once stored


def kill_mid_write(server: Server, spool: Path, jump: int, timeout: float = 20) -> bool:
    """SIGKILLs the service as soon as a segment grows by `jump` bytes between two looks: in the
    middle of writing a large record (True), or at the timeout (False)."""
    sizes: dict[Path, int] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in spool.glob("*.spool"):
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size - sizes.get(path, size) >= jump:
                server.process.send_signal(signal.SIGKILL)
                return True
            sizes[path] = size
    server.process.send_signal(signal.SIGKILL)
    return False


def test_sigkill_while_appending_under_load_loses_nothing_acknowledged(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    """Services in turn, each SIGKILLed in the middle of writing a 12 MB event while six other
    clients post 64 KB events (at least three times, and until a kill has cut a record short); the
    events stay in the spool (the table is locked) until the last service stores them."""
    spool = tmp_path / "spool"
    tag = uuid.uuid4().hex[:8]
    acknowledged: set[str] = set()
    lock = threading.Lock()
    slow_db = {"METASTORE_DB_TIMEOUT_MS": "30000"}  # large events take their time to store
    server = launch(database, tls_files, tmp_path / "round-0.log", spool, **slow_db)
    # The service running when something fails is killed, so that no test leaves one behind.
    servers = [server]
    try:
        cut_short, kills = 0, 0
        while kills < 3 or (cut_short == 0 and kills < 20):
            stop = threading.Event()

            def client(n: int, pad: int, server: Server = server, stop: threading.Event = stop, r: int = kills) -> None:
                i = 0
                with server.client(timeout=10) as http:
                    while not stop.is_set():
                        i += 1
                        run_id = f"{tag}-{r}-{n}-{i}"
                        try:
                            status = http.post("/api/v1/lineage", json=event(run_id, pad)).status_code
                        except httpx.TransportError:
                            return
                        if status in ACKNOWLEDGED:
                            with lock:
                                acknowledged.add(run_id)

            threads = [threading.Thread(target=client, args=(n, 64_000)) for n in range(6)]
            threads.append(threading.Thread(target=client, args=(6, 12_000_000)))
            for t in threads:
                t.start()
            time.sleep(1.0)
            if kills == 0:
                # Appends arriving together share one write and one fsync.
                accepted = metric(server, 'metastore_events_accepted_total{into="spool"}')
                fsyncs = metric(server, "metastore_spool_fsync_duration_seconds_count")
                assert 0 < fsyncs < accepted, (fsyncs, accepted)
            assert kill_mid_write(server, spool, jump=256 << 10), "no large write was seen"
            kills += 1
            server.process.wait(10)
            stop.set()
            for t in threads:
                t.join(15)
            server = launch(database, tls_files, tmp_path / f"round-{kills}.log", spool, **slow_db)
            servers.append(server)
            # A record cut short by the kill was never acknowledged, and is no damage.
            cut_short += sum("cut short at its end" in line for line in server.log_lines())
            assert not any("damaged bytes" in line for line in server.log_lines())
        assert cut_short >= 1, f"none of {kills} kills cut a record short"
    except BaseException:
        servers[-1].stop(signal.SIGKILL)
        raise
    locked_events.rollback()
    try:
        assert len(acknowledged) > 50
        got = wait_stored(database, tag, acknowledged, timeout=120)
        assert_exactly_once(got, acknowledged)
    finally:
        assert server.stop() == 0, server.log.read_text()


def flip(path: Path, at: int, mask: int, length: int = 1) -> None:
    """XORs one byte with mask; with mask 0, sets length bytes to zero."""
    data = bytearray(path.read_bytes())
    for i in range(at, at + length):
        data[i] = data[i] ^ mask if mask else 0
    path.write_bytes(bytes(data))


def test_bytes_changed_on_disk_between_a_stop_and_a_start_cost_those_records_alone(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    spool = tmp_path / "spool"
    tag = uuid.uuid4().hex[:8]
    server = launch(database, tls_files, tmp_path / "first.log", spool, METASTORE_SHUTDOWN_GRACE_S="1")
    poster = Poster(server, tag, pad=200)
    try:
        assert poster.post(14, "e") == [202] * 14
    finally:
        stop_quietly(server, database)
    ids = [r for r, _, _ in poster.answers]
    (segment,) = spool.glob("*.spool")
    data = segment.read_bytes()

    def digit(run_id: str) -> int:  # the last character of its run id: a different, valid run id if read
        return data.index(f'"{run_id}"'.encode()) + len(run_id)

    flip(segment, digit(ids[2]), 0x40)  # one byte of the third record's body
    flip(segment, boundary(data, ids[7]) - 30, 0, 60)  # zeros across the end of the 7th record and the 8th's header
    flip(segment, boundary(data, ids[10]), 0, 4)  # the 11th record's first bytes
    flip(segment, digit(ids[13]), 0x40)  # the last record: whole in length, so damage, not a torn write
    damaged = {ids[2], ids[6], ids[7], ids[10], ids[13]}
    locked_events.rollback()

    again = launch(database, tls_files, tmp_path / "second.log", spool)
    try:
        intact = set(ids) - damaged
        got = wait_stored(database, tag, intact)
        assert_exactly_once(got, intact)
        # Nothing else: a damaged record is not stored as something else.
        assert set(got) == intact, set(got) - intact
        kept = sorted((spool / "quarantine").glob("*.bad"))
        assert len(kept) == 4, kept
        quarantined = b"".join(p.read_bytes() for p in kept)
        assert all(f'"{r}"'.encode() in quarantined for r in (ids[6], ids[7], ids[10])), kept
        assert metric(again, 'metastore_spool_quarantined_total{damage="corrupt"}') == 4
        assert metric(again, "metastore_spool_quarantine_bytes") == sum(p.stat().st_size for p in kept)
        errors = [json.loads(x) for x in again.log_lines() if "damaged bytes" in x]
        assert len(errors) == 4 and {e["levelname"] for e in errors} == {"ERROR"}, errors
        assert sum("records lost: 1 " in e["message"] for e in errors) == 2, errors
        assert sum("records lost: 2 " in e["message"] for e in errors) == 1, errors
        with again.client() as http:  # the spool takes new events after it
            assert http.post("/api/v1/lineage", json=event(f"{tag}-new")).status_code == 202
        assert wait_stored(database, tag, {f"{tag}-new"})[f"{tag}-new"] == 1
    finally:
        assert again.stop() == 0, again.log.read_text()


def test_a_record_damaged_while_the_service_runs_is_set_aside_alone(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    spool = tmp_path / "spool"
    tag = uuid.uuid4().hex[:8]
    server = launch(database, tls_files, tmp_path / "server.log", spool)
    try:
        poster = Poster(server, tag, pad=200)
        assert poster.post(6, "e") == [202] * 6
        ids = [r for r, _, _ in poster.answers]
        (segment,) = spool.glob("*.spool")
        flip(segment, segment.read_bytes().index(f'"{ids[1]}"'.encode()) + len(ids[1]), 0x40)
        # The writers, held by the lock, read the queued records again at each retry: the damaged
        # one is found, set aside, and never sent.
        assert wait_log(server, "is damaged in the spool", timeout=20)
        locked_events.rollback()
        expected = set(ids) - {ids[1]}
        got = wait_stored(database, tag, expected)
        assert set(got) == expected and set(got.values()) == {1}, got
        assert len(list((spool / "quarantine").glob("*.bad"))) == 1
        assert metric(server, 'metastore_spool_quarantined_total{damage="corrupt"}') == 1
        assert poster.post(3, "after") == [202] * 3  # the writers go on
        expected = poster.acknowledged - {ids[1]}
        assert set(wait_stored(database, tag, expected)) == expected
    finally:
        assert server.stop() == 0, server.log.read_text()


def frame(payload: bytes, seq: int) -> bytes:
    """A record as the spool writes it (service/metastore/spool.py)."""
    head = b"\xffMS2%016x%08x%08x" % (seq, len(payload), zlib.crc32(payload))
    return head + b"%08x" % zlib.crc32(head) + payload


def test_a_record_forged_inside_an_event_is_never_replayed(
    database: Database, tls_files: TLSFiles, tmp_path: Path, locked_events: psycopg.Connection[Any]
) -> None:
    """A client's body holding a well-formed spool record (with a made-up source) stays one body,
    even when the record that holds it is damaged and the spool looks for the next one."""
    spool = tmp_path / "spool"
    tag = uuid.uuid4().hex[:8]
    forged_id = f"{tag}-forged"
    meta = json.dumps({"r": "forged", "k": "authenticated", "p": "CN=admin"}).encode()
    forged = frame(meta + b"\n" + json.dumps(event(forged_id)).encode(), 2)
    server = launch(database, tls_files, tmp_path / "first.log", spool, METASTORE_SHUTDOWN_GRACE_S="1")
    try:
        poster = Poster(server, tag, pad=0)
        assert poster.post(1, "e") == [202]
        with server.client() as http:
            assert http.post("/api/v1/lineage", content=b'{"x": "' + forged + b'"}').status_code == 202
        assert poster.post(1, "e") == [202]
    finally:
        stop_quietly(server, database)
    (segment,) = spool.glob("*.spool")
    data = segment.read_bytes()
    hostile = data.rindex(b"}]}", 0, data.index(b'{"x": "')) + 3
    flip(segment, hostile, 0, 10)  # the start of the hostile record
    locked_events.rollback()

    again = launch(database, tls_files, tmp_path / "second.log", spool)
    try:
        got = wait_stored(database, tag, poster.acknowledged)
        assert set(got) == poster.acknowledged, got  # and not the forged event
        assert wait_log(again, "damaged bytes")
    finally:
        assert again.stop() == 0, again.log.read_text()
