"""`python -m bench.ab_db --base <git ref>`: this checkout's db/ against another revision's, side by
side on one PostgreSQL (the embedded one, no durable commits unless --durable), so that a noisy machine slows both
alike.

- ingest: the same Trino CTAS COMPLETE events (a new query each) into a database of each, rounds
  alternating which goes first: ms per event (client round trip) one per `ingest_event` call, and in
  sets of 10 and 100 per `ingest_events` call.
- backfill: `CALL metastore.backfill()` over `--backfill` such events stored in each, twice each
  (this db/'s in `--sessions` sessions at once);
  with `--bulk`, over make bench's generated events instead, inserted straight into metastore.events
  just before (no derived rows, no statistics: what `make bench` and a restore of the events table
  give), once each.

Prints the figures and their ratio (this / base); writes nothing in the repository.
"""

from __future__ import annotations

import argparse
import io
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare with (e.g. a commit of main)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--backfill", type=int, default=10_000, help="events for the backfill comparison")
    parser.add_argument("--bulk", action="store_true", help="backfill make bench's generated events, once each")
    parser.add_argument("--sessions", type=int, default=1, help="backfill sessions sharing the work (this db/ only)")
    parser.add_argument("--durable", action="store_true", help="fsync and synchronous commit on, as make bench has")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalPostgres() as server:
        if args.durable:
            server.stop()
            server.start(durable=True)
        dbs = {"base": checkout_db(args.base, Path(tmp)), "this": migrations.db_dir()}
        conns = {label: provision(server, f"ab_{label}", db) for label, db in dbs.items()}
        spent = {(label, mode): 0.0 for label in conns for mode, _, _ in MODES}
        n = 0
        for r in range(args.rounds):
            for mode, size, reps in MODES:
                sets = []
                for _ in range(reps):
                    sets.append([ctas(n + i) for i in range(size)])
                    n += size
                for label in ("base", "this") if r % 2 == 0 else ("this", "base"):
                    started = time.perf_counter()
                    for bodies in sets:
                        store(conns[label], bodies)
                    spent[(label, mode)] += time.perf_counter() - started
        per_mode = args.rounds * 100
        for mode, _, _ in MODES:
            base, this = (spent[(label, mode)] / per_mode * 1000 for label in ("base", "this"))
            print(f"ingest, {mode}: base {base:.3f} ms/event, this {this:.3f} ms/event, this/base {this / base:.2f}")
        for conn in conns.values():
            conn.close()
        conns = {label: provision(server, f"backfill_{label}", db) for label, db in dbs.items()}
        for conn in conns.values():
            if args.bulk:
                continue
            for i in range(0, args.backfill, 100):
                store(conn, [ctas(n + j) for j in range(i, min(args.backfill, i + 100))])
            conn.execute("VACUUM ANALYZE")
        n += args.backfill
        for _ in range(1 if args.bulk else 2):
            for label, conn in conns.items():
                if args.bulk:
                    generate_events(conn, args.backfill)
                started = time.perf_counter()
                if label == "this" and args.sessions > 1:
                    migrations.backfill(conn.info.dsn, args.sessions)
                else:
                    conn.execute("CALL metastore.backfill()")
                seconds = time.perf_counter() - started
                rate = args.backfill / seconds
                print(f"backfill of {args.backfill} events, {label}: {seconds:.2f} s, {rate:.0f} events/s")
        for conn in conns.values():
            conn.close()


if __name__ == "__main__":
    main()
