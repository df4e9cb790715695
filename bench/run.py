"""`make bench`: ingest throughput and latency against the physical floors, measured side by side
in one run, plus backfill, the read API at scale, and the service's memory. Writes
bench/results/results.json and PNG plots. `--smoke` is a seconds-long run of the same harness (CI).

Everything runs on this machine against loopback: a durable PostgreSQL (fsync and synchronous
commit on; shared_buffers 1 GB, `--shared-buffers` to change it, all else at its defaults), the real
service over TLS, wrk as the HTTP client.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from devtools.localpg import LocalPostgres, free_port, provision
from metastore import maintenance
from tests.support.certs import TLSFiles, write_tls_files
from tests.support.servers import Server, start_server

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "openlineage" / "trino"


@dataclass
class Plan:
    duration_s: float
    concurrencies: list[int]
    rate_duration_s: float
    rate: int
    backfill_events: int
    dataset_counts: list[int]
    read_samples: int
    profile: bool


FULL = Plan(10, [1, 8, 32], 10, 200, 1_000_000, [10_000, 1_000_000], 300, True)
SMOKE = Plan(1, [1, 8], 1, 50, 2_000, [2_000], 20, False)


# ---------------------------------------------------------------- events


def have_wrk(who: str) -> bool:
    """Whether wrk, the HTTP load generator, is installed; says how to get it when it is not."""
    if shutil.which("wrk"):
        return True
    print(f"{who}: wrk is needed (apt-get install wrk)", file=sys.stderr)
    return False


def templates(count: int = 60) -> list[str]:
    """Distinct Trino COMPLETE events of a few KB to a few hundred KB, each with a @RUNID@ slot."""
    bases = [
        json.loads((FIXTURES / n).read_text())
        for n in ("04-ctas-complete.json", "02-select-complete.json", "05-select-runtime-fail.json")
    ]
    sizes = [3_000, 5_000, 8_000, 12_000, 30_000, 60_000, 250_000]
    weights = [30, 20, 15, 10, 12, 8, 5]
    plan = [s for s, w in zip(sizes, weights, strict=True) for _ in range(w)]
    out = []
    for i in range(count):
        event = json.loads(json.dumps(bases[i % len(bases)]))
        event["run"]["runId"] = "@RUNID@"
        event["job"]["name"] = f"bench_query_{i}"
        for k, dataset in enumerate(event.get("inputs", []) + event.get("outputs", [])):
            dataset["name"] = f"{dataset['name']}_{(i * 7 + k) % 50}"
        target = plan[(i * 37) % len(plan)]
        if target < 10_000:
            # Small events: the statistics facet alone is several KB in the fixtures.
            event["run"]["facets"].pop("trino_query_statistics", None)
            event["run"]["facets"].pop("trino_query_context", None)
        text = json.dumps(event, separators=(",", ":"))
        pad = max(0, target - len(text))
        # Real events carry long plan and statistics texts in their run facets.
        event["run"]["facets"].setdefault("trino_query_statistics", {})["planText"] = "x" * pad
        out.append(json.dumps(event, separators=(",", ":")))
    return out


def workspace(prefix: str) -> tuple[Path, TLSFiles, list[str], Path]:
    """A scratch folder with a server certificate and wrk's event templates: (folder, TLS files,
    the templates, the file wrk reads them from)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    bodies = templates()
    templates_file = work / "templates.txt"
    templates_file.write_text("\n".join(bodies) + "\n")
    return work, write_tls_files(work), bodies, templates_file


def body(template: str, run_id: str) -> bytes:
    return template.replace("@RUNID@", run_id, 1).encode()


# ---------------------------------------------------------------- processes


# The service under test (tests.support.servers.Server): its client, /metrics, RSS, stop.
Service = Server


@dataclass
class Bench:
    plan: Plan
    work: Path
    pg: LocalPostgres
    tls: TLSFiles
    results_dir: Path
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def service_dsn(self) -> str:
        return self.pg.dsn_for("metastore_service", "bench")

    @property
    def owner_dsn(self) -> str:
        return self.pg.dsn_for("metastore_owner", "bench")

    def start_service(self, **env: str) -> Service:
        port = free_port()
        service = start_server(
            self.service_dsn,
            self.tls,
            self.work / f"service-{port}.log",
            port=port,
            module="bench.noop_server",
            ready="/readyz",
            **{"METASTORE_POOL_MAX": "32", "METASTORE_LOG_LEVEL": "WARNING", **env},
        )
        service.timeout = 30
        return service


