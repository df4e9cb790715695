"""`python -m bench.replica_reads`: reads while ingest runs, from the primary alone and from a
streaming replica (METASTORE_READ_REPLICA_URL), side by side in one run.

One throwaway PostgreSQL primary (durable: fsync and synchronous commit on) and a hot standby of it
made with `pg_basebackup -R`, both on this machine. Trino events (the small ones, as Trino sends most)
are stored on the primary at a fixed rate, open loop, in groups of ten per metastore.ingest_events
call as the service's group commit stores concurrent POSTs (straight to the database: the HTTP side
of ingest runs in other pods, and here would only take the two cores from the reads measured). Two
services serve reads: one without a replica (every read on the primary) and one with it. A reader
sends the read API's calls to one of them at a fixed rate, alternating between the two every round,
so that a noisy machine hits both alike; each read's latency and status is recorded. Writes
bench/results/replica-reads.json."""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.run import ROOT, body, templates
from devtools.localpg import LocalPostgres, free_port, provision
from tests.support.certs import write_tls_files
from tests.support.servers import Server, start_server
from tests.support.standby import start_standby, wait_for_replay

SMALL_EVENT_BYTES = 16_000  # Trino's usual events: a few KB


def read_paths(client: httpx.Client) -> list[str]:
    datasets = client.get("/api/v1/datasets", params={"limit": 50}).json()["datasets"]
    jobs = client.get("/api/v1/jobs", params={"limit": 20}).json()["jobs"]
    paths = ["/api/v1/datasets?limit=100", "/api/v1/jobs?limit=50", "/api/v1/runs?limit=50", "/api/v1/search?q=bench"]
    paths += [f"/api/v1/datasets/{d['id']}" for d in datasets[:10]]
    paths += [f"/api/v1/datasets/{d['id']}/lineage" for d in datasets[:10]]
    paths += [f"/api/v1/jobs/{j['id']}" for j in jobs[:10]]
    return paths


def read_round(server: Server, paths: list[str], rate: float, duration: float) -> dict[str, Any]:
    """Reads at a fixed rate (one after another, each sent on its time or at once when late)."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    with server.client(timeout=10) as client:
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < duration:
            due = start + n / rate
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            path = paths[n % len(paths)]
            n += 1
            began = time.perf_counter()
            try:
                status = client.get(path).status_code
            except httpx.HTTPError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                continue
            latencies.append(time.perf_counter() - began)
            if status != 200:
                errors[str(status)] = errors.get(str(status), 0) + 1
    return {"latencies": latencies, "errors": errors}


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    flat = sorted(x for r in rounds for x in r["latencies"])
    errors: dict[str, int] = {}
    for r in rounds:
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    p99s = [sorted(r["latencies"])[int(len(r["latencies"]) * 0.99) - 1] * 1000 for r in rounds]
    return {
        "reads": len(flat),
        "errors": errors,
        "p50_ms": round(statistics.median(flat) * 1000, 2),
        "p99_ms": round(flat[int(len(flat) * 0.99) - 1] * 1000, 2),
        "p99_ms_by_round": [round(p, 2) for p in p99s],
    }


def fallbacks(server: Server) -> float:
    total = 0.0
    for line in server.metrics().splitlines():
        if line.startswith("metastore_read_replica_fallbacks_total{"):
            total += float(line.split()[-1])
    return total


def ingest_loop(dsn: str, bodies: list[str], rate: int, duration: float, group: int = 10) -> dict[str, Any]:
    """rate events/s for duration s, a call of `group` events every group/rate s whatever the
    answers (four connections take the calls in turn, so that a slow one does not hold the rest)."""
    calls = int(rate * duration / group)
    latencies: list[float] = []
    errors: list[str] = []
    stored: list[int] = []
    begin = time.monotonic()

    def worker(k: int, workers: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            for i in range(k, calls, workers):
                due = begin + i * group / rate
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                batch = [body(bodies[(i * group + j) % len(bodies)], str(uuid.uuid4())) for j in range(group)]
                started = time.perf_counter()
                try:
                    row = conn.execute(
                        "SELECT count(*) FILTER (WHERE status = 'stored') FROM metastore.ingest_events(%b::bytea[])",
                        (batch,),
                    ).fetchone()
                    stored.append(row[0] if row else 0)
                except psycopg.Error as exc:
                    errors.append(type(exc).__name__)
                    continue
                latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=worker, args=(k, 4)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - begin
    latencies.sort()
    return {
        "rate": rate,
        "events_per_call": group,
        "events_stored_per_s": round(sum(stored) / elapsed, 1),
        "call_errors": len(errors),
        "call_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2) if latencies else None,
    }


def seed(dsn: str, bodies: list[str], count: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(count):
            conn.execute("SELECT metastore.ingest_event(%b)", (body(bodies[i % len(bodies)], str(uuid.uuid4())),))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=int, default=500, help="ingest: events per second")
    parser.add_argument("--read-rate", type=float, default=20, help="reads per second")
    parser.add_argument("--round-s", type=float, default=15)
    parser.add_argument("--rounds", type=int, default=4, help="rounds per target (alternating)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "replica-reads.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="metastore-replica-bench-"))
    tls = write_tls_files(work)
    bodies = [t for t in templates() if len(t) < SMALL_EVENT_BYTES]
    primary = LocalPostgres().start(durable=True)
    standby: LocalPostgres | None = None
    servers: list[Server] = []
    try:
        provision(primary, "bench")
        service_dsn = primary.dsn_for("metastore_service", "bench")
        seed(service_dsn, bodies, 2_000)
        standby = start_standby(primary)
        wait_for_replay(primary, standby)
        common = {"METASTORE_LOG_LEVEL": "WARNING"}

        def serve(name: str, **env: str) -> Server:
            srv = start_server(
                service_dsn, tls, work / f"{name}.log", port=free_port(), ready="/readyz", **common, **env
            )
            servers.append(srv)
            return srv

        targets = {
            "primary": serve("primary"),
            "replica": serve("replica", METASTORE_READ_REPLICA_URL=standby.dsn_for("metastore_service", "bench")),
        }
        with targets["primary"].client() as client:
            paths = read_paths(client)
        duration = args.round_s * args.rounds * len(targets) + 5
        loop: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: loop.update(ingest_loop(service_dsn, bodies, args.rate, duration)))
        thread.start()
        time.sleep(3)  # the ingest at its rate before the first read
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in targets}
        fallbacks_before = fallbacks(targets["replica"])
        for i in range(args.rounds * len(targets)):
            name = list(targets)[i % len(targets)]
            rounds[name].append(read_round(targets[name], paths, args.read_rate, args.round_s))
            print(f"  {name}: p99 {summary(rounds[name][-1:])['p99_ms']} ms", file=sys.stderr)
        fallbacks_during = fallbacks(targets["replica"]) - fallbacks_before
        with targets["replica"].client() as client:
            replica_state = client.get("/readyz").json()["read_replica"]
        thread.join()
        result = {
            "machine": f"{platform.machine()}, {platform.system()}, shared with other work",
            "ingest": loop,
            "reads": {"rate_per_s": args.read_rate, "round_s": args.round_s, "paths": len(paths)},
            "primary_only": summary(rounds["primary"]),
            "replica": summary(rounds["replica"]),
            "replica_fallbacks_during_reads": fallbacks_during,
            "replica_state_at_end": replica_state,
        }
        result["p99_ratio_replica_to_primary"] = round(
            result["replica"]["p99_ms"] / result["primary_only"]["p99_ms"], 2
        )
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    finally:
        for srv in servers:
            srv.stop()
        if standby is not None:
            standby.cleanup()
        primary.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
