"""How long Trino waits for one event: emit() wall time of Trino 476's own OpenLineage client against
our service, with the database healthy, locked and frozen, in sync and async ingest mode.

The client is openlineage-java 1.33.0 on Apache HttpClient 5.5 (the versions Trino 476 ships), built the
way Trino's listener builds it (tests/trino_client/EmitBench.java): one 5000 ms timeout for connect,
socket, response and connection request, and HttpClient's default retry strategy left on, which sends a
POST again once, after 1 s or Retry-After, when it got 429 or 503. The time of one emit() therefore
includes that retry; it is the time a Trino query waits for its event.

Everything is real: a throwaway PostgreSQL (devtools.localpg), the service over TLS
(tests.support.servers.start_server, a trustme CA in a PKCS12 trust store for the JVM), one JVM per
ingest mode with a client kept warm between cases, as in a running Trino. Faults:

    none     nothing
    locked   an owner connection holds LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE
    frozen   every PostgreSQL process is SIGSTOPped (SIGCONT afterwards)

During a fault case the modes' servers are emitted to at the same time (one fault for both; --serial
runs them one after the other); each mode's emits follow one another, or --concurrency N at a time
from N threads sharing the one client, as concurrent queries of one Trino do (HttpClient's pool
allows 5 connections per route; more wait for one, up to the connection-request timeout of 5 s).
After each case the fault is lifted, the server drained (async queue empty) and the events stored
in metastore.events counted as the owner, by runId.

    python -m tests.trino_client.budget [--emits N] [--concurrency N] [--env [MODE:]KEY=VALUE ...] [OUT]

--env values may contain {dir}, replaced by a fresh directory of that server's own (e.g.
METASTORE_SPOOL_DIR={dir}). Writes a JSON result (default bench/results/trino-budget.json), prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from devtools.localpg import LocalPostgres
from tests.conftest import FIXTURES, Database, provision
from tests.e2e.trino_server import TRUSTSTORE_PASSWORD, java_version, jdk_homes, make_truststore
from tests.support.certs import write_tls_files
from tests.support.servers import Server, start_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = ROOT / "bench" / "results" / "trino-budget.json"
EVENTS = FIXTURES / "trino"
MODES = ("sync", "async")
FAULTS = ("none", "locked", "frozen")
MIN_JAVA = (17,)
TRINO_TIMEOUT_MS = 5000  # openlineage-event-listener.transport.timeout, default at Trino 476
DRAIN_TIMEOUT_S = 60.0


class BudgetSetupError(RuntimeError):
    """Java, Maven or the client jar cannot be had: the message says what is missing."""


# --- the client -------------------------------------------------------------------------------------


def find_java() -> Path:
    """JAVA_HOME if it is a JDK 17+, else the newest JDK 17+ under /usr/lib/jvm (with javac for the build
    and keytool for the trust store)."""
    candidates = jdk_homes()
    for home in candidates:
        version = java_version(home)
        if version and version >= MIN_JAVA and (home / "bin" / "javac").is_file():
            return home
    raise BudgetSetupError(
        f"no JDK 17+ with javac found (JAVA_HOME, /usr/lib/jvm); tried {[str(c) for c in candidates]}; "
        "install openjdk-17-jdk-headless (scripts/system-deps.sh does)"
    )


def build_jar(java_home: Path) -> Path:
    """The client harness jar, built by Maven once and cached (tests/trino_client/build.sh)."""
    proc = subprocess.run(
        ["bash", str(HERE / "build.sh")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "JAVA_HOME": str(java_home)},
    )
    if proc.returncode != 0:
        raise BudgetSetupError(f"tests/trino_client/build.sh exited {proc.returncode}:\n{proc.stderr.strip()}")
    return Path(proc.stdout.strip().splitlines()[-1])


@dataclass
class Emit:
    seq: int
    run_id: str
    event_type: str
    ms: float
    ok: bool
    status: int | None
    error: str | None


class Client:
    """One JVM running Trino's client against one server, driven line by line over stdin/stdout."""

    def __init__(self, java_home: Path, jar: Path, url: str, truststore: Path, events: Path, log: Path) -> None:
        self._stderr = log.open("wb")
        self.process = subprocess.Popen(
            [
                str(java_home / "bin" / "java"),
                f"-Djavax.net.ssl.trustStore={truststore}",
                f"-Djavax.net.ssl.trustStorePassword={TRUSTSTORE_PASSWORD}",
                "-Djavax.net.ssl.trustStoreType=PKCS12",
                "-Xmx256m",
                "-jar",
                str(jar),
                "--url",
                url,
                "--timeout-ms",
                str(TRINO_TIMEOUT_MS),
                str(events),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        first = self._next(120)
        if json.loads(first) != {"ready": True}:
            raise RuntimeError(f"client did not start: {first}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"no answer from the client within {timeout} s") from None
        if line is None:
            raise RuntimeError(f"the client exited ({self.process.wait()}); see {self._stderr.name}")
        return line

    def emit(self, n: int, threads: int = 1) -> list[Emit]:
        """n emits, from threads threads at once sharing the one client (as concurrent Trino queries)."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"emit {n} {threads}\n" if threads > 1 else f"emit {n}\n")
        self.process.stdin.flush()
        emits: list[Emit] = []
        while True:
            # One emit() lasts at most two attempts of 5 s timeouts plus the retry pause.
            record = json.loads(self._next(60))
            if "done" in record:
                return emits
            emits.append(Emit(**record))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


# --- faults -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def fault(kind: str, db: Database) -> Iterator[None]:
    if kind == "none":
        yield
    elif kind == "locked":
        with psycopg.connect(db.owner_dsn) as blocker:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            try:
                yield
            finally:
                blocker.rollback()
    elif kind == "frozen":
        db.server.signal_all(signal.SIGSTOP)
        try:
            yield
        finally:
            db.server.signal_all(signal.SIGCONT)
    else:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")


# --- measuring --------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest rank: the smallest value with at least p % of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def scrape(server: Server) -> dict[str, float]:
    """The server's view: POSTs to the lineage route by status, their summed duration, the async queue depth."""
    seen: dict[str, float] = {}
    with server.client() as http:
        text = http.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            lineage_post = labels.get("method") == "POST" and "lineage" in labels.get("route", "")
            if lineage_post and sample.name == "metastore_http_request_duration_seconds_count":
                key = f"status_{labels.get('status')}"
                seen[key] = seen.get(key, 0) + sample.value
            elif lineage_post and sample.name == "metastore_http_request_duration_seconds_sum":
                seen["seconds"] = seen.get("seconds", 0) + sample.value
            elif sample.name == "metastore_async_queue_events":
                seen["queue"] = sample.value
    return seen


def stored(db: Database, run_ids: Sequence[str]) -> int:
    with psycopg.connect(db.owner_dsn) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT run_id) FROM metastore.events WHERE run_id = ANY(%s)", (list(run_ids),)
        ).fetchone()
    return int(row[0]) if row else 0


def drain(server: Server, db: Database, run_ids: Sequence[str], timeout: float = DRAIN_TIMEOUT_S) -> int:
    """Stored events once the server has nothing left to store: all stored, or its async queue empty and
    the count unchanged for 1 s (a sync server has no queue), or the timeout."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while True:
        count = stored(db, run_ids)
        if count == len(run_ids):
            return count
        if count != last:
            last, since = count, time.monotonic()
        with contextlib.suppress(httpx.HTTPError):
            if scrape(server).get("queue", 0) == 0 and time.monotonic() - since >= 1.0:
                return count
        if time.monotonic() > deadline:
            return count
        time.sleep(0.2)


@dataclass
class Case:
    mode: str
    fault: str
    emits: list[Emit] = field(default_factory=list)
    stored: int = 0
    server_statuses: dict[str, int] = field(default_factory=dict)
    server_mean_ms: float | None = None
    drain_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        ms = [e.ms for e in self.emits]
        return {
            "mode": self.mode,
            "fault": self.fault,
            "n": len(ms),
            "min_ms": round(min(ms), 1),
            "p50_ms": round(percentile(ms, 50), 1),
            "p90_ms": round(percentile(ms, 90), 1),
            "p99_ms": round(percentile(ms, 99), 1),
            "max_ms": round(max(ms), 1),
            "exceptions": sum(not e.ok for e in self.emits),
            "client_statuses": _count(str(e.status) for e in self.emits if e.status is not None),
            "server_statuses": self.server_statuses,
            "server_mean_ms": self.server_mean_ms,
            "stored": self.stored,
            "drain_s": round(self.drain_s, 2),
            "errors": sorted({re.sub(r"[0-9a-f-]{36}", "<id>", e.error) for e in self.emits if e.error})[:5],
        }


def _count(items: Iterator[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    keys = sorted(k for k in after if k.startswith("status_"))
    return {k.removeprefix("status_"): int(after[k] - before.get(k, 0)) for k in keys if after[k] > before.get(k, 0)}


@dataclass
class Target:
    mode: str
    server: Server
    client: Client


def parse_env(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """[MODE:]KEY=VALUE items as {mode or "*": {KEY: VALUE}}."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        scope, sep, rest = item.partition(":")
        if not sep or "=" in scope:
            scope, rest = "*", item
        key, eq, value = rest.partition("=")
        if not eq or not key:
            raise ValueError(f"--env {item!r}: expected [MODE:]KEY=VALUE")
        out.setdefault(scope, {})[key] = value
    return out


def run(
    emits: int = 20,
    none_emits: int | None = None,
    warmup: int = 3,
    modes: Sequence[str] = MODES,
    faults: Sequence[str] = FAULTS,
    env: dict[str, dict[str, str]] | None = None,
    serial: bool = False,
    concurrency: int = 1,
    events: Path = EVENTS,
    work: Path | None = None,
    progress: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
) -> dict[str, Any]:
    """Every (mode, fault) case; returns the JSON result (see summary())."""
    env = env or {}
    java_home = find_java()
    jar = build_jar(java_home)
    own_work = work is None
    base = Path(tempfile.mkdtemp(prefix="metastore-trino-budget-")) if work is None else work
    base.mkdir(parents=True, exist_ok=True)

    tls = write_tls_files(base)
    truststore = make_truststore(java_home, tls.ca, base)

    cases: list[Case] = []
    started = time.time()
    pg = LocalPostgres().start()
    targets: list[Target] = []
    try:
        db = provision(pg, "metastore")
        progress(f"trino-budget: {time.time() - started:5.1f} s: PostgreSQL provisioned")

        def start(mode: str) -> Target:
            server_env = {"METASTORE_INGEST_MODE": mode, **env.get("*", {}), **env.get(mode, {})}
            for key, value in server_env.items():
                if "{dir}" in value:
                    server_env[key] = value.replace("{dir}", tempfile.mkdtemp(prefix=f"{mode}-", dir=base))
            server = start_server(db.service_dsn, tls, base / f"server-{mode}.log", **server_env)
            try:
                client = Client(java_home, jar, server.url, truststore, events, base / f"client-{mode}.log")
            except BaseException:
                server.stop()
                raise
            target = Target(mode, server, client)
            targets.append(target)
            # The first emits of a JVM load classes and open TLS: a running Trino is past that.
            warm = client.emit(warmup) if warmup else []
            if not all(e.ok for e in warm):
                raise RuntimeError(f"{mode}: warm-up emits failed (the harness, not a fault): {warm}")
            return target

        with ThreadPoolExecutor(len(modes)) as pool:
            for future in [pool.submit(start, mode) for mode in modes]:
                future.result()
        targets.sort(key=lambda t: list(modes).index(t.mode))
        progress(f"trino-budget: {time.time() - started:5.1f} s: servers and clients ready")

        groups = [[t] for t in targets] if serial else [targets]
        for kind in faults:
            n = none_emits if kind == "none" and none_emits is not None else emits
            for group in groups:
                progress(
                    f"trino-budget: {time.time() - started:5.1f} s: {kind} x {n} emits, "
                    f"{'+'.join(t.mode for t in group)}"
                )
                before = {t.mode: scrape(t.server) for t in group}
                with fault(kind, db), ThreadPoolExecutor(len(group)) as pool:
                    futures = {t.mode: pool.submit(t.client.emit, n, concurrency) for t in group}
                    results = {mode: future.result() for mode, future in futures.items()}
                for t in group:
                    case = Case(t.mode, kind, results[t.mode])
                    drained = time.monotonic()
                    case.stored = drain(t.server, db, [e.run_id for e in case.emits])
                    case.drain_s = time.monotonic() - drained
                    after = scrape(t.server)
                    case.server_statuses = _delta(before[t.mode], after)
                    if requests := sum(case.server_statuses.values()):
                        # Time the server took per POST (each attempt): the rest of an emit() is the
                        # client's (its retry pause, waiting for one of its pooled connections, TLS).
                        spent = after.get("seconds", 0) - before[t.mode].get("seconds", 0)
                        case.server_mean_ms = round(spent * 1000 / requests, 1)
                    cases.append(case)
        progress(f"trino-budget: {time.time() - started:5.1f} s: cases done")
    finally:

        def stop(t: Target) -> None:
            t.client.close()
            t.server.stop()

        with ThreadPoolExecutor(max(1, len(targets))) as pool:
            list(pool.map(stop, targets))
        pg.cleanup()
        progress(f"trino-budget: {time.time() - started:5.1f} s: stopped")
    if own_work:
        # Logs are kept only in a work folder given by the caller.
        shutil.rmtree(base, ignore_errors=True)

    return {
        "what": "emit() wall time of Trino 476's OpenLineage client (openlineage-java 1.33.0, HttpClient 5.5, "
        "timeout 5000 ms, default retry: once after 1 s on 429/503) against the service",
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "java": ".".join(map(str, java_version(java_home) or ())),
        "events": str(events.relative_to(ROOT) if events.is_relative_to(ROOT) else events),
        "emits_per_case": emits,
        "warmup": warmup,
        "modes_concurrent": not serial and len(modes) > 1,
        "concurrency": concurrency,
        "env": env,
        "cases": [c.summary() for c in cases],
        "samples_ms": {f"{c.mode}/{c.fault}": [round(e.ms, 1) for e in c.emits] for c in cases},
    }


def table(result: dict[str, Any]) -> str:
    head = (
        f"{'mode':6} {'fault':7} {'n':>3} {'min':>7} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} "
        f"{'exc':>4} {'stored':>7} {'srv ms':>7}  server statuses"
    )
    lines = [head, "-" * len(head)]
    for c in result["cases"]:
        statuses = " ".join(f"{k}:{v}" for k, v in c["server_statuses"].items())
        server_ms = "-" if c["server_mean_ms"] is None else f"{c['server_mean_ms']:.0f}"
        lines.append(
            f"{c['mode']:6} {c['fault']:7} {c['n']:>3} {c['min_ms']:>7.0f} {c['p50_ms']:>7.0f} {c['p90_ms']:>7.0f} "
            f"{c['p99_ms']:>7.0f} {c['max_ms']:>7.0f} {c['exceptions']:>4} {c['stored']:>3}/{c['n']:<3} "
            f"{server_ms:>7}  {statuses}"
        )
    return "\n".join(lines) + (
        "\n(ms; exc = emit() threw; stored = in metastore.events after the fault was lifted and the server "
        "drained; srv ms = the server's mean time per POST, retries counted as POSTs)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--emits", type=int, default=20, help="emits per case (default 20)")
    parser.add_argument("--none-emits", type=int, default=None, help="emits of the no-fault case (default --emits)")
    parser.add_argument("--warmup", type=int, default=3, help="emits before the first case, not measured")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: sync,async")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated: none,locked,frozen")
    parser.add_argument("--env", action="append", default=[], help="[MODE:]KEY=VALUE for the server, repeatable")
    parser.add_argument("--serial", action="store_true", help="one mode at a time (default: modes concurrently)")
    parser.add_argument("--concurrency", type=int, default=1, help="emits at once per mode, one client (default 1)")
    parser.add_argument("--events", type=Path, default=EVENTS, help="event files or folder (default: Trino fixtures)")
    parser.add_argument("--keep", type=Path, default=None, help="keep logs and certificates in this folder")
    parser.add_argument("out", nargs="?", type=Path, default=RESULTS, help=f"result JSON (default {RESULTS})")
    args = parser.parse_args(argv)
    result = run(
        emits=args.emits,
        none_emits=args.none_emits,
        warmup=args.warmup,
        modes=[m for m in args.modes.split(",") if m],
        faults=[f for f in args.faults.split(",") if f],
        env=parse_env(args.env),
        serial=args.serial,
        concurrency=args.concurrency,
        events=args.events.resolve(),
        work=args.keep.resolve() if args.keep else None,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