def wrk(service: Service, templates_file: Path, concurrency: int, duration: float, path: str) -> dict[str, Any]:
    threads = min(concurrency, 2)
    out = subprocess.run(
        [
            "wrk",
            "-t",
            str(threads),
            "-c",
            str(concurrency),
            "-d",
            f"{duration}s",
            "--timeout",
            "10s",
            "-s",
            str(ROOT / "bench" / "post.lua"),
            service.url,
            "--",
            str(templates_file),
            path,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 60,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRKJSON "))
    raw = json.loads(line.removeprefix("WRKJSON "))
    seconds = raw["duration_us"] / 1e6
    errors = raw["errors_status"] + raw["errors_connect"] + raw["errors_timeout"]
    return {
        "concurrency": concurrency,
        "requests": raw["requests"],
        "errors": errors,
        "events_per_s": round((raw["requests"] - errors) / seconds, 1),
        "p50_ms": raw["p50_us"] / 1000,
        "p90_ms": raw["p90_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
        "max_ms": raw["max_us"] / 1000,
    }


def insert_floor(dsn: str, bodies: list[str], concurrency: int, duration: float) -> dict[str, Any]:
    """The same events as jsonb into a bare table over the same number of connections."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigint GENERATED ALWAYS AS IDENTITY, payload jsonb)")
    counts = [0] * concurrency
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    stop_at = time.monotonic() + duration

    def worker(n: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                started = time.perf_counter()
                text = bodies[i % len(bodies)].replace("@RUNID@", f"floor-{n}-{i}-{time.time_ns()}", 1)
                conn.execute("INSERT INTO bench_floor (payload) VALUES (%s::jsonb)", (text,))
                latencies[n].append(time.perf_counter() - started)
                counts[n] += 1

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(concurrency)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    flat = sorted(x for xs in latencies for x in xs)
    return {
        "concurrency": concurrency,
        "events_per_s": round(sum(counts) / elapsed, 1),
        "p50_ms": round(flat[len(flat) // 2] * 1000, 3),
        "p99_ms": round(flat[int(len(flat) * 0.99)] * 1000, 3),
    }


def _openloop_binary() -> Path:
    """bench/openloop (Go, standard library only) built once per source version into the tools cache."""
    source = ROOT / "bench" / "openloop"
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in [*sorted(source.glob("*.go")), source / "go.mod"]))
    cache = Path(os.environ.get("METASTORE_TOOLS_CACHE", Path.home() / ".cache" / "metastore-tools"))
    binary = cache / f"openloop-{digest.hexdigest()[:16]}"
    if not binary.exists():
        go = shutil.which("go") or "/usr/local/go/bin/go"
        cache.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(f".{os.getpid()}")
        subprocess.run([go, "build", "-o", str(partial), "."], cwd=source, check=True, timeout=600)
        partial.rename(binary)
    return binary


def open_loop(
    service: Service, templates_file: Path, rate: int, duration: float, path: str = "/api/v1/lineage"
) -> dict[str, Any]:
    """Open loop: a request every 1/rate s whatever the answers, as Trino's queries arrive."""
    out = subprocess.run(
        [
            str(_openloop_binary()),
            f"-url={service.url}{path}",
            f"-ca={service.ca}",
            f"-bodies={templates_file}",
            f"-rate={rate}",
            f"-duration={duration}",
            f"-tag=rate-{time.time_ns()}",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + 60,
    ).stdout
    result: dict[str, Any] = json.loads(out)
    result["statuses"] = {int(k): v for k, v in result["statuses"].items()}
    return result


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


def where_time_goes(metrics_text: str, before: str = "") -> dict[str, Any]:
    """Per event: HTTP request time, database call time, and how many events one call stored;
    from the service's metrics, less those of `before` (the same service, earlier)."""

    def totals(text: str) -> list[float]:
        """Requests, their seconds, ingest calls' seconds, ingest calls."""

        def total(name: str) -> float:
            return sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith(name + "{") and 'route="/api/v1/lineage"' in line
            )

        def db(name: str) -> float:
            return sum(_samples(text, name).get(q, 0.0) for q in _QUERIES)

        return [
            total("metastore_http_request_duration_seconds_count"),
            total("metastore_http_request_duration_seconds_sum"),
            db("metastore_db_call_duration_seconds_sum"),
            db("metastore_db_call_duration_seconds_count"),
        ]

    requests, request_s, db_s, calls = (x - y for x, y in zip(totals(metrics_text), totals(before), strict=True))
    return {
        "requests": int(requests),
        "request_mean_ms": round(request_s / requests * 1000, 3) if requests else None,
        "db_calls": int(calls),
        "db_call_mean_ms": round(db_s / calls * 1000, 3) if calls else None,
        "db_ms_per_event": round(db_s / requests * 1000, 3) if requests else None,
        "events_per_call": round(requests / calls, 2) if calls else None,
    }


_QUERIES = ("ingest_event", "ingest_events")


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


def run_ingest(b: Bench, bodies: list[str], templates_file: Path) -> None:
    plan = b.plan
    rows: list[dict[str, Any]] = []
    for mode in ("sync", "async"):
        service = b.start_service(METASTORE_INGEST_MODE=mode)
        try:
            for c in plan.concurrencies:
                if mode == "sync":
                    rows.append(
                        {"kind": "noop floor", **wrk(service, templates_file, c, plan.duration_s, "/api/v1/noop")}
                    )
                    rows.append(
                        {
                            "kind": "insert floor",
                            **insert_floor(
                                b.service_dsn.replace("metastore_service", "metastore_owner"),
                                bodies,
                                c,
                                plan.duration_s,
                            ),
                        }
                    )
                peak = [0.0]
                sampler = threading.Thread(target=lambda s=service, p=peak: _sample_rss(s, p, plan.duration_s))
                before = service.metrics()
                sampler.start()
                rows.append(
                    {
                        "kind": f"ingest {mode}",
                        **wrk(service, templates_file, c, plan.duration_s, "/api/v1/lineage"),
                        "rss_peak_mb": round(peak[0], 1),
                    }
                )
                sampler.join()
                if mode == "sync":
                    rows[-1]["where_time_goes"] = where_time_goes(service.metrics(), before)
                print(f"  {rows[-1]}", file=sys.stderr)
            if mode == "sync" and plan.profile and Path(sys.executable).with_name("py-spy").exists():
                profile(service, templates_file, b)
        finally:
            service.stop()
    b.results["rate"] = rate_by_mode(b, templates_file, plan.rate, plan.rate_duration_s)
    b.results["database_ms_per_event"] = database_only(b.service_dsn, bodies, rounds=8 if plan.profile else 2)
    b.results["ingest"] = rows
    ratios = []
    for c in plan.concurrencies:
        by = {r["kind"]: r for r in rows if r["concurrency"] == c}
        ratios.append(
            {
                "concurrency": c,
                "sync_vs_insert_floor": round(
                    by["ingest sync"]["events_per_s"] / by["insert floor"]["events_per_s"], 3
                ),
                "async_vs_insert_floor": round(
                    by["ingest async"]["events_per_s"] / by["insert floor"]["events_per_s"], 3
                ),
                "sync_vs_noop_floor": round(by["ingest sync"]["events_per_s"] / by["noop floor"]["events_per_s"], 3),
            }
        )
    b.results["ratios"] = ratios


def rate_by_mode(b: Bench, templates_file: Path, rate: int, duration: float) -> dict[str, Any]:
    """The open loop in each mode, each from a fresh service with an empty queue; and against the
    no-op endpoint, the share of the client, TLS and HTTP."""
    out: dict[str, Any] = {}
    for label, mode, path in (
        ("noop", "sync", "/api/v1/noop"),
        ("sync", "sync", "/api/v1/lineage"),
        ("async", "async", "/api/v1/lineage"),
    ):
        service = b.start_service(METASTORE_INGEST_MODE=mode)
        try:
            out[label] = open_loop(service, templates_file, rate, duration, path)
        finally:
            service.stop()
        print(f"  open loop {rate}/s, {label}: {out[label]}", file=sys.stderr)
    return out


def _sample_rss(service: Service, peak: list[float], duration: float) -> None:
    stop_at = time.monotonic() + duration + 0.5
    while time.monotonic() < stop_at:
        peak[0] = max(peak[0], service.rss_mb())
        time.sleep(0.2)


def profile(service: Service, templates_file: Path, b: Bench) -> None:
    """Where a sync ingest spends its time in the service process (py-spy flame graph)."""
    out = b.work / "profile.svg"
    spy = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("py-spy")),
            "record",
            "--pid",
            str(service.process.pid),
            "--duration",
            "8",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wrk(service, templates_file, 8, 8, "/api/v1/lineage")
    spy.wait(60)
    if out.exists():
        b.results["profile"] = "profile.svg"
        shutil.copy(out, b.results_dir / "profile.svg")


def run_memory_full_queue(b: Bench, bodies: list[str]) -> None:
    """Resident memory with the async queue full of large events (the database held off)."""
    service = b.start_service(
        METASTORE_INGEST_MODE="async",
        METASTORE_ASYNC_QUEUE_SIZE="2000",
        METASTORE_ASYNC_QUEUE_FULL="reject",
        METASTORE_DB_TIMEOUT_MS="120000",
    )
    try:
        idle = service.rss_mb()
        big = [t for t in bodies if len(t) > 50_000] or bodies
        with psycopg.connect(b.owner_dsn) as blocker, service.client() as client:
            blocker.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            accepted = queued_bytes = 0
            for i in range(2100):
                data = body(big[i % len(big)], f"mem-{time.time_ns()}-{i}")
                if client.post("/api/v1/lineage", content=data).status_code == 202:
                    accepted += 1
                    queued_bytes += len(data)
            full = service.rss_mb()
            blocker.rollback()
        b.results["memory"] = {
            "idle_mb": round(idle, 1),
            "queue_full_mb": round(full, 1),
            "queued_events": accepted,
            "queued_mb": round(queued_bytes / 2**20, 1),
        }
    finally:
        service.stop()


def generate_events(conn: psycopg.Connection[Any], n: int) -> None:
    """Bulk, inside PostgreSQL, straight into metastore.events (no derived rows, no statistics yet):
    small Trino-like COMPLETE events reading two of 5000 tables, a new job each."""
    conn.execute(
        """
        INSERT INTO metastore.events (payload, payload_sha256, event_kind, event_type, event_time, run_id,
                                      job_namespace, job_name, producer)
        SELECT p, sha256(convert_to(p::text, 'UTF8')), 'run', 'COMPLETE', now(), p #>> '{run,runId}',
               'trino://bench:8080', p #>> '{job,name}', 'bench'
          FROM (SELECT jsonb_build_object(
                    'eventTime', now(), 'eventType', 'COMPLETE', 'producer', 'bench',
                    'run', jsonb_build_object('runId', 'backfill-' || i),
                    'job', jsonb_build_object('namespace', 'trino://bench:8080', 'name', 'q' || i),
                    'inputs', jsonb_build_array(
                        jsonb_build_object('namespace', 'trino://bench:8080', 'name', 'cat.s.t' || (i %% 5000)),
                        jsonb_build_object('namespace', 'trino://bench:8080', 'name', 'cat.s.u' || (i %% 977))),
                    'outputs', jsonb_build_array(
                        jsonb_build_object('namespace', 'trino://bench:8080', 'name', 'cat.s.o' || (i %% 3001))))
                    AS p
                  FROM generate_series(1, %s::bigint) AS i) AS g
        """,
        (n,),
    )


class HeldIngest(logging.Handler):
    """The 'ingest held N ms' of the backfill sessions' notices."""

    def __init__(self) -> None:
        super().__init__()
        self.ms: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"ingest held ([0-9.]+) ms", record.getMessage())
        if found:
            self.ms.append(float(found.group(1)))


def run_backfill(b: Bench) -> None:
    """The stored events rebuilt by `metastore db backfill --sessions N`, N the machine's cores."""
    n = b.plan.backfill_events
    sessions = os.cpu_count() or 1
    with psycopg.connect(b.owner_dsn, autocommit=True) as conn:
        started = time.perf_counter()
        generate_events(conn, n)
        generated = time.perf_counter() - started
        total = conn.execute("SELECT count(*) FROM metastore.events").fetchone()
        held = HeldIngest()
        logging.getLogger("metastore.migrations").setLevel(logging.INFO)
        logging.getLogger("metastore.migrations").addHandler(held)
        started = time.perf_counter()
        try:
            maintenance.backfill(b.owner_dsn, sessions)
        finally:
            logging.getLogger("metastore.migrations").removeHandler(held)
        seconds = time.perf_counter() - started
        # What the rebuild writes at random and would keep in shared_buffers: the derived tables'
        # indexes (those of metastore.events are only read).
        index = conn.execute(
            """
            SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index AS i JOIN pg_class AS t ON t.oid = i.indrelid
             WHERE t.relnamespace = 'metastore'::regnamespace AND t.relkind = 'r'
               AND NOT EXISTS (SELECT FROM pg_inherits AS h
                                WHERE h.inhrelid = t.oid AND h.inhparent = 'metastore.events'::regclass)
            """
        ).fetchone()
        # Right after the load, before autovacuum has analyzed the new rows; then once it has.
        feed = feed_pages(conn)
        conn.execute("ANALYZE metastore.events, metastore.event_datasets")
        feed_analyzed = feed_pages(conn)
    events = total[0] if total else n
    b.results["backfill"] = {
        "events": events,
        "sessions": sessions,
        "generate_s": round(generated, 1),
        "backfill_s": round(seconds, 1),
        "events_per_s": round(events / seconds, 1),
        "derived_index_mb": round(int(index[0] or 0) / 2**20) if index else None,
        # How long ingest waited on the rebuild's SHARE lock: at its cut, at its end.
        "ingest_held_ms": held.ms,
    }
    b.results["feed"] = feed
    b.results["feed_analyzed"] = feed_analyzed
    print(f"  backfill {b.results['backfill']}", file=sys.stderr)
    print(f"  feed {feed}, analyzed {feed_analyzed}", file=sys.stderr)


def feed_pages(conn: psycopg.Connection[Any], calls: int = 50) -> dict[str, Any]:
    """metastore.read_events over the backfilled events: ms per page of 100, the first page of the
    feed, and the first page of the events that mention one table (1 in 5000 events do)."""
    out: dict[str, Any] = {}
    for label, query in (
        ("first_page", "SELECT count(*) FROM metastore.read_events(100)"),
        (
            "dataset_1_in_5000",
            "SELECT count(*) FROM metastore.read_events(100, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
            " 'trino://bench:8080', 'cat.s.t77')",
        ),
    ):
        samples = []
        for _ in range(calls):
            started = time.perf_counter()
            conn.execute(query).fetchone()
            samples.append((time.perf_counter() - started) * 1000)
        samples.sort()
        out[label] = {"calls": calls, "ms_p50": round(statistics.median(samples), 2), "ms_max": round(samples[-1], 2)}
    return out


def cursor_for(namespace: str, name: str) -> str:
    text = json.dumps([namespace, name])
    return base64.b64encode(text.encode()).decode().translate(str.maketrans("+/", "-_"))


def run_read_api(b: Bench) -> None:
    rows = []
    service = b.start_service()
    try:
        have = 0
        for target in b.plan.dataset_counts:
            with psycopg.connect(b.owner_dsn, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen) "
                    "SELECT 'trino://read:8080', format('cat.s.t%%s', lpad(i::text, 9, '0')), 'dataset', now(), now() "
                    "FROM generate_series(%s::bigint, %s::bigint) AS i",
                    (have + 1, target),
                )
                conn.execute("ANALYZE metastore.datasets")
            have = target
            deep = cursor_for("trino://read:8080", f"cat.s.t{target - 150:09d}")
            with service.client() as client:
                for label, params in (
                    ("first page", {"limit": "100"}),
                    ("deep page", {"limit": "100", "cursor": deep}),
                    ("search", {"limit": "100", "q": "t0000099"}),
                ):
                    samples = []
                    for _ in range(b.plan.read_samples):
                        started = time.perf_counter()
                        response = client.get("/api/v1/datasets", params=params)
                        samples.append(time.perf_counter() - started)
                        assert response.status_code == 200, response.text
                    samples.sort()
                    rows.append(
                        {
                            "datasets": target,
                            "query": label,
                            "p50_ms": round(statistics.median(samples) * 1000, 2),
                            "p99_ms": round(samples[int(len(samples) * 0.99) - 1] * 1000, 2),
                        }
                    )
                    print(f"  {rows[-1]}", file=sys.stderr)
    finally:
        service.stop()
    b.results["read_api"] = rows


