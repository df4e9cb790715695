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
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.run import FULL, ROOT, Bench, Service, body, insert_floor, open_loop, templates, wrk
from devtools.localpg import LocalPostgres, provision
from tests.support.certs import write_tls_files

# Before: a transaction per request (ingest_event), as until now. After: group commit (defaults).
VARIANTS = {
    "one commit each": {"METASTORE_GROUP_COMMIT_EVENTS": "1"},
    "group commit": {"METASTORE_GROUP_COMMIT_EVENTS": "64"},
}


def _samples(metrics_text: str, name: str) -> dict[str, float]:
    """Sum of each `name{...}` sample by its query label (or '' without one)."""
    out: dict[str, float] = {}
    for line in metrics_text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        query = line.split('query="', 1)[1].split('"', 1)[0] if 'query="' in line else ""
        if 'result="' in line and 'result="ok"' not in line:
            continue
        out[query] = out.get(query, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def where_time_goes(metrics_text: str) -> dict[str, Any]:
    """Per event: HTTP request time, database call time, and how many events one call stored."""

    def total(name: str, **labels: str) -> float:
        s = 0.0
        for line in metrics_text.splitlines():
            if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                s += float(line.rsplit(" ", 1)[1])
        return s

    route = {"route": "/api/v1/lineage"}
    requests = total("metastore_http_request_duration_seconds_count", **route)
    request_s = total("metastore_http_request_duration_seconds_sum", **route)
    db_s = sum(_samples(metrics_text, "metastore_db_call_duration_seconds_sum").get(q, 0.0) for q in _QUERIES)
    calls = sum(_samples(metrics_text, "metastore_db_call_duration_seconds_count").get(q, 0.0) for q in _QUERIES)
    return {
        "requests": int(requests),
        "request_mean_ms": round(request_s / requests * 1000, 3) if requests else None,
        "db_calls": int(calls),
        "db_call_mean_ms": round(db_s / calls * 1000, 3) if calls else None,
        "db_ms_per_event": round(db_s / requests * 1000, 3) if requests else None,
        "events_per_call": round(requests / calls, 2) if calls else None,
    }


_QUERIES = ("ingest_event", "ingest_events")


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


def database_only(dsn: str, bodies: list[str], rounds: int = 8) -> dict[str, Any]:
    """Milliseconds per event inside PostgreSQL alone (one connection, no HTTP): a commit per event
    (ingest_event, as without group commit), the same calls in one transaction (the commit's share),
    and ingest_events on groups of 4 and 16 (what group commit sends)."""
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        single = "SELECT * FROM metastore.ingest_event(%b)"
        group = "SELECT * FROM metastore.ingest_events(%b::bytea[], 'unauthenticated', NULL)"
        for i in range(len(bodies)):  # warm: plans cached, datasets exist
            conn.execute(single, (body(bodies[i], f"warm-{time.time_ns()}"),))
        for n in (4, 16):
            per: dict[str, list[float]] = {"ingest_event, a commit each": [], "ingest_event, one commit": []}
            per[f"ingest_events of {n}"] = []
            for r in range(rounds):
                for label, times in per.items():
                    batch = [body(bodies[(r * n + k) % len(bodies)], f"db-{time.time_ns()}-{k}") for k in range(n)]
                    started = time.perf_counter()
                    if label.startswith("ingest_events"):
                        conn.execute(group, (batch,)).fetchall()
                    elif label.endswith("one commit"):
                        with conn.transaction():
                            for b in batch:
                                conn.execute(single, (b,))
                    else:
                        for b in batch:
                            conn.execute(single, (b,))
                    times.append((time.perf_counter() - started) / n * 1000)
            out[f"groups of {n}"] = {label: round(statistics.median(t), 3) for label, t in per.items()}
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
    if not shutil.which("wrk"):
        print("bench: wrk is needed (apt-get install wrk)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="metastore-bench-gc-"))
    tls = write_tls_files(work)
    bodies = templates()
    templates_file = work / "templates.txt"
    templates_file.write_text("\n".join(bodies) + "\n")
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
