"""`python -m bench.citus`: what each layout costs per event, side by side on one machine, in one run:
plain PostgreSQL 15 and Citus 13.2.2 (a coordinator and two workers on the same machine, the raw
events distributed: V0010), the same binaries, the same settings, rounds alternating which goes
first so that a noisy machine slows both alike.

- ingest: bench/run.py's Trino events (3 KB to 250 KB, a new run each, eventTime now), one
  `ingest_event` call per event on one connection (ms per event), then from --concurrency
  connections for --seconds (events/s, p50, p99 of a call);
- storage: bytes per event of events and event_datasets (on Citus, of their shards on the workers);
- archive: `metastore db retention --archive`'s reading and writing of a day (µs and gzip bytes per
  event), the day read in id order from the layout's events table.

Writes --out (bench/results/citus.json); docs/scale.md reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.common import emit
from bench.run import body, templates
from devtools import localpg
from devtools.citus import CitusCluster
from devtools.localpg import LocalPostgres
from metastore import archive, migrations

ROOT = Path(__file__).resolve().parent.parent
DB = "bench"


def shapes() -> list[str]:
    """bench/run.py's Trino events, each with a @RUNID@ slot, dated now (today's partition)."""
    now = datetime.now(UTC)
    out = []
    for i, text in enumerate(templates(60)):
        event = json.loads(text)
        event["eventTime"] = (now - timedelta(microseconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out.append(json.dumps(event, separators=(",", ":")))
    return out


def bodies(count: int, tag: str, offset: int = 0) -> list[bytes]:
    """count events of the mix, each a new run."""
    mix = shapes()
    return [body(mix[(offset + i) % len(mix)], f"{tag}-{i}-{time.time_ns()}") for i in range(count)]


def sequential(dsn: str, events: list[bytes]) -> float:
    """Milliseconds per event, one ingest_event call (and commit) per event."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.perf_counter()
        for b in events:
            row = conn.execute("SELECT status FROM metastore.ingest_event(%b)", (b,)).fetchone()
            assert row is not None and row[0] == "stored", row
        return (time.perf_counter() - started) / len(events) * 1000


