"""`python -m bench.ab_db --base <git ref>`: this checkout's db/ against another revision's, side by
side on one PostgreSQL (the embedded one, no durable commits unless --durable), so that a noisy machine slows both
alike.

- ingest: the same Trino CTAS COMPLETE events (a new query each) into a database of each, rounds
  alternating which goes first: ms per event (client round trip) one per `ingest_event` call, and in
  sets of 10 and 100 per `ingest_events` call; the server CPU per event (the backend's user and system
  time, which other work on the machine hardly moves) and the bytes of the schema per event. With
  `--start`, each query is its START (no datasets, as Trino sends it) and then its COMPLETE.
- backfill: `CALL metastore.backfill()` over `--backfill` such events stored in each, twice each
  (this db/'s in `--sessions` sessions at once);
  with `--bulk`, over make bench's generated events instead, inserted straight into metastore.events
  just before (no derived rows, no statistics: what `make bench` and a restore of the events table
  give), once each.
- `--unlisted`: each COMPLETE with its `inputs` emptied, as Spark's COMPLETE sends them: the output's
  columnLineage facet names the input that the event does not list.

Prints the figures and their ratio (this / base); writes nothing in the repository.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.jobs_runs import backend_cpu_s
from bench.lineage import ctas, schema_bytes
from bench.run import generate_events
from devtools import localpg
from devtools.localpg import LocalPostgres
from metastore import ledger, maintenance, migrations

ROOT = Path(__file__).resolve().parent.parent
MODES = (("one per call", 1, 100), ("sets of 10", 10, 10), ("sets of 100", 100, 1))


def checkout_db(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", ref, "db"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "db"


def provision(server: LocalPostgres, name: str, db: Path) -> psycopg.Connection[Any]:
    # migrations holds its own name for db_dir (the functions' files): both point at db.
    here = ledger.db_dir
    ledger.db_dir = migrations.db_dir = lambda: db
    try:
        localpg.provision(server, name)
    finally:
        ledger.db_dir = migrations.db_dir = here
    return psycopg.connect(server.dsn_for("metastore_owner", name), autocommit=True)


def store(conn: psycopg.Connection[Any], bodies: list[bytes]) -> None:
    if len(bodies) == 1:
        conn.execute("SELECT status FROM metastore.ingest_event(%b)", (bodies[0],)).fetchone()
    else:
        conn.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies,)).fetchone()


def complete(i: int, unlisted: bool) -> bytes:
    """Query i's COMPLETE; unlisted: without its inputs, which its columnLineage facet still names."""
    if not unlisted:
        return ctas(i)
    body = json.loads(ctas(i))
    body["inputs"] = []
    return json.dumps(body).encode()


def query(i: int, start: bool, unlisted: bool) -> list[bytes]:
    """Query i's events: its COMPLETE, after its START with --start."""
    return [ctas(i, start=True), complete(i, unlisted)] if start else [complete(i, unlisted)]


