"""Normal clients' throughput with and without two senders of the largest events, side by side in
one run (`python -m bench.heavy_senders`; bench/results/heavy_senders.json).

Normal clients: wrk posting distinct Trino-like events (bench/run.py's templates, 3 KB to 250 KB)
over 8 connections to the real service over TLS, at default settings (sync mode, group commit),
against a durable PostgreSQL. Heavy senders: two clients each posting, as soon as it is answered,
an event of the body limit (METASTORE_MAX_BODY_BYTES): `fanout` reads as many input datasets as
fit (the database cannot store it within the ingest budget), `padded` carries one long string
(storable alone, in about 0.6 s here); `-gzip`: the same sent gzipped (16 KB on the wire).

For each kind, on one fresh service, `--pairs` times: wrk alone, then wrk while the heavy senders
post; the ratio is per pair (a shared machine drifts between pairs). Also counted per run: what
the normal clients were refused (non-2xx), the breaker's refusals
(`metastore_http_refused_total{reason="database_failing"}`), missed deadlines per lane, the CPU
the service and PostgreSQL used (cores), and what the heavy senders were answered.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench.run import ROOT, templates, wrk
from devtools.localpg import LocalPostgres, provision
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.events import run_event
from tests.support.servers import Server, start_server

MIB = 1 << 20


def heavy_body(kind: str, size: int) -> bytes:
    """An event of about `size` bytes with a @RUNID@ slot: `fanout` (input datasets) or `padded`."""
    event = run_event("@RUNID@", namespace="heavy", dataset_namespace="trino://heavy:8080", job="heavy")
    if kind == "fanout":
        one = len(json.dumps({"namespace": "trino://heavy:8080", "name": "cat.sch.table_0000000"})) + 1
        event["inputs"] = [
            {"namespace": "trino://heavy:8080", "name": f"cat.sch.table_{i:07d}"} for i in range(size // one - 20)
        ]
    else:
        event["run"]["facets"] = {"heavy": {"_producer": "bench", "_schemaURL": "https://example.com/s", "pad": ""}}
        event["run"]["facets"]["heavy"]["pad"] = "x" * (size - len(json.dumps(event)) - 64)
    return json.dumps(event, separators=(",", ":")).encode()


class HeavySenders:
    """`n` clients, each posting the heavy event (a new run id each time) as soon as answered."""

    def __init__(self, server: Server, body: bytes, encoding: str | None = None, n: int = 2) -> None:
        self.server, self.body, self.encoding, self.n = server, body, encoding, n
        self.outcomes: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _one(self, k: int) -> None:
        verify = ssl.create_default_context(cafile=str(self.server.ca))
        headers = {"Content-Type": "application/json"}
        if self.encoding:
            headers["Content-Encoding"] = self.encoding
            bodies = [self.body]  # the same event: once stored, a duplicate
        else:
            # Made once (the client's own work is not what is measured): a few distinct events each.
            tag = time.time_ns()
            bodies = [self.body.replace(b"@RUNID@", f"heavy-{tag}-{k}-{i}".encode(), 1) for i in range(4)]
        async with httpx.AsyncClient(base_url=self.server.url, verify=verify, timeout=60) as http:
            i = 0
            while not self._stop.is_set():
                i += 1
                data = bodies[i % len(bodies)]
                try:
                    r = await http.post("/api/v1/lineage", content=data, headers=headers)
                    code = r.json().get("error", {}).get("code") if r.status_code >= 400 else None
                    self.outcomes[f"{r.status_code} {code}" if code else str(r.status_code)] += 1
                except httpx.HTTPError as exc:
                    self.outcomes[type(exc).__name__] += 1

    async def _run(self) -> None:
        await asyncio.gather(*(self._one(k) for k in range(self.n)))

    def __enter__(self) -> HeavySenders:
        self._thread.start()
        time.sleep(2)  # both are posting before the normal clients start
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)


def counter(metrics_text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in metrics_text.splitlines():
        named = line.startswith((name + "{", name + " "))
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def measure(server: Server, pg: LocalPostgres, templates_file: Path, clients: int, duration: float) -> dict[str, Any]:
    """wrk for `duration` s, with what the service and PostgreSQL spent (cores) and refused."""
    before = server.metrics()
    cpu_before = (cpu_seconds([server.process.pid]), cpu_seconds(pg.pids()), time.monotonic())
    row = wrk(server, templates_file, clients, duration, "/api/v1/lineage")
    elapsed = time.monotonic() - cpu_before[2]
    row["service_cores"] = round((cpu_seconds([server.process.pid]) - cpu_before[0]) / elapsed, 2)
    row["postgres_cores"] = round((cpu_seconds(pg.pids()) - cpu_before[1]) / elapsed, 2)
    row["load_average"] = os.getloadavg()[0]
    after = server.metrics()
    row["refused_by_breaker"] = counter(after, "metastore_http_refused_total", reason="database_failing") - counter(
        before, "metastore_http_refused_total", reason="database_failing"
    )
    for lane in ("group", "large"):
        name = "metastore_ingest_deadline_missed_total"
        row[f"deadline_missed_{lane}"] = counter(after, name, lane=lane) - counter(before, name, lane=lane)
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="metastore-heavy-"))
    tls: TLSFiles = write_tls_files(work)
    templates_file = work / "templates.txt"
    templates_file.write_text("\n".join(templates()) + "\n")
    pg = LocalPostgres().start(durable=True)
    rows: list[dict[str, Any]] = []
    try:
        provision(pg, "bench")
        dsn = pg.dsn_for("metastore_service", "bench")
        for kind in args.heavy:
            body, encoding = heavy_body(kind.removesuffix("-gzip"), args.heavy_bytes or (16 * MIB - 4096)), None
            if kind.endswith("-gzip"):
                body, encoding = gzip.compress(body, 6), "gzip"
            server = start_server(
                dsn, tls, work / f"service-{kind}.log", ready="/readyz", METASTORE_LOG_LEVEL="WARNING"
            )
            server.timeout = 60
            try:
                for pair in range(args.pairs):
                    alone = measure(server, pg, templates_file, args.clients, args.duration)
                    with HeavySenders(server, body, encoding) as heavy:
                        beside = measure(server, pg, templates_file, args.clients, args.duration)
                    beside["heavy_outcomes"] = dict(heavy.outcomes)
                    time.sleep(2)  # the last heavy call ends before the next run alone
                    row = {
                        "heavy": kind,
                        "pair": pair + 1,
                        "heavy_bytes": len(body),
                        "alone": alone,
                        "beside_heavy": beside,
                        "ratio": round(beside["events_per_s"] / alone["events_per_s"], 3),
                    }
                    print(json.dumps(row), file=sys.stderr)
                    rows.append(row)
            finally:
                server.stop()
    finally:
        pg.cleanup()
    summary = {}
    for kind in args.heavy:
        mine = [r for r in rows if r["heavy"] == kind]
        summary[kind] = {
            "ratios": [r["ratio"] for r in mine],
            "median_ratio": statistics.median(r["ratio"] for r in mine),
            "normal_errors_beside_heavy": sum(r["beside_heavy"]["errors"] for r in mine),
            "refused_by_breaker_beside_heavy": sum(r["beside_heavy"]["refused_by_breaker"] for r in mine),
            "extra_cores_beside_heavy": round(
                statistics.median(
                    r["beside_heavy"]["service_cores"]
                    + r["beside_heavy"]["postgres_cores"]
                    - r["alone"]["service_cores"]
                    - r["alone"]["postgres_cores"]
                    for r in mine
                ),
                2,
            ),
        }
    return {
        "command": "python -m bench.heavy_senders " + " ".join(sys.argv[1:]),
        "machine": {"cpus": _cpus(), "python": platform.python_version()},
        "normal_clients": args.clients,
        "duration_s": args.duration,
        "summary": summary,
        "pairs": rows,
    }


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="runs alone and beside the heavy senders, alternating")
    parser.add_argument("--duration", type=float, default=8, help="seconds of each wrk run")
    parser.add_argument("--clients", type=int, default=8, help="wrk connections posting normal events")
    kinds = ["fanout", "padded", "fanout-gzip", "padded-gzip"]
    parser.add_argument("--heavy", nargs="+", default=["fanout", "padded", "padded-gzip"], choices=kinds)
    parser.add_argument("--heavy-bytes", type=int, default=0, help="size of a heavy event (default: the body limit)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "heavy_senders.json")
    args = parser.parse_args()
    report = run(args)
    if args.out.name != "-":
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["summary"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
