"""`make soak`: sustained load for minutes with faults in the middle, the service under a
supervisor that restarts it. Counts every 2xx the clients received and every row stored.

Timeline (fractions of --minutes): 0.08 PostgreSQL restart (fast stop, start), 0.16 PostgreSQL
paused (SIGSTOP of every server process for 5 s), 0.25 a poison event (valid, but 40,000 input
datasets: more than the writers' 2 s deadline) and a long lock (the owner holds metastore.datasets
in ACCESS EXCLUSIVE mode for 14 s while 500 events of 60 KB arrive), 0.4 the floods of
bench/floods.py, shortened (a minute or so), 0.9 SIGTERM of the service (the supervisor starts it again on the
same port). Run in sync mode, async mode, and async mode with a spool (METASTORE_SPOOL_DIR; after
the run the service is started once more on it, as a restarted pod would be, to store what it
kept). The spool run has two faults more: at 0.7 its file system is full for 5 s (a tmpfs filled
by a ballast file where mounting works here, else a file-size limit on the service), and at its
SIGTERM, between the stop and the start, a segment of 20 events of its own, two of them with a
byte changed, is put into the spool (its 18 intact events must be stored, the two damaged ones
kept in quarantine). Reports, per run, requests, acknowledged, missing (acknowledged and not
stored: must be 0), 503s and the service's peak RSS. Loopback only; bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench import floods
from devtools.localpg import LocalPostgres, free_port, provision
from metastore.spool import Spool
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.disks import FillableDisk, fillable_disk, piped_log
from tests.support.servers import Server, service_env, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent


class Supervisor:
    """Keeps one service process running on a fixed port, as Kubernetes would."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.exit_codes: list[int] = []
        self.before_restart: Callable[[], None] | None = None  # run once, between a stop and the next start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        # Through a pipe: a file-size limit on the service (a full spool disk) must not stop its log.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "metastore", "serve"],
            env={**self.env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        piped_log(self.process, self.log)

    def _watch(self) -> None:
        while not self._stop.is_set():
            if self.process is not None and self.process.poll() is not None:
                self.exit_codes.append(self.process.returncode)
                self.restarts += 1
                hook, self.before_restart = self.before_restart, None
                if hook is not None:
                    hook()
                self._spawn()
            time.sleep(0.05)

    def terminate(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self.exit_codes.append(self.process.returncode)


class PeakRss:
    """The service's peak resident memory across its restarts: VmRSS sampled, and VmHWM."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            process = self.supervisor.process
            if process is not None:
                try:
                    text = Path(f"/proc/{process.pid}/status").read_text()
                except OSError:
                    text = ""
                for line in text.splitlines():
                    if line.startswith(("VmRSS:", "VmHWM:")):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
            time.sleep(0.05)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak_kb / 1024, 1)


def poison_event(run_id: str, datasets: int = 40_000) -> bytes:
    """Valid JSON and a valid event, but storing its datasets takes seconds (several times the
    writers' 2 s deadline here): the writers must set it aside, not retry their batch forever."""
    event = floods.event(run_id)
    event["inputs"] = [{"namespace": "trino://poison:8080", "name": f"p.s{i // 1000}.t{i}"} for i in range(datasets)]
    return json.dumps(event).encode()


def run_floods(url: str, ca: Path, supervisor: Supervisor) -> list[dict[str, Any]]:
    """The floods of bench/floods.py, shortened; what their clients saw, beside the soak's clients."""
    assert supervisor.process is not None
    target = floods.Target(url, ca, supervisor.process.pid)
    plan = [
        lambda: floods.slow_uploads(target, n=12, max_s=20),
        lambda: floods.gzip_bombs(target, n=8),
        lambda: floods.idle_connections(target, n=1100, raw=500, hold_s=3),
        lambda: floods.made_up_methods(target, n=500, scrapes=10),
        lambda: floods.slowloris(target, n=50, every_s=2, max_s=20),
    ]
    out = []
    for flood in plan:
        try:
            result = asyncio.run(flood())
        except Exception as exc:  # a flood's own failure is a finding, not a crash of the soak
            out.append({"error": repr(exc)})
            continue
        keep = ("flood", "params", "seconds", "clients", "legit_during", "legit_after", "rss")
        out.append({k: result[k] for k in keep if k in result})
    return out


def spool_disk_full(url: str, verify: ssl.SSLContext, supervisor: Supervisor, disk: FillableDisk) -> dict[str, Any]:
    """The spool's file system full for 5 s: what /readyz said, and how soon it was ready again."""
    assert supervisor.process is not None
    pid = supervisor.process.pid
    said: dict[str, int] = {}
    with httpx.Client(base_url=url, verify=verify, timeout=5) as http:
        disk.fill(pid)
        try:
            for _ in range(5):
                time.sleep(1)
                status = http.get("/readyz").json().get("status", "?")
                said[status] = said.get(status, 0) + 1
        finally:
            disk.free(pid)
        freed = time.monotonic()
        ready_again: float | None = None
        while time.monotonic() - freed < 30:
            if http.get("/readyz").status_code == 200:
                ready_again = round(time.monotonic() - freed, 2)
                break
            time.sleep(0.2)
        failures = sum(
            float(line.split()[-1])
            for line in http.get("/metrics").text.splitlines()
            if line.startswith("metastore_spool_write_failures_total ")
        )
    return {"disk": disk.kind, "readyz_while_full": said, "ready_again_s": ready_again, "write_failures": failures}


def damaged_segment(spool_dir: Path, tag: str, count: int = 20, damaged: tuple[int, ...] = (6, 13)) -> list[str]:
    """Writes a segment of `count` events (with the service's own spool code, beside it) into
    spool_dir, with one byte of each `damaged` record's body changed; returns the run ids."""
    scratch = Path(tempfile.mkdtemp(prefix="soak-segment-"))
    spool = Spool(scratch, 1 << 30)
    spool.recover()
    run_ids = [f"{tag}-planted-{i}" for i in range(count)]

    async def write() -> list[Any]:
        return [await spool.append(json.dumps(floods.event(r)).encode(), r, "unauthenticated", None) for r in run_ids]

    tickets = asyncio.run(write())
    spool.close()
    (segment,) = scratch.glob("*.spool")
    data = bytearray(segment.read_bytes())
    for i in damaged:
        data[tickets[i].offset + tickets[i].length // 2] ^= 0x01
    # A number above the service's own segments: replayed after them.
    (spool_dir / "900000000000.spool").write_bytes(bytes(data))
    shutil.rmtree(scratch, ignore_errors=True)
    return run_ids


def run(
    name: str, mode: str, seconds: float, clients: int, work: Path, tls: TLSFiles, spool: bool = False
) -> dict[str, Any]:
    pg = LocalPostgres().start(durable=True)
    supervisor: Supervisor | None = None
    disk = fillable_disk(size_kb=512 << 10) if spool else None
    try:
        provision(pg, "soak")
        port = free_port()
        env = service_env(
            pg.dsn_for("metastore_service", "soak"),
            tls,
            port,
            METASTORE_INGEST_MODE=mode,
            METASTORE_DB_TIMEOUT_MS="2000",
            METASTORE_LOG_LEVEL="WARNING",
        )
        spool_dir = disk.path / "spool" if disk else work / "no-spool"
        if disk:
            env["METASTORE_SPOOL_DIR"] = str(spool_dir)
            env["METASTORE_SPOOL_MAX_BYTES"] = str(384 << 20)  # within the 512 MiB file system
        log = work / f"soak-{name}.log"
        supervisor = Supervisor(env, log)
        supervisor.start()
        rss = PeakRss(supervisor)
        url = f"https://localhost:{port}"
        assert supervisor.process is not None
        wait_until_serving(Server(supervisor.process, url, tls.ca, log), path="/readyz")
        ca = tls.ca
        verify = ssl.create_default_context(cafile=str(ca))

        tag = f"soak-{name}-{time.time_ns()}"
        lock = threading.Lock()
        acknowledged: set[str] = set()
        outcomes: dict[str, int] = {}
        timeline: list[tuple[float, str]] = []  # (time, outcome) of every request, for recovery times
        begin = time.monotonic()
        stop_at = begin + seconds

        def client(n: int) -> None:
            i = 0
            with httpx.Client(base_url=url, verify=verify, timeout=6) as http:
                while time.monotonic() < stop_at:
                    i += 1
                    run_id = f"{tag}-{n}-{i}"
                    event = {
                        "eventTime": "2024-05-01T12:00:00Z",
                        "eventType": "COMPLETE",
                        "producer": "soak",
                        "run": {"runId": run_id},
                        "job": {"namespace": "soak", "name": f"q{n}"},
                        "inputs": [{"namespace": "trino://soak:8080", "name": f"s.t{i % 50}"}],
                        "outputs": [{"namespace": "trino://soak:8080", "name": f"s.o{n}"}],
                    }
                    try:
                        code = http.post("/api/v1/lineage", json=event).status_code
                        outcome = str(code)
                    except httpx.TransportError as exc:
                        outcome = type(exc).__name__
                        time.sleep(0.05)
                    with lock:
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
                        timeline.append((time.monotonic() - begin, outcome))
                        if outcome in ("200", "201", "202"):
                            acknowledged.add(run_id)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        faults: list[dict[str, Any]] = []

        def at(fraction: float) -> None:
            time.sleep(max(0.0, begin + seconds * fraction - time.monotonic()))

        at(0.08)
        t0 = time.monotonic() - begin
        pg.stop("fast")
        pg.start(durable=True)
        faults.append(
            {"fault": "postgresql restart", "at_s": round(t0, 1), "ended_s": round(time.monotonic() - begin, 1)}
        )
        at(0.16)
        t0 = time.monotonic() - begin
        pg.signal_all(signal.SIGSTOP)
        time.sleep(5)
        pg.signal_all(signal.SIGCONT)
        faults.append(
            {"fault": "postgresql paused 5 s", "at_s": round(t0, 1), "ended_s": round(time.monotonic() - begin, 1)}
        )

        at(0.25)
        t0 = time.monotonic() - begin
        poison_id = f"poison-{tag}"
        poison: dict[str, Any] = {"run_id": poison_id}

        def send_poison() -> None:
            started = time.perf_counter()
            try:
                with httpx.Client(base_url=url, verify=verify, timeout=30) as http:
                    response = http.post("/api/v1/lineage", content=poison_event(poison_id), headers=floods.JSON)
                    poison["status"] = response.status_code
            except httpx.HTTPError as exc:
                poison["status"] = type(exc).__name__
            poison["answer_s"] = round(time.perf_counter() - started, 2)

        poisoner = threading.Thread(target=send_poison)
        poisoner.start()
        big_outcomes: dict[str, int] = {}

        def big(n: int) -> None:
            # Large events while the lock is held: they count like the others (acknowledged, missing).
            with httpx.Client(base_url=url, verify=verify, timeout=6) as http:
                for i in range(125):
                    run_id = f"{tag}-big-{n}-{i}"
                    try:
                        data = floods.padded_event(run_id, 60_000)
                        outcome = str(http.post("/api/v1/lineage", content=data, headers=floods.JSON).status_code)
                    except httpx.TransportError as exc:
                        outcome = type(exc).__name__
                    with lock:
                        big_outcomes[outcome] = big_outcomes.get(outcome, 0) + 1
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
                        timeline.append((time.monotonic() - begin, outcome))
                        if outcome in ("200", "201", "202"):
                            acknowledged.add(run_id)
                    time.sleep(0.1)

        with psycopg.connect(pg.dsn_for("metastore_owner", "soak")) as owner:
            owner.execute("LOCK TABLE metastore.datasets IN ACCESS EXCLUSIVE MODE")
            bigs = [threading.Thread(target=big, args=(n,)) for n in range(4)]
            for t in bigs:
                t.start()
            time.sleep(14)
            owner.rollback()
        lock_ended = time.monotonic()
        faults.append(
            {
                "fault": "poison event; datasets locked 14 s while 500 events of 60 KB arrive",
                "at_s": round(t0, 1),
                "ended_s": round(lock_ended - begin, 1),
            }
        )
        for t in bigs:
            t.join(120)
        poisoner.join(60)
        # How long after the lock every large event answered 2xx was stored (the writers caught up).
        with lock:
            big_acknowledged = {r for r in acknowledged if r.startswith(f"{tag}-big-")}
        caught_up: float | None = None
        while time.monotonic() - lock_ended < 90:
            with psycopg.connect(pg.dsn_for("metastore_owner", "soak")) as conn:
                rows = conn.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-big-%",))
                if big_acknowledged <= {r[0] for r in rows}:
                    caught_up = round(time.monotonic() - lock_ended, 1)
                    break
            time.sleep(0.5)
        long_lock = {"large_events": big_outcomes, "all_stored_s_after_lock": caught_up}

        at(0.4)
        t0 = time.monotonic() - begin
        flood_results = run_floods(url, ca, supervisor)
        faults.append({"fault": "floods", "at_s": round(t0, 1), "ended_s": round(time.monotonic() - begin, 1)})
        planted: list[str] = []
        if disk:
            at(0.7)
            t0 = time.monotonic() - begin
            full = spool_disk_full(url, verify, supervisor, disk)
            faults.append({"fault": "spool disk full 5 s", "at_s": round(t0, 1), "ended_s": round(t0 + 5, 1), **full})
            supervisor.before_restart = lambda: planted.extend(damaged_segment(spool_dir, tag))
        at(0.9)
        t0 = time.monotonic() - begin
        supervisor.terminate()
        faults.append(
            {
                "fault": "SIGTERM of the service"
                + (", a damaged spool segment put in before it starts" if disk else ""),
                "at_s": round(t0, 1),
                "ended_s": round(t0, 1),
            }
        )
        for t in threads:
            t.join(seconds + 60)
        supervisor.stop()

        for fault in faults:
            after = sorted(t for t, o in timeline if t >= fault["ended_s"] and o in ("200", "201", "202"))
            fault["recovered_after_s"] = round(after[0] - fault["ended_s"], 2) if after else None
            fault["non_2xx_during"] = sum(
                1 for t, o in timeline if fault["at_s"] <= t <= fault["ended_s"] + 10 and o not in ("200", "201", "202")
            )
        # Async mode: stored by the writers after the answer; give them a moment.
        time.sleep(2)

        def stored_ids() -> set[str]:
            with psycopg.connect(pg.dsn_for("metastore_owner", "soak")) as conn:
                rows = conn.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",))
                return {r[0] for r in rows}

        stored = stored_ids()
        missing_before_replay = len(acknowledged - stored)
        if spool and acknowledged - stored:
            # What the spool kept at the last SIGTERM: a restarted pod stores it.
            replay = Supervisor(env, work / f"soak-{name}-replay.log")
            replay.start()
            deadline = time.monotonic() + 60
            while acknowledged - stored and time.monotonic() < deadline:
                time.sleep(1)
                stored = stored_ids()
            replay.stop()
        rss_peak = rss.stop()
        memory = ROOT / "bench" / "results" / "memory.json"
        rss_bound = floods.bound_mb(json.loads(memory.read_text())["constants"], env) if memory.exists() else None
        with psycopg.connect(pg.dsn_for("metastore_owner", "soak")) as conn:
            poison["stored"] = bool(
                conn.execute("SELECT 1 FROM metastore.events WHERE run_id = %s", (poison_id,)).fetchone()
            )
            poison["set_aside"] = bool(
                conn.execute(
                    "SELECT 1 FROM metastore.rejected_events WHERE body_sha256 = %s OR body_prefix LIKE %s",
                    (hashlib.sha256(poison_event(poison_id)).digest(), f"%{poison_id}%"),
                ).fetchone()
            )
        missing = acknowledged - stored
        damaged_spool: dict[str, Any] | None = None
        if disk and not planted:
            damaged_spool = {"error": "not put in: the service was not restarted"}
        elif planted:
            with psycopg.connect(pg.dsn_for("metastore_owner", "soak")) as conn:
                rows = conn.execute("SELECT run_id FROM metastore.events WHERE run_id = ANY(%s)", (planted,))
                found = {r[0] for r in rows}
            intact = set(planted) - {planted[6], planted[13]}
            damaged_spool = {
                "events": len(planted),
                "damaged": 2,
                "intact_stored": len(intact & found),
                "damaged_stored": len(found - intact),
                "quarantined_files": len(list((spool_dir / "quarantine").glob("*.bad"))),
            }
        return {
            "run": name,
            "mode": mode,
            "spool": spool,
            "seconds": seconds,
            "clients": clients,
            "requests": sum(outcomes.values()),
            "outcomes": outcomes,
            "503s": outcomes.get("503", 0),
            "acknowledged": len(acknowledged),
            "stored": len(stored & acknowledged),
            "missing": len(missing),
            "missing_before_replay": missing_before_replay,
            "rss_peak_mb": rss_peak,
            "rss_bound_mb": rss_bound,
            "service_exit_codes": supervisor.exit_codes,
            "service_restarts": supervisor.restarts,
            "faults": faults,
            "poison": poison,
            "long_lock": long_lock,
            "floods": flood_results,
            "damaged_spool_segment": damaged_spool,
        }
    finally:
        if supervisor is not None:
            supervisor.stop()  # after a failure: no service left running (a second stop does nothing)
        pg.cleanup()
        if disk:
            disk.close()


def main() -> int:
    parser = argparse.ArgumentParser(description="sustained load with faults")
    parser.add_argument("--minutes", type=float, default=3.5, help="per run (three runs)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="metastore-soak-"))
    tls = write_tls_files(work)
    runs = [("sync", "sync", False), ("async", "async", False), ("async-spool", "async", True)]
    results = [run(name, mode, args.minutes * 60, args.clients, work, tls, spool) for name, mode, spool in runs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    lost = sum(r["missing"] for r in results)
    if lost:
        print(f"soak: {lost} acknowledged events are not stored", file=sys.stderr)
    spooled = [r["damaged_spool_segment"] for r in results if r["damaged_spool_segment"]]
    bad_replay = [
        d for d in spooled if "error" in d or d["intact_stored"] != d["events"] - d["damaged"] or d["damaged_stored"]
    ]
    if bad_replay:
        print(f"soak: a damaged spool segment was not replayed as it should be: {bad_replay}", file=sys.stderr)
    return 1 if lost or bad_replay else 0


if __name__ == "__main__":
    raise SystemExit(main())