def plots(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reads = results.get("read_api", [])
    if reads:
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = sorted({r["query"] for r in reads})
        counts = sorted({r["datasets"] for r in reads})
        for k, count in enumerate(counts):
            ax.bar(
                [i + k * 0.35 for i in range(len(labels))],
                [next(r["p99_ms"] for r in reads if r["query"] == q and r["datasets"] == count) for q in labels],
                0.35,
                label=f"{count:,} datasets (p99)",
            )
        ax.set_xticks([i + 0.175 for i in range(len(labels))], labels)
        ax.set_ylabel("ms")
        ax.set_title("Read API latency by table size")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "read-api.png", dpi=110)
        plt.close(fig)

    ingest = results.get("ingest", [])
    if not ingest:
        return
    kinds = ["insert floor", "noop floor", "ingest sync", "ingest async"]
    concurrencies = sorted({r["concurrency"] for r in ingest})
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.2
    for k, kind in enumerate(kinds):
        values = [
            next((r["events_per_s"] for r in ingest if r["kind"] == kind and r["concurrency"] == c), 0)
            for c in concurrencies
        ]
        left.bar([i + k * width for i in range(len(concurrencies))], values, width, label=kind)
        if kind.startswith("ingest"):
            right.plot(
                concurrencies,
                [
                    next(r["p99_ms"] for r in ingest if r["kind"] == kind and r["concurrency"] == c)
                    for c in concurrencies
                ],
                marker="o",
                label=f"{kind} p99",
            )
            right.plot(
                concurrencies,
                [
                    next(r["p50_ms"] for r in ingest if r["kind"] == kind and r["concurrency"] == c)
                    for c in concurrencies
                ],
                marker=".",
                linestyle="--",
                label=f"{kind} p50",
            )
    left.set_xticks([i + 1.5 * width for i in range(len(concurrencies))], [f"{c} clients" for c in concurrencies])
    left.set_ylabel("events / s")
    left.set_title("Throughput against the floors")
    left.legend()
    right.set_xscale("log", base=2)
    right.set_xlabel("concurrent clients")
    right.set_ylabel("ms")
    right.set_title("Ingest latency (closed loop)")
    right.legend()
    fig.tight_layout()
    fig.savefig(out / "ingest.png", dpi=110)
    plt.close(fig)


