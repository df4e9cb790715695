"""Sync ingest with and without group commit, side by side in one run, against the insert floor:
the `make bench` pieces for it (bench/run.py's wrk at 8 and 32 clients, its bare-insert floor,
and its 200 events/s open loop, each mode from a fresh service), and the database's own time
per event, a commit each against groups. Writes bench/results/group_commit.json.

`--rounds` repeats the closed-loop comparison (floor, then each variant, per concurrency) to see
the noise of a shared machine; ratios are per round, each against that round's floor.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import psycopg

from bench.run import (
    FULL,
    ROOT,
    Bench,
    Service,
    database_only,
    have_wrk,
    insert_floor,
    open_loop,
    where_time_goes,
    workspace,
    wrk,
)
from devtools.localpg import LocalPostgres, provision

# Before: a transaction per request (ingest_event), as until now. After: group commit (defaults).
VARIANTS = {
    "one commit each": {"METASTORE_GROUP_COMMIT_EVENTS": "1"},
    "group commit": {"METASTORE_GROUP_COMMIT_EVENTS": "64"},
}


def closed_loop(b: Bench, templates_file: Path, bodies: list[str], concurrency: int, duration: int) -> list[Any]:
    rows: list[dict[str, Any]] = []
    floor = insert_floor(b.owner_dsn, bodies, concurrency, duration)
    rows.append({"kind": "insert floor", **floor})
    for label, env in VARIANTS.items():
        service = b.start_service(METASTORE_INGEST_MODE="sync", **env)
        try:
            row = {"kind": f"sync, {label}", **wrk(service, templates_file, concurrency, duration, "/api/v1/lineage")}
            row["vs_insert_floor"] = round(row["events_per_s"] / floor["events_per_s"], 3)
            row["where_time_goes"] = where_time_goes(service.metrics())
        finally:
            service.stop()
        rows.append(row)
        print(f"  {row}", file=sys.stderr)
    return rows


def open_loop_by_variant(b: Bench, templates_file: Path, rate: int, duration: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, env in VARIANTS.items():
        service: Service = b.start_service(METASTORE_INGEST_MODE="sync", **env)
        try:
            result = open_loop(service, templates_file, rate, duration)
            result["where_time_goes"] = where_time_goes(service.metrics())
        finally:
            service.stop()
        out[label] = result
        print(f"  open loop, {label}: {result}", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration", type=int, default=5, help="seconds per closed-loop measurement")
    parser.add_argument("--rate-duration", type=int, default=FULL.rate_duration_s)
    parser.add_argument("--rate", type=int, default=FULL.rate)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "group_commit.json")
    args = parser.parse_args()
    if not have_wrk("bench"):
        return 2
    work, tls, bodies, templates_file = workspace("metastore-bench-gc-")
    pg = LocalPostgres().start(durable=True)
    b = Bench(FULL, work, pg, tls, args.out.parent)
    results: dict[str, Any] = {"command": "python -m bench.group_commit " + " ".join(sys.argv[1:])}
    try:
        provision(pg, "bench")
        with psycopg.connect(pg.dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        results["machine"] = {"postgresql": version[0] if version else "?", "durable_commits": True}
        print("database only ...", file=sys.stderr)
        results["database_ms_per_event"] = database_only(b.service_dsn, bodies)
        rounds = []
        for r in range(args.rounds):
            for c in args.concurrency:
                print(f"round {r + 1}, {c} clients ...", file=sys.stderr)
                rounds.append(
                    {"round": r + 1, "concurrency": c, "rows": closed_loop(b, templates_file, bodies, c, args.duration)}
                )
        results["closed_loop"] = rounds
        summary = []
        for c in args.concurrency:
            per = [x for x in rounds if x["concurrency"] == c]
            row: dict[str, Any] = {"concurrency": c}
            for label in VARIANTS:
                ratios = [y["vs_insert_floor"] for x in per for y in x["rows"] if y["kind"] == f"sync, {label}"]
                row[f"{label}: vs insert floor (median of rounds)"] = statistics.median(ratios)
            summary.append(row)
        results["ratios"] = summary
        print(f"open loop {args.rate} ev/s ...", file=sys.stderr)
        results["open_loop"] = open_loop_by_variant(b, templates_file, args.rate, args.rate_duration)
    finally:
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    shown = ("ratios", "open_loop", "database_ms_per_event")
    print(json.dumps({k: results[k] for k in shown}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
