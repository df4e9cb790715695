"""What Trino's OpenLineage listener costs Trino: the wall time of one query set (the e2e tests' join,
CTAS, INSERT and run-time failure, plus a DROP) as the client sees it, with the listener posting to our
service in sync mode, in async mode (METASTORE_INGEST_MODE=async), and with the service stopped
(every POST refused), side by side on one Trino whose listener always points at the same port; and,
as a baseline, on a second Trino without any event listener.

    python -m bench.listener_overhead [--rounds N] [--no-baseline] [--frozen] [--keep DIR] [--output PATH]

--frozen adds a fourth setting, the service SIGSTOPped: connections are accepted and never answered, so
every event waits for the listener's 5 s timeout (slow; not part of `make e2e`).

Rounds interleave the settings (the order rotates every round) after a warm-up; each setting gets one
sample per round. Writes bench/results/listener-overhead.json and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg

from devtools.localpg import LocalPostgres, free_port
from tests.conftest import Database, provision
from tests.e2e.trino_server import (
    TRINO_VERSION,
    Query,
    TrinoServer,
    fetch_trino,
    find_java,
    java_version,
    query_set,
    run_queries,
    start_trino,
)
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.servers import Server, start_server

RESULTS = Path(__file__).resolve().parent / "results" / "listener-overhead.json"
LISTENER_SETTINGS = ("sync", "async", "stopped")
FROZEN = "frozen"  # opt-in: the service process is SIGSTOPped, connections are accepted, nothing answers
BASELINE = "no-listener"


def timed_queries(table: str) -> list[Query]:
    return [*query_set(table), Query("drop", f"DROP TABLE {table}")]


@dataclass
class ServiceOnFixedPort:
    """Our service, restarted in a given mode on the one port Trino's listener posts to."""

    db: Database
    tls: TLSFiles
    port: int
    logs: Path
    mode: str = "stopped"
    server: Server | None = None
    starts: int = 0

    @property
    def listener_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def set(self, mode: str) -> bool:
        """Restart in mode unless it runs in it already; True if it was (re)started or stopped."""
        if mode == self.mode:
            return False
        self.stop()
        if mode != "stopped":
            self.starts += 1
            ingest = "sync" if mode == FROZEN else mode
            log = self.logs / f"service-{self.starts:03d}-{mode}.log"
            # The one port Trino knows.
            self.server = start_server(self.db.service_dsn, self.tls, log, port=self.port, METASTORE_INGEST_MODE=ingest)
            if mode == FROZEN:
                self.server.process.send_signal(signal.SIGSTOP)
        self.mode = mode
        return True

    def stop(self) -> None:
        if self.server is not None:
            if self.mode == FROZEN:
                self.server.process.send_signal(signal.SIGCONT)
            # SIGTERM: in async mode the queue is drained before the process exits.
            code = self.server.stop()
            if code != 0:
                print(f"service exited with {code}; log: {self.server.log}", file=sys.stderr)
            self.server = None
        self.mode = "stopped"


@dataclass
class Samples:
    totals: list[float] = field(default_factory=list)
    per_query: dict[str, list[float]] = field(default_factory=dict)
    query_ids: list[str] = field(default_factory=list)
    primer_ids: list[str] = field(default_factory=list)

    def add(self, total: float, runs: list[Any]) -> None:
        self.totals.append(total)
        for run in runs:
            self.per_query.setdefault(run.query.label, []).append(run.seconds)
            self.query_ids.append(run.query_id)


def p90(values: list[float]) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def stored_events(db: Database, query_ids: list[str]) -> int:
    with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM metastore.events WHERE job_name = ANY(%s)", (query_ids,)).fetchone()
    return int(row[0]) if row else 0