PARTS = ("ingest", "memory", "backfill", "read")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="seconds-long run of the whole harness")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=PARTS,
        help="run these parts only, and replace just their results in the existing results.json",
    )
    # PostgreSQL's default of 128 MB is sized to start anywhere, not for a store. Backfill writes the
    # derived tables' indexes in no particular order, about 1 GB of them at a million events, and
    # ran 1.24 times slower with 128 MB (docs/operations.md, "Rebuilding the derived tables").
    parser.add_argument("--shared-buffers", default="1GB", help="the PostgreSQL server's shared_buffers")
    args = parser.parse_args()
    if not have_wrk("bench"):
        return 2
    plan = SMOKE if args.smoke else FULL
    args.out.mkdir(parents=True, exist_ok=True)
    work, tls, bodies, templates_file = workspace("metastore-bench-")
    pg = LocalPostgres().start(durable=True, options=f"-c shared_buffers={args.shared_buffers}")
    b = Bench(plan, work, pg, tls, args.out)
    try:
        provision(pg, "bench")
        with psycopg.connect(pg.dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        b.results["machine"] = {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "postgresql": version[0] if version else "?",
            "durable_commits": True,
            "shared_buffers": args.shared_buffers,
            "smoke": args.smoke,
            "event_bytes": {
                "min": min(map(len, bodies)),
                "max": max(map(len, bodies)),
                "median": int(statistics.median(map(len, bodies))),
            },
        }
        parts = {
            "ingest": lambda: run_ingest(b, bodies, templates_file),
            "memory": lambda: run_memory_full_queue(b, bodies),
            "backfill": lambda: run_backfill(b),
            "read": lambda: run_read_api(b),
        }
        for name in args.only or PARTS:
            print(f"{name} ...", file=sys.stderr)
            parts[name]()
    finally:
        pg.cleanup()
        shutil.rmtree(work, ignore_errors=True)
    if args.only and (args.out / "results.json").exists():
        # The parts run now replace theirs, each with the server setting it ran with; "machine"
        # stays that of the run the other parts come from.
        for key in ("backfill", "read_api"):
            if key in b.results:
                b.results[f"{key}_shared_buffers"] = args.shared_buffers
        kept = json.loads((args.out / "results.json").read_text())
        b.results = {**kept, **{k: v for k, v in b.results.items() if k != "machine" or "machine" not in kept}}
    (args.out / "results.json").write_text(json.dumps(b.results, indent=2) + "\n")
    plots(b.results, args.out)
    print(json.dumps(b.results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