def compare_ingest(server: LocalPostgres, dbs: dict[str, Path], args: argparse.Namespace) -> int:
    """Every mode's events stored through both schemas, in alternating order; prints time and server
    CPU per event and storage per event. Returns how many queries' events it made up."""
    conns = {label: provision(server, f"ab_{label}", db) for label, db in dbs.items()}
    empty = {label: schema_bytes(conn) for label, conn in conns.items()}
    spent = {(label, mode): 0.0 for label in conns for mode, _, _ in MODES}
    cpu = {(label, mode): 0.0 for label in conns for mode, _, _ in MODES}
    counted = {mode: 0 for mode, _, _ in MODES}
    # Per round, this over base: the median says more than the sums on a machine shared with other work.
    ratios: dict[str, list[float]] = {mode: [] for mode, _, _ in MODES}
    cpu_ratios: dict[str, list[float]] = {mode: [] for mode, _, _ in MODES}
    n = 0
    per_query = 2 if args.start else 1
    for r in range(args.rounds):
        for mode, size, reps in MODES:
            sets = []
            for _ in range(reps):
                # size events per call: whole queries, START before COMPLETE.
                queries = range(n, n + (size // per_query or 1))
                events = [body for i in queries for body in query(i, args.start, args.unlisted)]
                n += size // per_query or 1
                sets += [events[k : k + size] for k in range(0, len(events), size)]
            counted[mode] += sum(len(bodies) for bodies in sets)
            took: dict[str, tuple[float, float]] = {}
            for label in ("base", "this") if r % 2 == 0 else ("this", "base"):
                pid = conns[label].info.backend_pid
                before = backend_cpu_s(pid)
                started = time.perf_counter()
                for bodies in sets:
                    store(conns[label], bodies)
                took[label] = (time.perf_counter() - started, backend_cpu_s(pid) - before)
                spent[(label, mode)] += took[label][0]
                cpu[(label, mode)] += took[label][1]
            ratios[mode].append(took["this"][0] / took["base"][0])
            if took["base"][1] > 0:
                cpu_ratios[mode].append(took["this"][1] / took["base"][1])
    stored = {}
    for label, conn in conns.items():
        row = conn.execute("SELECT count(*) FROM metastore.events").fetchone()
        stored[label] = int(row[0]) if row else 0
        conn.execute("VACUUM ANALYZE")
    assert stored["base"] == stored["this"], stored
    for mode, _, _ in MODES:
        base, this = (spent[(label, mode)] / counted[mode] * 1000 for label in ("base", "this"))
        cbase, cthis = (cpu[(label, mode)] / counted[mode] * 1e6 for label in ("base", "this"))
        print(
            f"ingest, {mode}: base {base:.3f} ms/event, this {this:.3f} ms/event, this/base {this / base:.2f} "
            f"(median of rounds {statistics.median(ratios[mode]):.2f}); server CPU base {cbase:.0f} us/event, "
            f"this {cthis:.0f} us/event, this/base {cthis / cbase:.2f} "
            f"(median of rounds {statistics.median(cpu_ratios[mode]) if cpu_ratios[mode] else float('nan'):.2f})"
        )
    per_event = {label: (schema_bytes(conn) - empty[label]) / stored[label] for label, conn in conns.items()}
    print(
        f"storage of the schema per event ({stored['this']} events): base {per_event['base']:.0f} B, "
        f"this {per_event['this']:.0f} B, this/base {per_event['this'] / per_event['base']:.3f}"
    )
    for conn in conns.values():
        conn.close()
    return n


def compare_backfill(server: LocalPostgres, dbs: dict[str, Path], args: argparse.Namespace, n: int) -> None:
    """A backfill of the same events through both schemas, twice; prints events/s and server CPU."""
    conns = {label: provision(server, f"backfill_{label}", db) for label, db in dbs.items()}
    for conn in conns.values():
        if args.bulk:
            continue
        for i in range(0, args.backfill, 100):
            store(conn, [complete(n + j, args.unlisted) for j in range(i, min(args.backfill, i + 100))])
        conn.execute("VACUUM ANALYZE")
    n += args.backfill
    for _ in range(1 if args.bulk else 2):
        for label, conn in conns.items():
            if args.bulk:
                generate_events(conn, args.backfill)
            started, cpu = time.perf_counter(), backend_cpu_s(conn.info.backend_pid)
            if label == "this" and args.sessions > 1:
                maintenance.backfill(conn.info.dsn, args.sessions)
            else:
                conn.execute("CALL metastore.backfill()")
            seconds = time.perf_counter() - started
            # The server CPU of the calling session (of one session only: not with --sessions).
            cpu_us = (backend_cpu_s(conn.info.backend_pid) - cpu) / args.backfill * 1e6
            rate = args.backfill / seconds
            print(
                f"backfill of {args.backfill} events, {label}: {seconds:.2f} s, {rate:.0f} events/s, "
                f"server CPU {cpu_us:.0f} us/event"
            )
    for conn in conns.values():
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare with (e.g. a commit of main)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backfill", type=int, default=10_000, help="events for the backfill comparison")
    parser.add_argument("--bulk", action="store_true", help="backfill make bench's generated events, once each")
    parser.add_argument("--sessions", type=int, default=1, help="backfill sessions sharing the work (this db/ only)")
    parser.add_argument("--durable", action="store_true", help="fsync and synchronous commit on, as make bench has")
    parser.add_argument("--start", action="store_true", help="each query a START, then its COMPLETE")
    parser.add_argument("--unlisted", action="store_true", help="COMPLETEs without inputs, named by their facet")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalPostgres() as server:
        if args.durable:
            server.stop()
            server.start(durable=True)
        dbs = {"base": checkout_db(args.base, Path(tmp)), "this": ledger.db_dir()}
        n = compare_ingest(server, dbs, args)
        compare_backfill(server, dbs, args, n)


if __name__ == "__main__":
    main()