def settle(db: Database, query_ids: list[str], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while stored_events(db, query_ids) < 2 * len(query_ids) and time.monotonic() < deadline:
        time.sleep(0.05)


def prime(trino: TrinoServer, most: int = 12) -> list[str]:
    """Untimed queries until two in a row lose no event (stale pooled connections are used up)."""
    ids: list[str] = []
    clean = 0
    with trino.connect() as conn:
        while clean < 2 and len(ids) < most:
            query_id = run_queries(conn, [Query("primer", "SELECT count(*) FROM tpch.tiny.region")])[0].query_id
            ids.append(query_id)
            time.sleep(0.3)  # COMPLETE is posted once the query reached its final state
            clean = 0 if any(query_id in line for line in trino.listener_failures()) else clean + 1
    return ids


def run_set(trino: TrinoServer, label: str) -> tuple[float, list[Any]]:
    table = f"memory.default.m_{label}"
    with trino.connect() as conn:
        started = time.perf_counter()
        runs = run_queries(conn, timed_queries(table))
        return time.perf_counter() - started, runs


def measure(rounds: int, warmup: int, baseline: bool, frozen: bool, work: Path) -> dict[str, Any]:
    java_home = find_java()
    trino_home = fetch_trino()
    listener_settings = [*LISTENER_SETTINGS, *([FROZEN] if frozen else [])]
    settings = [*listener_settings, *([BASELINE] if baseline else [])]
    samples = {s: Samples() for s in settings}
    with contextlib.ExitStack() as stack:
        pg = LocalPostgres()
        stack.callback(pg.cleanup)
        pg.start()
        db = provision(pg, "metastore")
        tls = write_tls_files(work)
        service = ServiceOnFixedPort(db, tls, free_port(), work)
        stack.callback(service.stop)
        print(f"starting Trino {TRINO_VERSION} (listener -> {service.listener_url})", file=sys.stderr)
        trino = start_trino(java_home, trino_home, service.listener_url, tls.ca, base=work / "trino")
        stack.callback(trino.stop)
        servers = {s: trino for s in listener_settings}
        if baseline:
            print(f"starting Trino {TRINO_VERSION} without an event listener", file=sys.stderr)
            plain = start_trino(java_home, trino_home, None, tls.ca, base=work / "trino-no-listener")
            stack.callback(plain.stop)
            servers[BASELINE] = plain

        print(f"warming up ({warmup} query sets per Trino)", file=sys.stderr)
        service.set("sync")
        for i in range(warmup):
            for server in {id(s): s for s in servers.values()}.values():
                run_set(server, f"warmup_{i}_{server.port}")

        for r in range(rounds):
            order = settings[r % len(settings) :] + settings[: r % len(settings)]
            for setting in order:
                if setting != BASELINE and service.set(setting) and setting not in ("stopped", FROZEN):
                    # Trino's HTTP client keeps connections to the previous service process and does not
                    # retry a POST that fails on one: untimed primer queries take those losses.
                    samples[setting].primer_ids += prime(trino)
                total, runs = run_set(servers[setting], f"{setting.replace('-', '_')}_{r}")
                samples[setting].add(total, runs)
                if setting in LISTENER_SETTINGS and setting != "stopped":
                    # The last COMPLETE is posted after the client has its answer: let it arrive before
                    # the service restarts, or the restart, not the setting, would lose it.
                    settle(db, [run.query_id for run in runs])
            line = "  ".join(f"{s} {samples[s].totals[-1]:.3f}s" for s in settings)
            print(f"round {r + 1}/{rounds}: {line}", file=sys.stderr)
        service.stop()  # drains the async queue: every accepted event is stored now

        failures = trino.listener_failures()
        result: dict[str, Any] = {
            "what": "wall time of one query set as the Trino client sees it (seconds)",
            "queries": {q.label: q.sql for q in timed_queries("memory.default.<t>")},
            "trino": TRINO_VERSION,
            "java": ".".join(map(str, java_version(java_home) or ())),
            "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version()},
            "rounds": rounds,
            "warmup_sets": warmup,
            "listener_timeout": "5s (Trino's default)",
            "settings": {},
        }
        for setting in settings:
            s = samples[setting]
            expected = 2 * len(s.query_ids) if setting != BASELINE else 0
            entry: dict[str, Any] = {
                "median_s": round(statistics.median(s.totals), 4),
                "p90_s": round(p90(s.totals), 4),
                "min_s": round(min(s.totals), 4),
                "max_s": round(max(s.totals), 4),
                "samples_s": [round(t, 4) for t in s.totals],
                "per_query_median_s": {k: round(statistics.median(v), 4) for k, v in s.per_query.items()},
                "events_expected": expected,
                "events_stored": stored_events(db, s.query_ids) if setting != BASELINE else 0,
                "listener_failures_logged": sum(1 for f in failures if any(q in f for q in s.query_ids)),
                "primer_events_lost_after_restart": (
                    2 * len(s.primer_ids) - stored_events(db, s.primer_ids) if s.primer_ids else 0
                ),
            }
            result["settings"][setting] = entry
        return result


def table(result: dict[str, Any]) -> str:
    settings: dict[str, Any] = result["settings"]
    labels = list(next(iter(settings.values()))["per_query_median_s"])
    head = [
        "setting",
        "median s",
        "p90 s",
        "events stored",
        "listener errors",
        "lost after restart",
        *(f"{q} s" for q in labels),
    ]
    rows = [head]
    for name, s in settings.items():
        stored = f"{s['events_stored']}/{s['events_expected']}" if s["events_expected"] else "-"
        rows.append(
            [
                name,
                f"{s['median_s']:.3f}",
                f"{s['p90_s']:.3f}",
                stored,
                str(s["listener_failures_logged"]),
                str(s["primer_events_lost_after_restart"]),
                *(f"{s['per_query_median_s'][q]:.3f}" for q in labels),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    title = (
        f"Trino {result['trino']} on Java {result['java']}, {result['rounds']} rounds, "
        f"query set = {', '.join(labels)} (medians per query on the right)"
    )
    return "\n".join([title, *lines])


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # runs the cleanups: no Trino, service or PostgreSQL left behind


@contextlib.contextmanager
def workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="metastore-e2e-measure-") as d:
        yield Path(d)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="samples per setting (default 7)")
    parser.add_argument("--warmup", type=int, default=3, help="query sets run first and not counted")
    parser.add_argument("--no-baseline", action="store_true", help="skip the second Trino without a listener")
    parser.add_argument("--frozen", action="store_true", help="also time a service that accepts and never answers")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (logs of Trino and the service)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with workdir(args.keep) as work:
        result = measure(args.rounds, args.warmup, not args.no_baseline, args.frozen, work)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
