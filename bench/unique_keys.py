"""`python -m bench.unique_keys [--pg-bin DIR]`: what the duplicate-key check
(metastore.json_has_unique_keys, db/functions/033_json_unique_keys.sql) adds to
metastore.ingest_event. Times the same event with the check and with the check replaced by a
function that returns true, interleaved in rounds so that a noisy machine hits both alike. The
event is a duplicate after the first call, so each call parses, checks, hashes and looks it up.

PostgreSQL 16+ and 15 use different implementations: run once per server, e.g.
`--pg-bin /usr/lib/postgresql/15/bin`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import psycopg

from devtools import localpg
from devtools.localpg import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
NOOP = """CREATE OR REPLACE FUNCTION metastore.json_has_unique_keys(p_json text, p_parsed jsonb)
RETURNS boolean LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $fn$ BEGIN RETURN true; END $fn$"""
EVENTS = {
    "trino/04-ctas-complete.json": 200,
    "marquez/event_large.json": 20,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg-bin", type=Path, default=None, help="PostgreSQL binaries (default: embedded)")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    real = (ROOT / "db" / "functions" / "033_json_unique_keys.sql").read_text()
    server = LocalPostgres(bin_path=args.pg_bin).start()
    try:
        localpg.provision(server, "bench")
        with psycopg.connect(server.dsn_for("metastore_owner", "bench"), autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            for name, calls in EVENTS.items():
                body = (ROOT / "tests" / "fixtures" / "openlineage" / name).read_bytes()
                conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body,))
                times: dict[str, list[float]] = {"with": [], "without": []}
                for _ in range(args.rounds):
                    for label, ddl in (("with", real), ("without", NOOP)):
                        conn.execute(ddl)
                        started = time.perf_counter()
                        for _ in range(calls):
                            conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone()
                        times[label].append((time.perf_counter() - started) / calls * 1000)
                with_, without = statistics.median(times["with"]), statistics.median(times["without"])
                print(
                    f"PostgreSQL {version[0] if version else '?'} {name} ({len(body)} bytes), median of "
                    f"{args.rounds} rounds x {calls} calls: ingest_event {without:.2f} ms without the check, "
                    f"{with_:.2f} ms with it (+{with_ - without:.2f} ms)"
                )
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
