"""What the durable spool costs: async mode with and without METASTORE_SPOOL_DIR under the same
load (wrk, 8 connections, 10 s, the benchmark's Trino events), alternated twice. Writes
bench/results/spool_cost.json: events/s and p99 of each run, and the ratios spool / memory.
With --baseline REV, each round also runs the service of that git revision with a spool (its
`service` and `db` from `git archive`), and the ratios spool / baseline compare the two spools
side by side.

    python -m bench.spool_cost [--seconds 10] [--connections 8] [--baseline HEAD~1]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from bench.run import FULL, Bench, have_wrk, workspace, wrk
from devtools.localpg import LocalPostgres, provision

ROOT = Path(__file__).resolve().parent.parent


def queue_full_count(metrics_text: str) -> float:
    return sum(
        float(line.split()[-1])
        for line in metrics_text.splitlines()
        if line.startswith("metastore_async_queue_full_total{")
    )


def checkout(rev: str, into: Path) -> Path:
    """The service package and SQL of a git revision, as files."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "service", "db"], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def summary(
    runs: list[dict[str, Any]], kinds: list[str], bodies: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """The runs with their medians per queue, and the spool's ratios to memory (and the baseline)."""

    def median(kind: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs if r["queue"] == kind))

    result: dict[str, Any] = {
        "load": {
            "connections": args.connections,
            "seconds": args.seconds,
            "event_bytes_median": int(statistics.median(map(len, bodies))),
            "settings": args.set,
            "baseline": args.baseline,
        },
        "runs": runs,
        "median": {
            kind: {"events_per_s": median(kind, "events_per_s"), "p99_ms": median(kind, "p99_ms")} for kind in kinds
        },
    }
    med = result["median"]
    result["ratio_spool_vs_memory"] = {
        key: round(med["spool"][key] / med["memory"][key], 3) for key in ("events_per_s", "p99_ms")
    }
    if args.baseline:
        result["ratio_spool_vs_baseline"] = {
            key: round(med["spool"][key] / med["baseline"][key], 3) for key in ("events_per_s", "p99_ms")
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="METASTORE_X=VALUE",
        help="a setting for both runs, e.g. METASTORE_ASYNC_QUEUE_BYTES=1073741824 so that the queue never fills",
    )
    parser.add_argument("--baseline", metavar="REV", help="also run the spool of this git revision, e.g. HEAD~1")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "spool_cost.json")
    args = parser.parse_args()
    if not have_wrk("spool_cost"):
        return 2
    work, tls, bodies, templates_file = workspace("metastore-spool-cost-")
    kinds = ["memory", "spool"]
    if args.baseline:
        kinds.append("baseline")
        baseline_path = checkout(args.baseline, work / "baseline")
    pg = LocalPostgres().start(durable=True)
    b = Bench(FULL, work, pg, tls, args.out.parent)
    runs: list[dict[str, Any]] = []
    try:
        provision(pg, "bench")
        for round_ in range(args.rounds):
            # Alternated: the spools' order changes from round to round.
            for kind in kinds if round_ % 2 == 0 else [kinds[0], *reversed(kinds[1:])]:
                env = {"METASTORE_INGEST_MODE": "async", **dict(x.split("=", 1) for x in args.set)}
                if kind != "memory":
                    env["METASTORE_SPOOL_DIR"] = str(work / f"{kind}-{round_}")
                if kind == "baseline":
                    # bench.noop_server of this tree (the working directory), the baseline's package.
                    env["PYTHONPATH"] = str(baseline_path / "service")
                service = b.start_service(**env)
                try:
                    row = wrk(service, templates_file, args.connections, args.seconds, "/api/v1/lineage")
                    row.update(
                        {"queue": kind, "round": round_, "queue_full_events": queue_full_count(service.metrics())}
                    )
                finally:
                    service.stop()
                print(f"  {row}", file=sys.stderr)
                runs.append(row)
    finally:
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)

    result = summary(runs, kinds, bodies, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
