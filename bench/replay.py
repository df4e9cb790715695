"""Reading stored events back out: the NDJSON feed, export, import and replay between two stores.

`make bench-replay` (or `python -m bench.replay [--events N] [--smoke]`): one PostgreSQL with
durable commits and three databases (a source seeded with Trino-like events of 3 KB to 250 KB,
median 7 KB, and two empty targets), a service over TLS in front of each, then:

- feed: one NDJSON stream of every event (GET /api/v1/events), events/s and MB/s, and the
  source service's RSS before and at its peak during the stream (the stream holds one page);
- export: `metastore export` to a gzip file;
- import: `metastore import` of that file into the first target (batches through the ingest);
- replay: `metastore replay` into the second target, one event per POST through the
  openlineage-python HTTP transport, as an OpenLineage endpoint receives them;
- its floor, side by side: the same events posted one by one by a plain HTTP client (one
  connection, as replay has) into a third target, read from the export file: what the receiving
  store's ingest allows one sequential sender.

Results: bench/results/replay.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import requests

from bench.common import emit
from bench.run import templates
from devtools.localpg import LocalPostgres, provision
from metastore import arguments, transfer
from tests.support.certs import write_tls_files
from tests.support.servers import Server, start_server

ROOT = Path(__file__).resolve().parent.parent


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cli(*args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    done = subprocess.run(
        [sys.executable, "-m", "metastore", *args], env=env, capture_output=True, text=True, timeout=3600
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def stream_feed(url: str, ca: Path, pid: int) -> dict[str, Any]:
    peak = [rss_mb(pid)]
    before = peak[0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    count, size = 0, 0
    started = time.monotonic()
    try:
        with requests.get(
            f"{url}/api/v1/events", headers={"Accept": "application/x-ndjson"}, stream=True, verify=str(ca), timeout=60
        ) as response:
            response.raise_for_status()
            for line in response.iter_lines(chunk_size=1 << 16):
                count += 1
                size += len(line) + 1
    finally:
        done.set()
        sampler.join()
    elapsed = time.monotonic() - started
    return {
        "events": count,
        "mb": round(size / 1e6, 1),
        "seconds": round(elapsed, 2),
        "events_per_second": round(count / elapsed),
        "mb_per_second": round(size / 1e6 / elapsed, 1),
        "service_rss_mb_before": round(before),
        "service_rss_mb_peak": round(peak[0]),
    }


def post_floor(url: str, ca: Path, dump: Path) -> dict[str, Any]:
    count = 0
    started = time.monotonic()
    with requests.Session() as session:
        for _, line in transfer.file_lines(str(dump), arguments.STORE_MAX_BODY + transfer.ENVELOPE_BYTES):
            response = session.post(
                f"{url}/api/v1/lineage",
                data=transfer.split_line(line).payload,
                headers={"Content-Type": "application/json"},
                verify=str(ca),
                timeout=30,
            )
            response.raise_for_status()
            count += 1
    elapsed = time.monotonic() - started
    return {"events": count, "seconds": round(elapsed, 2), "events_per_second": round(count / elapsed, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="a few hundred events, results not written")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    events = 300 if args.smoke else args.events
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "events": events,
    }
    work = Path(tempfile.mkdtemp(prefix="metastore-bench-replay-"))
    tls = write_tls_files(work)
    pg = LocalPostgres().start(durable=True)
    servers: list[Server] = []
    try:
        for name in ("source", "imported", "replayed", "posted"):
            provision(pg, name)
        with psycopg.connect(pg.dsn_for("postgres", "source")) as conn:
            results["postgres"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        started = time.monotonic()
        bodies = templates()
        with psycopg.connect(pg.dsn_for("metastore_service", "source"), autocommit=True) as conn:
            for first in range(0, events, 200):
                batch = [
                    bodies[i % len(bodies)].replace("@RUNID@", str(uuid.uuid4()), 1).encode()
                    for i in range(first, min(first + 200, events))
                ]
                conn.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (batch,))
        print(f"seeded {events} events in {time.monotonic() - started:.1f} s", file=sys.stderr)

        urls = {}
        for name in ("source", "imported", "replayed", "posted"):
            dsn = pg.dsn_for("metastore_service", name)
            servers.append(
                start_server(dsn, tls, work / f"service-{name}.log", ready="/readyz", METASTORE_LOG_LEVEL="WARNING")
            )
            urls[name] = servers[-1].url
        ca = str(tls.ca)

        results["feed_ndjson"] = stream_feed(urls["source"], tls.ca, servers[0].process.pid)
        print("feed", results["feed_ndjson"], file=sys.stderr)
        dump = work / "events.ndjson.gz"
        results["export"] = cli("export", "--from", urls["source"], "--ca", ca, "-o", str(dump))
        results["export"]["file_mb"] = round(dump.stat().st_size / 1e6, 1)
        print("export", results["export"], file=sys.stderr)
        results["import"] = cli("import", "--to", urls["imported"], "--ca", ca, str(dump))
        print("import", results["import"], file=sys.stderr)
        results["replay"] = cli("replay", "--from", urls["source"], "--ca", ca, "--to", urls["replayed"], "--to-ca", ca)
        print("replay", results["replay"], file=sys.stderr)
        results["post_floor"] = post_floor(urls["posted"], tls.ca, dump)
        results["replay"]["ratio_to_post_floor"] = round(
            results["replay"]["events_per_second"] / results["post_floor"]["events_per_second"], 2
        )
        print("post floor", results["post_floor"], file=sys.stderr)
        for name in ("imported", "replayed", "posted"):
            with psycopg.connect(pg.dsn_for("metastore_owner", name)) as conn:
                stored = conn.execute("SELECT count(*) FROM metastore.events").fetchone()
            if not stored or stored[0] != events:
                raise RuntimeError(f"{name} has {stored} events, not {events}")
    finally:
        for server in servers:
            server.stop()
        pg.cleanup()
    emit(results, None if args.smoke else args.out / "replay.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
