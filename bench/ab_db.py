"""`python -m bench.ab_db --base <git ref>`: this checkout's db/ against another revision's, side by
side on one PostgreSQL (the embedded one, no durable commits unless --durable), so that a noisy machine slows both
alike.

- ingest: the same Trino CTAS COMPLETE events (a new query each) into a database of each, rounds
  alternating which goes first: ms per event (client round trip) one per `ingest_event` call, and in
  sets of 10 and 100 per `ingest_events` call.
- backfill: `CALL metastore.backfill()` over `--backfill` such events stored in each, twice each
  (this db/'s in `--sessions` sessions at once);
  with `--bulk`, over make bench's generated events instead, inserted straight into metastore.events
  first (no derived rows, no statistics: what `make bench` and a restore of the events table
  give), once each. `--backfill-rounds N`: N rebuilds of each instead, alternating which goes first,
  and their mean.
- `--unlisted`: the CTAS events with their `inputs` emptied, as Spark's COMPLETE sends them: the
  output's columnLineage facet names the input that the event does not list.
- `--cpu`: also the CPU time of the database session that ran each part (Linux's /proc of the
  embedded server, one session: not with --sessions), which other processes on a shared machine
  inflate less than the wall time.

Prints the figures and their ratio (this / base); writes nothing in the repository.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.lineage import ctas
from bench.run import generate_events
from devtools import localpg
from devtools.localpg import LocalPostgres
from metastore import migrations

ROOT = Path(__file__).resolve().parent.parent
MODES = (("one per call", 1, 100), ("sets of 10", 10, 10), ("sets of 100", 100, 1))


def checkout_db(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", ref, "db"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "db"


def provision(server: LocalPostgres, name: str, db: Path) -> psycopg.Connection[Any]:
    here = migrations.db_dir
    migrations.db_dir = lambda: db
    try:
        localpg.provision(server, name)
    finally:
        migrations.db_dir = here
    return psycopg.connect(server.dsn_for("metastore_owner", name), autocommit=True)


def store(conn: psycopg.Connection[Any], bodies: list[bytes]) -> None:
    if len(bodies) == 1:
        conn.execute("SELECT status FROM metastore.ingest_event(%b)", (bodies[0],)).fetchone()
    else:
        conn.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies,)).fetchone()


def session_cpu(conn: psycopg.Connection[Any]) -> float:
    """CPU seconds the connection's server process has used so far (/proc; the server runs here)."""
    stat = Path(f"/proc/{conn.info.backend_pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def event(i: int, unlisted: bool) -> bytes:
    """The CTAS COMPLETE as a new query; unlisted: without its inputs, which its facet still names."""
    if not unlisted:
        return ctas(i)
    body = json.loads(ctas(i))
    body["inputs"] = []
    return json.dumps(body).encode()


def ratio_line(what: str, base: float, this: float, unit: str) -> str:
    return f"{what}: base {base:.3f} {unit}, this {this:.3f} {unit}, this/base {this / base:.2f}"


def compare_ingest(conns: dict[str, psycopg.Connection[Any]], args: argparse.Namespace) -> int:
    """The ingest rounds; returns how many events it numbered."""
    spent = {(label, mode, clock): 0.0 for label in conns for mode, _, _ in MODES for clock in ("wall", "cpu")}
    n = 0
    for r in range(args.rounds):
        for mode, size, reps in MODES:
            sets = []
            for _ in range(reps):
                sets.append([event(n + i, args.unlisted) for i in range(size)])
                n += size
            for label in ("base", "this") if r % 2 == 0 else ("this", "base"):
                started, cpu = time.perf_counter(), session_cpu(conns[label]) if args.cpu else 0.0
                for bodies in sets:
                    store(conns[label], bodies)
                spent[(label, mode, "wall")] += time.perf_counter() - started
                if args.cpu:
                    spent[(label, mode, "cpu")] += session_cpu(conns[label]) - cpu
    per_mode = args.rounds * 100
    for mode, _, _ in MODES:
        for clock in ("wall", "cpu") if args.cpu else ("wall",):
            base, this = (spent[(label, mode, clock)] / per_mode * 1000 for label in ("base", "this"))
            what = f"ingest, {mode}" + (", session CPU" if clock == "cpu" else "")
            print(ratio_line(what, base, this, "ms/event"))
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare with (e.g. a commit of main)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backfill", type=int, default=10_000, help="events for the backfill comparison")
    parser.add_argument("--bulk", action="store_true", help="backfill make bench's generated events, once each")
    parser.add_argument("--sessions", type=int, default=1, help="backfill sessions sharing the work (this db/ only)")
    parser.add_argument("--durable", action="store_true", help="fsync and synchronous commit on, as make bench has")
    parser.add_argument("--unlisted", action="store_true", help="CTAS events without inputs, named by their facet")
    parser.add_argument("--cpu", action="store_true", help="also the CPU time of the session that ran each part")
    parser.add_argument("--backfill-rounds", type=int, help="rebuilds of each (default 1 with --bulk, else 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalPostgres() as server:
        if args.durable:
            server.stop()
            server.start(durable=True)
        dbs = {"base": checkout_db(args.base, Path(tmp)), "this": migrations.db_dir()}
        conns = {label: provision(server, f"ab_{label}", db) for label, db in dbs.items()}
        n = compare_ingest(conns, args)
        for conn in conns.values():
            conn.close()
        compare_backfill(server, dbs, args, n)


def compare_backfill(server: LocalPostgres, dbs: dict[str, Path], args: argparse.Namespace, n: int) -> None:
    """Rebuilds of the same events in a database of each, rounds alternating which goes first."""
    conns = {label: provision(server, f"backfill_{label}", db) for label, db in dbs.items()}
    for conn in conns.values():
        if args.bulk:
            generate_events(conn, args.backfill)
            continue
        for i in range(0, args.backfill, 100):
            store(conn, [event(n + j, args.unlisted) for j in range(i, min(args.backfill, i + 100))])
        conn.execute("VACUUM ANALYZE")
    rounds = args.backfill_rounds or (1 if args.bulk else 2)
    spent = {(label, clock): 0.0 for label in conns for clock in ("wall", "cpu")}
    for r in range(rounds):
        for label in ("base", "this") if r % 2 == 0 else ("this", "base"):
            conn = conns[label]
            started, cpu = time.perf_counter(), session_cpu(conn) if args.cpu else 0.0
            if label == "this" and args.sessions > 1:
                migrations.backfill(conn.info.dsn, args.sessions)
            else:
                conn.execute("CALL metastore.backfill()")
            seconds = time.perf_counter() - started
            spent[(label, "wall")] += seconds
            print(
                f"backfill of {args.backfill} events, {label}: {seconds:.2f} s, {args.backfill / seconds:.0f} events/s"
            )
            if args.cpu and args.sessions == 1:
                cpu = session_cpu(conn) - cpu
                spent[(label, "cpu")] += cpu
                print(
                    f"backfill of {args.backfill} events, {label}: session CPU {cpu:.2f} s, "
                    f"{args.backfill / cpu:.0f} events per CPU second"
                )
    if rounds > 1:
        for clock in ("wall", "cpu") if args.cpu and args.sessions == 1 else ("wall",):
            base, this = (spent[(label, clock)] / rounds / args.backfill * 1e6 for label in ("base", "this"))
            print(ratio_line(f"backfill, {rounds} rounds, {clock}", base, this, "us/event"))
    for conn in conns.values():
        conn.close()


if __name__ == "__main__":
    main()