def concurrent(dsn: str, connections: int, seconds: float, tag: str) -> dict[str, float]:
    """Events per second from `connections` sessions ingesting for `seconds`, and call latencies."""
    mix = shapes()
    latencies: list[list[float]] = [[] for _ in range(connections)]
    errors: list[BaseException] = []
    start = threading.Barrier(connections + 1)

    def one(k: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                start.wait()
                deadline, i = time.monotonic() + seconds, 0
                while time.monotonic() < deadline:
                    event = body(mix[(k * 17 + i) % len(mix)], f"{tag}-{k}-{i}")
                    began = time.perf_counter()
                    row = conn.execute("SELECT status FROM metastore.ingest_event(%b)", (event,)).fetchone()
                    latencies[k].append(time.perf_counter() - began)
                    assert row is not None and row[0] == "stored", row
                    i += 1
        except BaseException as exc:  # re-raised by the caller
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=one, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    start.wait()
    began = time.monotonic()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    if errors:
        raise errors[0]
    every = sorted(x for per in latencies for x in per)
    return {
        "events_per_s": round(len(every) / elapsed, 1),
        "p50_ms": round(every[len(every) // 2] * 1000, 2),
        "p99_ms": round(every[int(len(every) * 0.99)] * 1000, 2),
    }


def storage(dsn: str, citus: bool) -> dict[str, float]:
    """Bytes per event of the raw tables (heap, TOAST, indexes), on Citus summed over the shards."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        events = conn.execute("SELECT count(*) FROM metastore.events").fetchone()
        assert events is not None
        out: dict[str, float] = {"events": events[0]}
        for table in ("events", "event_datasets"):
            row = conn.execute(SIZES["citus" if citus else "plain"], (f"metastore.{table}",)).fetchone()
            assert row is not None
            out[f"{table}_bytes_per_event"] = round(int(row[0]) / events[0], 1)
    return out


# Every partition's size: on Citus, citus_total_relation_size sums a table's shards on the workers.
SIZES = {
    "plain": "SELECT sum(pg_total_relation_size(i.inhrelid)) FROM pg_inherits i WHERE i.inhparent = %s::regclass",
    "citus": "SELECT sum(citus_total_relation_size(i.inhrelid)) FROM pg_inherits i WHERE i.inhparent = %s::regclass",
}


def archive_cost(dsn: str) -> dict[str, float]:
    """The archive's work for today's events (read in id order, rendered, gzip, fsync), not removed."""
    limits = migrations.Limits()
    with tempfile.TemporaryDirectory() as tmp, migrations.connect(dsn, limits) as conn:
        migrations.run(conn, "SELECT set_config('TimeZone', 'UTC', true)", limits, "session")
        day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        started = time.perf_counter()
        written = archive._write_day(
            lambda s, what, **p: migrations.run(conn, s, limits, what, **p),
            Path(tmp),
            "bench",
            day.date(),
            day,
            day + timedelta(days=1),
        )
        elapsed = time.perf_counter() - started
        conn.rollback()
        return {
            "events": written.events,
            "us_per_event": round(elapsed / written.events * 1e6, 1),
            "gzip_bytes_per_event": round(written.path.stat().st_size / written.events, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300, help="events per sequential round and layout")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--durable", action="store_true", help="fsync and synchronous commit on every node")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "citus.json")
    args = parser.parse_args()

    started = time.monotonic()
    with CitusCluster() as cluster, LocalPostgres(bin_path=cluster.bin) as plain:
        if args.durable:
            for node in [plain, *cluster.nodes]:
                node.stop()
            plain.start(durable=True)
            cluster.start(durable=True)
        cluster.provision(DB, "metastore_owner", "metastore_service")
        dsns: dict[str, dict[str, str]] = {}
        for label, server in (("plain", plain), ("citus", cluster)):
            localpg.provision(server, DB)
            dsns[label] = {
                "service": server.dsn_for("metastore_service", DB),
                "owner": server.dsn_for("metastore_owner", DB),
            }
        for label in dsns:  # warm: plans cached, datasets exist
            sequential(dsns[label]["service"], bodies(60, f"warm-{label}"))

        per_event: dict[str, list[float]] = {label: [] for label in dsns}
        for r in range(args.rounds):
            for label in list(dsns) if r % 2 == 0 else list(reversed(dsns)):
                per_event[label].append(sequential(dsns[label]["service"], bodies(args.events, f"seq-{r}")))
                print(f"round {r} {label}: {per_event[label][-1]:.2f} ms per event", flush=True)
        loads: dict[str, list[dict[str, float]]] = {label: [] for label in dsns}
        for r in range(2):
            for label in list(dsns) if r % 2 == 0 else list(reversed(dsns)):
                loads[label].append(concurrent(dsns[label]["service"], args.concurrency, args.seconds, f"c{r}"))
                print(f"concurrent {r} {label}: {loads[label][-1]}", flush=True)

        results: dict[str, Any] = {"layouts": {}}
        for label in dsns:
            citus = label == "citus"
            results["layouts"][label] = {
                "ingest_ms_per_event_median": round(statistics.median(per_event[label]), 2),
                "ingest_ms_per_event_rounds": [round(x, 2) for x in per_event[label]],
                f"ingest_{args.concurrency}_connections": loads[label],
                "storage": storage(dsns[label]["owner"], citus),
                "archive": archive_cost(dsns[label]["owner"]),
            }
        ratio = (
            results["layouts"]["citus"]["ingest_ms_per_event_median"]
            / results["layouts"]["plain"]["ingest_ms_per_event_median"]
        )
        throughput = statistics.median(x["events_per_s"] for x in loads["plain"]) / statistics.median(
            x["events_per_s"] for x in loads["citus"]
        )
        results["citus_over_plain"] = {
            "ms_per_event_one_connection": round(ratio, 2),
            f"time_per_event_{args.concurrency}_connections": round(throughput, 2),
        }
    results["setup"] = {
        "command": "python -m bench.citus " + " ".join(f"--{k} {v}" for k, v in vars(args).items() if k != "out"),
        "postgresql": "15 (Debian), the same binaries for both layouts",
        "citus": "13.2.2, a coordinator and 2 workers on the same machine, citus.shard_count 4",
        "durable": args.durable,
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "seconds": round(time.monotonic() - started, 1),
    }
    emit(results, args.out)


if __name__ == "__main__":
    main()
