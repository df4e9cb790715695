"""`make soak`: sustained load for minutes with faults in the middle, the service under a
supervisor that restarts it. Counts every 2xx the clients received and every row stored.

Timeline (fractions of --minutes): 0.08 PostgreSQL restart (fast stop, start), 0.16 PostgreSQL
paused (SIGSTOP of every server process for 5 s), 0.25 a poison event (valid, but 40,000 input
datasets: more than the writers' 2 s deadline) and a long lock (the owner holds metastore.datasets
in ACCESS EXCLUSIVE mode for 14 s while 500 events of 60 KB arrive), 0.4 the floods of
bench/floods.py, shortened (a minute or so), then for 25 s 20 readers of GET /api/v1/events that
read 4 KiB and stop (the feed's deadline, 10 s here, cuts them) while 10 events of 60,000 x 1e308
are posted (each must be refused, 54M01, at the POST or by the writers, and none stored), 0.9
SIGTERM of the service (the supervisor starts it again on the same port). Run in sync mode, async
mode, and async mode with a spool (METASTORE_SPOOL_DIR; after the run the service is started once
more on it, as a restarted pod would be, to store what it kept). The spool run has two faults
more: at 0.7 its file system is full for 5 s (a tmpfs filled by a ballast file where mounting
works here, else a file-size limit on the service), and at its SIGTERM, between the stop and the
start, a segment of 20 events of its own, two of them with a byte changed, is put into the spool
(its 18 intact events must be stored, the two damaged ones kept in quarantine). Reports, per run,
requests, acknowledged, missing (acknowledged and not stored: must be 0), 503s and the service's
peak RSS. Loopback only; bounded in time.
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
from bench.common import emit
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


def large_number_event(run_id: str) -> bytes:
    """60,000 x 1e308 in one event: 360 KB sent, 18.6 MB of text as stored (1e308 prints as 309
    digits). Refused (54M01): at the POST in sync mode, by the writers (recorded) when queued."""
    text = json.dumps(floods.event(run_id))
    return text.replace('"run": {', '"run": {"stats": [' + ",".join(["1e308"] * 60_000) + "], ", 1).encode()


def readers_and_large_numbers(
    url: str, ca: Path, verify: ssl.SSLContext, tag: str, readers: int = 20, seconds: float = 25, events: int = 10
) -> dict[str, Any]:
    """Readers of GET /api/v1/events (NDJSON and JSON pages) that read 4 KiB and stop, for `seconds`,
    while `events` large-number events are posted; then whether the feed still serves a page."""
    target = floods.Target(url, ca, 0)
    seen = floods.Seen()
    posted: dict[str, int] = {}
    run_ids = [f"{tag}-numbers-{i}" for i in range(events)]

    async def post_one(http: httpx.AsyncClient, run_id: str) -> str:
        """The final answer: a 503 (judging 18.6 MB of text may miss the ingest budget on a loaded
        machine) is sent again after its Retry-After, up to 5 tries in all."""
        outcome = ""
        for _ in range(5):
            try:
                r = await http.post("/api/v1/lineage", content=large_number_event(run_id), headers=floods.JSON)
            except httpx.HTTPError as exc:
                return type(exc).__name__
            code = r.json().get("error", {}).get("code", "") if r.status_code >= 400 else ""
            outcome = f"{r.status_code} {code}".strip()
            if r.status_code != 503:
                break
            posted["503 on a try"] = posted.get("503 on a try", 0) + 1
            await asyncio.sleep(float(r.headers.get("retry-after", "1")))
        return outcome

    async def post_all() -> None:
        async with target.client(timeout=30) as http:
            for run_id in run_ids:
                outcome = await post_one(http, run_id)
                posted[outcome] = posted.get(outcome, 0) + 1
                await asyncio.sleep(0.5)

    async def both() -> None:
        stop_at = time.monotonic() + seconds
        hold_s = seconds  # beyond the feed's deadline: the service cuts them
        await asyncio.gather(
            post_all(),
            *(floods.stalled_reader(target, seen, stop_at, k % 2 == 0, hold_s) for k in range(readers)),
        )

    asyncio.run(both())
    with httpx.Client(base_url=url, verify=verify, timeout=10) as http:
        page = http.get("/api/v1/events", params={"limit": 5}).status_code
    return {
        "stalled_readers": readers,
        "readers": seen.report()["outcomes"],
        "large_number_events": posted,
        "feed_page_after": page,
        "run_ids": run_ids,
    }


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


OK = ("200", "201", "202")


class Soak:
    """One run: a service under its supervisor, clients posting until the end, the faults in turn,
    then the tally of what was acknowledged against what is stored."""

    def __init__(self, name: str, mode: str, seconds: float, clients: int, work: Path, tls: TLSFiles, spool: bool):
        self.name, self.mode, self.seconds, self.clients, self.work, self.spool = (
            name,
            mode,
            seconds,
            clients,
            work,
            spool,
        )
        self.pg = LocalPostgres().start(durable=True)
        self.supervisor: Supervisor | None = None
        self.disk = fillable_disk(size_kb=512 << 10) if spool else None
        self.tls = tls
        self.tag = f"soak-{name}-{time.time_ns()}"
        self.lock = threading.Lock()
        self.acknowledged: set[str] = set()
        self.outcomes: dict[str, int] = {}
        self.timeline: list[tuple[float, str]] = []  # (time, outcome) of every request, for recovery times
        self.faults: list[dict[str, Any]] = []
        self.begin = self.stop_at = 0.0

    def owner(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.pg.dsn_for("metastore_owner", "soak"))

    def start_service(self) -> None:
        provision(self.pg, "soak")
        port = free_port()
        self.env = service_env(
            self.pg.dsn_for("metastore_service", "soak"),
            self.tls,
            port,
            METASTORE_INGEST_MODE=self.mode,
            METASTORE_DB_TIMEOUT_MS="2000",
            METASTORE_LOG_LEVEL="WARNING",
            # Readers that stop reading are cut while the soak runs.
            METASTORE_FEED_DEADLINE_S="10",
        )
        self.spool_dir = self.disk.path / "spool" if self.disk else self.work / "no-spool"
        if self.disk:
            self.env["METASTORE_SPOOL_DIR"] = str(self.spool_dir)
            self.env["METASTORE_SPOOL_MAX_BYTES"] = str(384 << 20)  # within the 512 MiB file system
        log = self.work / f"soak-{self.name}.log"
        self.supervisor = Supervisor(self.env, log)
        self.supervisor.start()
        self.rss = PeakRss(self.supervisor)
        self.url = f"https://localhost:{port}"
        assert self.supervisor.process is not None
        wait_until_serving(Server(self.supervisor.process, self.url, self.tls.ca, log), path="/readyz")
        self.verify = ssl.create_default_context(cafile=str(self.tls.ca))

    def record(self, run_id: str, outcome: str, also: dict[str, int] | None = None) -> None:
        with self.lock:
            for counts in (self.outcomes, also) if also is not None else (self.outcomes,):
                counts[outcome] = counts.get(outcome, 0) + 1
            self.timeline.append((time.monotonic() - self.begin, outcome))
            if outcome in OK:
                self.acknowledged.add(run_id)

    def client(self, n: int) -> None:
        i = 0
        with httpx.Client(base_url=self.url, verify=self.verify, timeout=6) as http:
            while time.monotonic() < self.stop_at:
                i += 1
                run_id = f"{self.tag}-{n}-{i}"
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
                    outcome = str(http.post("/api/v1/lineage", json=event).status_code)
                except httpx.TransportError as exc:
                    outcome = type(exc).__name__
                    time.sleep(0.05)
                self.record(run_id, outcome)

    def now(self) -> float:
        return time.monotonic() - self.begin

    def at(self, fraction: float) -> float:
        """Waits for `fraction` of the run; the time it is then."""
        time.sleep(max(0.0, self.begin + self.seconds * fraction - time.monotonic()))
        return self.now()

    def fault(self, what: str, at_s: float, ended_s: float | None = None, **more: Any) -> None:
        ended = self.now() if ended_s is None else ended_s
        self.faults.append({"fault": what, "at_s": round(at_s, 1), "ended_s": round(ended, 1), **more})

    def postgres_faults(self) -> None:
        t0 = self.at(0.08)
        self.pg.stop("fast")
        self.pg.start(durable=True)
        self.fault("postgresql restart", t0)
        t0 = self.at(0.16)
        self.pg.signal_all(signal.SIGSTOP)
        time.sleep(5)
        self.pg.signal_all(signal.SIGCONT)
        self.fault("postgresql paused 5 s", t0)

    def send_poison(self, poison: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            with httpx.Client(base_url=self.url, verify=self.verify, timeout=30) as http:
                body = poison_event(poison["run_id"])
                poison["status"] = http.post("/api/v1/lineage", content=body, headers=floods.JSON).status_code
        except httpx.HTTPError as exc:
            poison["status"] = type(exc).__name__
        poison["answer_s"] = round(time.perf_counter() - started, 2)

    def big(self, n: int, counts: dict[str, int]) -> None:
        # Large events while the lock is held: they count like the others (acknowledged, missing).
        with httpx.Client(base_url=self.url, verify=self.verify, timeout=6) as http:
            for i in range(125):
                run_id = f"{self.tag}-big-{n}-{i}"
                try:
                    data = floods.padded_event(run_id, 60_000)
                    outcome = str(http.post("/api/v1/lineage", content=data, headers=floods.JSON).status_code)
                except httpx.TransportError as exc:
                    outcome = type(exc).__name__
                self.record(run_id, outcome, counts)
                time.sleep(0.1)

    def poison_and_lock(self) -> tuple[dict[str, Any], dict[str, Any]]:
        t0 = self.at(0.25)
        poison: dict[str, Any] = {"run_id": f"poison-{self.tag}"}
        poisoner = threading.Thread(target=self.send_poison, args=(poison,))
        poisoner.start()
        big_outcomes: dict[str, int] = {}
        with self.owner() as owner:
            owner.execute("LOCK TABLE metastore.datasets IN ACCESS EXCLUSIVE MODE")
            bigs = [threading.Thread(target=self.big, args=(n, big_outcomes)) for n in range(4)]
            for t in bigs:
                t.start()
            time.sleep(14)
            owner.rollback()
        lock_ended = time.monotonic()
        self.fault("poison event; datasets locked 14 s while 500 events of 60 KB arrive", t0, lock_ended - self.begin)
        for t in bigs:
            t.join(120)
        poisoner.join(60)
        return poison, {"large_events": big_outcomes, "all_stored_s_after_lock": self.caught_up(lock_ended)}

    def caught_up(self, since: float) -> float | None:
        """How long after `since` every large event answered 2xx was stored (the writers caught up)."""
        with self.lock:
            wanted = {r for r in self.acknowledged if r.startswith(f"{self.tag}-big-")}
        while time.monotonic() - since < 90:
            if wanted <= self.stored_ids(f"{self.tag}-big-%"):
                return round(time.monotonic() - since, 1)
            time.sleep(0.5)
        return None

    def stored_ids(self, pattern: str | None = None) -> set[str]:
        with self.owner() as conn:
            rows = conn.execute(
                "SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (pattern or f"{self.tag}-%",)
            )
            return {r[0] for r in rows}

    def service_faults(self) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
        """The floods, the stalled feed readers, the spool's full disk, the SIGTERM."""
        assert self.supervisor is not None
        t0 = self.at(0.4)
        flood_results = run_floods(self.url, self.tls.ca, self.supervisor)
        self.fault("floods", t0)
        t0 = self.now()
        feed = readers_and_large_numbers(self.url, self.tls.ca, self.verify, self.tag)
        self.fault("20 readers of the event feed that stop reading; 10 events of 60,000 x 1e308", t0)
        planted: list[str] = []
        if self.disk:
            t0 = self.at(0.7)
            full = spool_disk_full(self.url, self.verify, self.supervisor, self.disk)
            self.fault("spool disk full 5 s", t0, t0 + 5, **full)
            self.supervisor.before_restart = lambda: planted.extend(damaged_segment(self.spool_dir, self.tag))
        t0 = self.at(0.9)
        self.supervisor.terminate()
        damaged = ", a damaged spool segment put in before it starts" if self.disk else ""
        self.fault("SIGTERM of the service" + damaged, t0, t0)
        return flood_results, feed, planted

    def recovery(self) -> None:
        for fault in self.faults:
            after = sorted(t for t, o in self.timeline if t >= fault["ended_s"] and o in OK)
            fault["recovered_after_s"] = round(after[0] - fault["ended_s"], 2) if after else None
            fault["non_2xx_during"] = sum(
                1 for t, o in self.timeline if fault["at_s"] <= t <= fault["ended_s"] + 10 and o not in OK
            )

    def settle(self) -> tuple[set[str], int]:
        """What is stored once the writers are done, and the spool replayed by a restarted service."""
        time.sleep(2)  # async mode: stored by the writers after the answer
        stored = self.stored_ids()
        missing_before_replay = len(self.acknowledged - stored)
        if self.spool and self.acknowledged - stored:
            # What the spool kept at the last SIGTERM: a restarted pod stores it.
            replay = Supervisor(self.env, self.work / f"soak-{self.name}-replay.log")
            replay.start()
            deadline = time.monotonic() + 60
            while self.acknowledged - stored and time.monotonic() < deadline:
                time.sleep(1)
                stored = self.stored_ids()
            replay.stop()
        return stored, missing_before_replay

    def poison_outcome(self, poison: dict[str, Any]) -> None:
        run_id = poison["run_id"]
        with self.owner() as conn:
            poison["stored"] = bool(
                conn.execute("SELECT 1 FROM metastore.events WHERE run_id = %s", (run_id,)).fetchone()
            )
            poison["set_aside"] = bool(
                conn.execute(
                    "SELECT 1 FROM metastore.rejected_events WHERE body_sha256 = %s OR body_prefix LIKE %s",
                    (hashlib.sha256(poison_event(run_id)).digest(), f"%{run_id}%"),
                ).fetchone()
            )

    def feed_outcome(self, feed: dict[str, Any]) -> None:
        number_ids = feed.pop("run_ids")
        with self.owner() as conn:
            feed["large_number_events_stored"] = conn.execute(
                "SELECT count(*) FROM metastore.events WHERE run_id = ANY(%s)", (number_ids,)
            ).fetchone()[0]
            # Refused at the POST (sync) or by the writers (queued): recorded with their SQLSTATE.
            feed["large_number_events_recorded"] = dict(
                conn.execute(
                    "SELECT sqlstate, count(*) FROM metastore.rejected_events"
                    " WHERE sqlstate IN ('54M01', '54M02') GROUP BY sqlstate"
                ).fetchall()
            )

    def damaged_outcome(self, planted: list[str]) -> dict[str, Any] | None:
        if self.disk and not planted:
            return {"error": "not put in: the service was not restarted"}
        if not planted:
            return None
        with self.owner() as conn:
            rows = conn.execute("SELECT run_id FROM metastore.events WHERE run_id = ANY(%s)", (planted,))
            found = {r[0] for r in rows}
        intact = set(planted) - {planted[6], planted[13]}
        return {
            "events": len(planted),
            "damaged": 2,
            "intact_stored": len(intact & found),
            "damaged_stored": len(found - intact),
            "quarantined_files": len(list((self.spool_dir / "quarantine").glob("*.bad"))),
        }

    def run(self) -> dict[str, Any]:
        self.start_service()
        assert self.supervisor is not None
        self.begin = time.monotonic()
        self.stop_at = self.begin + self.seconds
        threads = [threading.Thread(target=self.client, args=(n,)) for n in range(self.clients)]
        for t in threads:
            t.start()
        self.postgres_faults()
        poison, long_lock = self.poison_and_lock()
        flood_results, feed, planted = self.service_faults()
        for t in threads:
            t.join(self.seconds + 60)
        self.supervisor.stop()
        self.recovery()
        stored, missing_before_replay = self.settle()
        rss_peak = self.rss.stop()
        memory = ROOT / "bench" / "results" / "memory.json"
        constants = json.loads(memory.read_text())["constants"] if memory.exists() else None
        self.poison_outcome(poison)
        self.feed_outcome(feed)
        return {
            "run": self.name,
            "mode": self.mode,
            "spool": self.spool,
            "seconds": self.seconds,
            "clients": self.clients,
            "requests": sum(self.outcomes.values()),
            "outcomes": self.outcomes,
            "503s": self.outcomes.get("503", 0),
            "acknowledged": len(self.acknowledged),
            "stored": len(stored & self.acknowledged),
            "missing": len(self.acknowledged - stored),
            "missing_before_replay": missing_before_replay,
            "rss_peak_mb": rss_peak,
            "rss_bound_mb": floods.bound_mb(constants, self.env) if constants else None,
            "service_exit_codes": self.supervisor.exit_codes,
            "service_restarts": self.supervisor.restarts,
            "faults": self.faults,
            "poison": poison,
            "long_lock": long_lock,
            "floods": flood_results,
            "feed_readers_and_large_numbers": feed,
            "damaged_spool_segment": self.damaged_outcome(planted),
        }

    def close(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()  # after a failure: no service left running (a second stop does nothing)
        self.pg.cleanup()
        if self.disk:
            self.disk.close()


def run(
    name: str, mode: str, seconds: float, clients: int, work: Path, tls: TLSFiles, spool: bool = False
) -> dict[str, Any]:
    soak = Soak(name, mode, seconds, clients, work, tls, spool)
    try:
        return soak.run()
    finally:
        soak.close()


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
    emit(results, args.out)
    lost = sum(r["missing"] for r in results)
    if lost:
        print(f"soak: {lost} acknowledged events are not stored", file=sys.stderr)
    spooled = [r["damaged_spool_segment"] for r in results if r["damaged_spool_segment"]]
    bad_replay = [
        d for d in spooled if "error" in d or d["intact_stored"] != d["events"] - d["damaged"] or d["damaged_stored"]
    ]
    if bad_replay:
        print(f"soak: a damaged spool segment was not replayed as it should be: {bad_replay}", file=sys.stderr)
    # Every large-number event refused (54M01), none stored, and the feed still serving after its readers.
    feeds = [r["feed_readers_and_large_numbers"] for r in results]
    bad_feed = [
        f
        for f in feeds
        if f["large_number_events_stored"]
        or set(f["large_number_events"]) - {"400 54M01", "202", "503 on a try"}
        or f["large_number_events_recorded"].get("54M01", 0)
        != f["large_number_events"].get("400 54M01", 0) + f["large_number_events"].get("202", 0)
        or f["feed_page_after"] != 200
    ]
    if bad_feed:
        print(f"soak: large-number events stored, or not refused, or the feed not serving: {bad_feed}", file=sys.stderr)
    return 1 if lost or bad_replay or bad_feed else 0


if __name__ == "__main__":
    raise SystemExit(main())
