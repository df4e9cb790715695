"""`python -m bench.scale`: the store at scale. Bulk-generates events inside PostgreSQL (spread over
60 days of eventTime, in daily partitions) and measures, at each size: ingest through
metastore.ingest_event from concurrent connections, table and index sizes, and a dataset's detail
(get_dataset). Then: what creating a day's partitions and applying retention to a month cost
ingest, and how large multi-MB events are stored with lz4 and with pglz. Writes
bench/results/scale.json.

Everything runs on this machine against loopback, on a durable PostgreSQL (fsync and synchronous
commit on). A shared machine makes the numbers noisy: compare them with that in mind.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.common import in_threads
from bench.run import FIXTURES, templates
from devtools.localpg import LocalPostgres, provision

ROOT = Path(__file__).resolve().parent.parent
DAYS = 60  # eventTime spread of the bulk events, ending today
# What a production server would have rather than the defaults (128 MB of buffers, 1 GB of WAL
# between checkpoints), so that the bulk load measures the store rather than checkpoint storms.
SERVER_OPTIONS = "-c shared_buffers=1GB -c max_wal_size=8GB -c checkpoint_timeout=30min"
OWNER, SERVICE = "metastore_owner", "metastore_service"

# ---------------------------------------------------------------- bulk events, generated in SQL

# Small Trino-like events: START (~1.1 KB) and COMPLETE (~1.8 KB, with some query statistics), each
# reading two of 5977 tables, one in four writing one of 3001 more. Ids are given explicitly so
# that the links can be generated alongside; the identity is moved past them afterwards.
BULK_EVENTS = """
INSERT INTO metastore.events (id, payload, payload_sha256, event_kind, event_type, event_time, run_id,
                              job_namespace, job_name, producer, schema_url, received_at)
OVERRIDING SYSTEM VALUE
SELECT g.i, g.p, sha256(convert_to(g.p::text, 'UTF8')), 'run', g.p ->> 'eventType', g.t, g.p #>> '{run,runId}',
       'trino://bench:8080', g.p #>> '{job,name}', g.p ->> 'producer', g.p ->> 'schemaURL', g.t + interval '2 seconds'
  FROM (SELECT s.i, s.t, jsonb_build_object(
            'eventTime', to_char(s.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            'eventType', CASE WHEN s.i % 2 = 0 THEN 'START' ELSE 'COMPLETE' END,
            'producer', 'https://github.com/trinodb/trino/tree/476/plugin/trino-openlineage',
            'schemaURL', 'https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent',
            'run', jsonb_build_object(
                'runId', md5(s.i::text)::uuid,
                'facets', jsonb_build_object(
                    'processing_engine', jsonb_build_object(
                        '_producer', 'https://github.com/trinodb/trino/tree/476/plugin/trino-openlineage',
                        '_schemaURL', 'https://openlineage.io/spec/facets/1-1-1/ProcessingEngineRunFacet.json',
                        'version', '476', 'name', 'trino', 'openlineageAdapterVersion', '1.34.0'),
                    'trino_metadata', jsonb_build_object(
                        'queryId', s.qid, 'transactionId', md5('tx' || s.i)::uuid,
                        'queryPlan', CASE WHEN s.i % 2 = 1 THEN
                            'Fragment 0 [SINGLE] Output layout: [nationkey, name] Output partitioning: SINGLE []'
                            || ' - Output[columnNames = [nationkey, name]] Estimates: {rows: ' || (s.i % 9973)
                            || ', cpu: ' || (s.i % 7919) || 'B} - TableScan[table = hive:s:t' || (s.i % 5000)
                            || '] Layout: [nationkey:bigint, name:varchar(25)] CPU: ' || (s.i % 997) || 'ms'
                            END),
                    'trino_query_context', jsonb_build_object(
                        'user', 'etl_' || (s.i % 37), 'principal', 'etl_' || (s.i % 37), 'serverVersion', '476',
                        'environment', 'production', 'queryType', 'SELECT', 'source', 'airflow',
                        'clientInfo', 'dag=d' || (s.i % 211) || ' task=t' || (s.i % 13)),
                    'trino_query_statistics', CASE WHEN s.i % 2 = 1 THEN jsonb_build_object(
                        'cpuTime', (s.i % 100000) || 'ms', 'wallTime', (s.i % 200000) || 'ms',
                        'queuedTime', (s.i % 977) || 'ms', 'peakUserMemoryBytes', (s.i * 7919) % 1000000000,
                        'totalBytes', (s.i * 104729) % 100000000000, 'totalRows', (s.i * 1299709) % 1000000000,
                        'outputRows', s.i % 100000, 'completedSplits', s.i % 4096,
                        'operatorSummaries', (SELECT jsonb_agg(jsonb_build_object(
                                'stageId', k / 3, 'pipelineId', k % 3, 'operatorId', k,
                                'operatorType', (ARRAY['TableScanOperator', 'FilterAndProjectOperator',
                                                       'HashAggregationOperator', 'ExchangeOperator'])[k % 4 + 1],
                                'inputPositions', (s.i * (k + 3)) % 1000000,
                                'outputPositions', (s.i * (k + 5)) % 1000000,
                                'getOutputWall', ((s.i * (k + 7)) % 100000) || 'us',
                                'peakUserMemoryReservation', ((s.i * (k + 11)) % 10000000) || 'B'))
                               FROM generate_series(0, 2) AS k)) END)),
            'job', jsonb_build_object(
                'namespace', 'trino://bench:8080', 'name', s.qid,
                'facets', jsonb_build_object(
                    'jobType', jsonb_build_object('processingType', 'BATCH', 'integration', 'TRINO',
                                                  'jobType', 'QUERY'),
                    'sql', jsonb_build_object('dialect', 'trino', 'query',
                        'SELECT t.nationkey, u.name, count(*) FROM hive.s.t' || (s.i % 5000)
                        || ' t JOIN hive.s.u' || (s.i % 977) || ' u ON t.k = u.k WHERE t.ds >= DATE '''
                        || to_char(s.t, 'YYYY-MM-DD') || ''' GROUP BY 1, 2'))),
            'inputs', jsonb_build_array(
                jsonb_build_object('namespace', 'trino://bench:8080', 'name', 'hive.s.t' || (s.i % 5000),
                    'facets', jsonb_build_object('schema', jsonb_build_object('fields', jsonb_build_array(
                        jsonb_build_object('name', 'nationkey', 'type', 'bigint'),
                        jsonb_build_object('name', 'name', 'type', 'varchar(25)'),
                        jsonb_build_object('name', 'ds', 'type', 'date'))))),
                jsonb_build_object('namespace', 'trino://bench:8080', 'name', 'hive.s.u' || (s.i % 977))),
            'outputs', CASE WHEN s.i % 4 = 3
                            THEN jsonb_build_array(jsonb_build_object('namespace', 'trino://bench:8080',
                                                                      'name', 'hive.s.o' || (s.i % 3001)))
                            ELSE '[]'::jsonb END) AS p
          FROM (SELECT i, %(day)s::timestamptz + (i - %(lo)s) * %(step)s * interval '1 microsecond' AS t,
                       to_char(%(day)s::timestamptz, 'YYYYMMDD') || '_' || lpad((i % 1000000)::text, 6, '0')
                       || '_bench' AS qid
                  FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i) AS s
         OFFSET 0) AS g  -- a fence: built once per row, not once per reference to g.p
"""

BULK_LINKS = """
INSERT INTO metastore.event_datasets (event_id, dataset_id, direction, event_time)
SELECT s.i, x.dataset_id, x.direction, s.t
  FROM (SELECT i, %(day)s::timestamptz + (i - %(lo)s) * %(step)s * interval '1 microsecond' AS t
          FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i) AS s
 CROSS JOIN LATERAL (VALUES (%(t0)s + s.i % 5000, 'input'), (%(u0)s + s.i % 977, 'input'),
                            (CASE WHEN s.i % 4 = 3 THEN %(o0)s + s.i % 3001 END, 'output')) AS x (dataset_id, direction)
 WHERE x.dataset_id IS NOT NULL
"""


def with_params(sql: str) -> str:
    """The SQL above is written with plain % (modulo); psycopg wants %% beside %(name)s parameters."""
    return re.sub(r"%(?!\(\w+\)s)", "%%", sql)


def make_bulk_datasets(dsn: str) -> dict[str, int]:
    """The bulk events' datasets, with consecutive ids per family; returns each family's first id."""
    first: dict[str, int] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for family, count in (("t", 5000), ("u", 977), ("o", 3001)):
            conn.execute(
                "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen) "
                "SELECT 'trino://bench:8080', 'hive.s.' || %s || n, 'dataset', now() - interval '60 days', now() "
                "FROM generate_series(0, %s - 1) AS n ORDER BY n",
                (family, count),
            )
            row = conn.execute(
                "SELECT min(id), max(id) FROM metastore.datasets WHERE name LIKE %s", (f"hive.s.{family}%",)
            ).fetchone()
            assert row is not None and row[1] - row[0] == count - 1, "dataset ids are not consecutive"
            first[family] = int(row[0])
    return first


def bulk_load(dsn: str, count: int, first: dict[str, int], workers: int = 2) -> dict[str, Any]:
    """count more events, spread evenly over the last DAYS days, loaded a day at a time by workers."""
    if count <= 0:
        return {"events": 0, "seconds": 0.0}
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT coalesce(max(id), 0) FROM metastore.events").fetchone()
        assert row is not None
        start_id = int(row[0]) + 1
    today = datetime.now(UTC).date()
    per_day = count // DAYS
    chunks = []
    for d in range(DAYS):
        lo = start_id + d * per_day
        hi = start_id + count - 1 if d == DAYS - 1 else lo + per_day - 1
        day = today - timedelta(days=DAYS - 1 - d)
        # Evenly through the day, the newest day only up to now.
        span_us = 86_400_000_000 if d < DAYS - 1 else max(1, int((datetime.now(UTC).hour * 3600) * 1e6))
        chunks.append({"day": day.isoformat() + "T00:00:00Z", "lo": lo, "hi": hi, "step": span_us // (hi - lo + 1)})
    pending = list(reversed(chunks))
    lock = threading.Lock()

    def worker() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SET synchronous_commit = off")  # the load only; the server stays durable
            while True:
                with lock:
                    if not pending:
                        return
                    chunk = pending.pop()
                conn.execute(with_params(BULK_EVENTS), chunk)
                conn.execute(with_params(BULK_LINKS), {**chunk, "t0": first["t"], "u0": first["u"], "o0": first["o"]})

    started = time.perf_counter()
    in_threads(worker, [()] * workers, daemon=True)
    seconds = time.perf_counter() - started
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT setval(pg_get_serial_sequence('metastore.events', 'id'), (SELECT max(id) FROM metastore.events))"
        )
        # What ingest would have kept on the datasets: counts and times (get_dataset reads them).
        conn.execute(
            "UPDATE metastore.datasets AS d SET input_events = c.i, output_events = c.o, first_seen = c.f, "
            "last_seen = c.l FROM (SELECT dataset_id, count(*) FILTER (WHERE direction = 'input') AS i, "
            "count(*) FILTER (WHERE direction = 'output') AS o, min(event_time) AS f, max(event_time) AS l "
            "FROM metastore.event_datasets WHERE dataset_id BETWEEN %s AND %s GROUP BY dataset_id) AS c "
            "WHERE d.id = c.dataset_id",
            (min(first.values()), max(first.values()) + 5000),
        )
        vacuum_started = time.perf_counter()
        conn.execute("VACUUM (ANALYZE) metastore.events, metastore.event_datasets, metastore.datasets")
        vacuum = time.perf_counter() - vacuum_started
    return {
        "events": count,
        "seconds": round(seconds, 1),
        "events_per_s": round(count / seconds),
        "vacuum_analyze_s": round(vacuum, 1),
    }


# ---------------------------------------------------------------- measurements


def sizes(dsn: str) -> dict[str, Any]:
    """Bytes per table (partitions summed): heap, TOAST, each index, total; and per event."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        events = conn.execute("SELECT count(*) FROM metastore.events").fetchone()
        links = conn.execute("SELECT count(*) FROM metastore.event_datasets").fetchone()
        out: dict[str, Any] = {"events": events[0] if events else 0, "links": links[0] if links else 0, "tables": {}}
        for table in ("events", "event_datasets", "datasets", "dataset_symlinks", "rejected_events"):
            rel = f"metastore.{table}"
            parts = [
                r[0]
                for r in conn.execute(
                    "SELECT relid FROM pg_partition_tree(%s::regclass) WHERE isleaf", (rel,)
                ).fetchall()
            ]
            heap = toast = 0
            for part in parts:
                row = conn.execute(
                    "SELECT pg_relation_size(%s::regclass), "
                    "coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) "
                    "FROM pg_class c WHERE c.oid = %s::regclass",
                    (part, part),
                ).fetchone()
                assert row is not None
                heap += row[0]
                toast += row[1]
            indexes: dict[str, int] = {}
            for name, size in conn.execute(
                # Each index of the parent, summed over its partitions' indexes.
                "SELECT p.indexrelid::regclass::text, sum(pg_relation_size(t.relid)) "
                "FROM pg_index p CROSS JOIN LATERAL pg_partition_tree(p.indexrelid) t "
                "WHERE p.indrelid = %s::regclass AND t.isleaf GROUP BY 1 ORDER BY 1",
                (rel,),
            ):
                indexes[name.removeprefix("metastore.")] = int(size)
            total = heap + toast + sum(indexes.values())
            out["tables"][table] = {
                "partitions": len(parts),
                "heap_bytes": heap,
                "toast_bytes": toast,
                "indexes_bytes": indexes,
                "total_bytes": total,
            }
        n = max(out["events"], 1)
        out["bytes_per_event"] = {
            "events": round(out["tables"]["events"]["total_bytes"] / n),
            "event_datasets": round(out["tables"]["event_datasets"]["total_bytes"] / n),
            "all": round(sum(t["total_bytes"] for t in out["tables"].values()) / n),
        }
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        out["database_bytes"] = row[0] if row else 0
    return out


def ingest_bodies() -> list[str]:
    """bench.run's Trino events (3 KB to 250 KB), each with @RUNID@ and @TIME@ slots."""
    out = []
    for text in templates():
        event = json.loads(text)
        event["eventTime"] = "@TIME@"
        out.append(json.dumps(event, separators=(",", ":")))
    return out


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Writers:
    """Concurrent connections storing events through metastore.ingest_event until stopped; every
    call's start (monotonic) and latency is kept."""

    def __init__(self, dsn: str, bodies: list[str], clients: int, tag: str) -> None:
        self.dsn, self.bodies, self.clients, self.tag = dsn, bodies, clients, tag
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.stored = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(clients)]

    def _run(self, n: int) -> None:
        local: list[tuple[float, float]] = []
        stored = 0
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            i = 0
            while not self._stop.is_set():
                body = self.bodies[(n * 7 + i) % len(self.bodies)]
                body = body.replace("@RUNID@", f"{self.tag}-{n}-{i}", 1).replace("@TIME@", now_text(), 1)
                started = time.monotonic()
                try:
                    row = conn.execute(
                        "SELECT status, error_code FROM metastore.ingest_event(%b)", (body.encode(),)
                    ).fetchone()
                except psycopg.Error as exc:
                    with self._lock:
                        self.errors.append(f"{exc.sqlstate}: {exc}")
                    continue
                local.append((started, time.monotonic() - started))
                if row and row[0] == "stored":
                    stored += 1
                elif row:
                    with self._lock:
                        self.errors.append(f"{row[0]} {row[1]}")
                i += 1
        with self._lock:
            self.samples += local
            self.stored += stored

    def __enter__(self) -> Writers:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


def measure_ingest(dsn: str, bodies: list[str], clients: int, seconds: float) -> dict[str, Any]:
    with Writers(dsn, bodies, clients, f"ingest-{time.time_ns()}") as writers:
        time.sleep(seconds)
    latencies = [s[1] for s in writers.samples]
    return {
        "clients": clients,
        "seconds": seconds,
        "events": writers.stored,
        "events_per_s": round(writers.stored / seconds, 1),
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
        "max_ms": round(max(latencies, default=0) * 1000, 2),
        "errors": writers.errors[:5],
    }


def measure_reads(dsn: str, owner_dsn: str, first: dict[str, int], samples: int = 40) -> dict[str, Any]:
    """get_dataset(id, 50) of a busy dataset (read by one event in 977), a quiet one (one event in
    5000), and one written by one in 12004; plus the plan of the busy one's newest window."""
    out: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for label, dataset in (("busy", first["u"]), ("quiet", first["t"]), ("output", first["o"])):
            timings = []
            for _ in range(samples):
                started = time.perf_counter()
                row = conn.execute("SELECT metastore.get_dataset(%s, 50)", (dataset,)).fetchone()
                timings.append(time.perf_counter() - started)
            assert row is not None
            out[label] = {
                "events_returned": len(row[0]["events"]),
                "p50_ms": round(statistics.median(timings) * 1000, 2),
                "p99_ms": round(percentile(timings, 0.99) * 1000, 2),
            }
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        plan = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) "
            "SELECT l.event_id FROM metastore.event_datasets l WHERE l.dataset_id = %s "
            "AND l.event_time >= now() - interval '1 day' AND l.event_time < now() "
            "ORDER BY l.event_time DESC, l.event_id DESC LIMIT 50",
            (first["u"],),
        ).fetchall()
        out["busy_newest_window_plan"] = [r[0] for r in plan]
        unpruned = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) "
            "SELECT l.event_id FROM metastore.event_datasets l WHERE l.dataset_id = %s "
            "ORDER BY l.event_time DESC, l.event_id DESC LIMIT 50",
            (first["u"],),
        ).fetchall()
        out["unbounded_query_summary"] = [r[0] for r in unpruned if "Time" in r[0]]
    return out


def stall_during(dsn: str, bodies: list[str], clients: int, action: Callable[[], Any]) -> dict[str, Any]:
    """Runs action while writers ingest; how long it took and how long ingest waited meanwhile."""
    with Writers(dsn, bodies, clients, f"stall-{time.time_ns()}") as writers:
        time.sleep(2)
        started = time.monotonic()
        result = action()
        ended = time.monotonic()
        time.sleep(2)
    before = [lat for t0, lat in writers.samples if t0 + lat < started]
    overlapping = [lat for t0, lat in writers.samples if t0 < ended and t0 + lat > started]
    return {
        "result": result,
        "action_ms": round((ended - started) * 1000, 1),
        "ingest_p50_ms_before": round(percentile(before, 0.5) * 1000, 2),
        "ingest_p99_ms_before": round(percentile(before, 0.99) * 1000, 2),
        "ingest_max_ms_during": round(max(overlapping, default=0) * 1000, 1),
        "ingest_calls_during": len(overlapping),
        "ingest_errors": writers.errors[:5],
        "stored_total": writers.stored,
    }


def measure_create_partitions(owner_dsn: str, service_dsn: str, bodies: list[str], clients: int) -> dict[str, Any]:
    """The hourly call once a day: one new day (both tables) while ingest goes on."""
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT max(c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'metastore.events'::regclass AND c.relname <> 'events_default'"
        ).fetchone()
    assert row is not None
    last = datetime.strptime(row[0].removeprefix("events_p"), "%Y%m%d").replace(tzinfo=UTC).date()
    ahead = (last - datetime.now(UTC).date()).days + 1

    def action() -> int:
        # The owner's call (any range); the service's hourly ensure_partitions() takes the same locks.
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            got = conn.execute("SELECT metastore.create_partitions(current_date - 1, %s)", (ahead,)).fetchone()
            return int(got[0]) if got else -1

    return stall_during(service_dsn, bodies, clients, action)


def measure_retention(owner_dsn: str, service_dsn: str, bodies: list[str], clients: int, days: int) -> dict[str, Any]:
    """apply_retention dropping the oldest `days` days while ingest goes on."""
    today = datetime.now(UTC).date()
    oldest = today - timedelta(days=DAYS - 1)
    # Cutoff one hour into the day after the last day to drop.
    cutoff = datetime.combine(oldest + timedelta(days=days), datetime.min.time(), UTC) + timedelta(hours=1)
    keep = datetime.now(UTC) - cutoff

    def action() -> dict[str, Any]:
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            got = conn.execute(
                "SELECT metastore.apply_retention(%s * interval '1 second')", (keep.total_seconds(),)
            ).fetchone()
            return dict(got[0]) if got else {}

    return stall_during(service_dsn, bodies, clients, action)


# ---------------------------------------------------------------- large events: lz4 against pglz

PLAN_OPERATORS = ["ScanFilterProject", "InnerJoin", "Aggregate(FINAL)", "LocalExchange", "RemoteSource", "TopN"]


def plan_text(rng: random.Random, size: int) -> str:
    """EXPLAIN ANALYZE-like text: repetitive structure, varying numbers and names."""
    lines: list[str] = []
    total = 0
    fragment = 0
    while total < size:
        cols = ", ".join(
            f"{rng.choice(['orderkey', 'partkey', 'suppkey', 'name', 'price'])}_{rng.randint(0, 999)}"
            for _ in range(rng.randint(2, 8))
        )
        op = rng.choice(PLAN_OPERATORS)
        block = (
            f"Fragment {fragment} [{rng.choice(['HASH', 'SOURCE', 'SINGLE'])}]\n"
            f"    CPU: {rng.uniform(0, 999):.2f}ms, Scheduled: {rng.uniform(0, 9999):.2f}ms, "
            f"Blocked {rng.uniform(0, 99):.2f}s (Input: {rng.uniform(0, 99):.2f}s, Output: 0.00ns), "
            f"Input: {rng.randint(0, 10**7)} rows ({rng.uniform(0, 999):.2f}MB)\n"
            f"    Output layout: [{cols}]\n"
            f"    - {op}[table = hive:tpch_sf{rng.randint(1, 1000)}:lineitem, filterPredicate = "
            f'("shipdate_{rng.randint(0, 99)}" > DATE '
            f"'199{rng.randint(0, 9)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}')]\n"
            f"        Estimates: {{rows: {rng.randint(0, 10**9)} ({rng.uniform(0, 99):.2f}GB), "
            f"cpu: {rng.uniform(0, 99):.2f}G, memory: {rng.randint(0, 999)}B, network: 0B}}\n"
            f"        CPU: {rng.uniform(0, 9):.2f}s ({rng.uniform(0, 99):.2f}%), Scheduled: {rng.uniform(0, 9):.2f}s, "
            f"Output: {rng.randint(0, 10**8)} rows ({rng.uniform(0, 999):.2f}MB)\n"
            f"        Input avg.: {rng.uniform(0, 10**5):.2f} rows, Input std.dev.: {rng.uniform(0, 300):.2f}%\n"
        )
        lines.append(block)
        total += len(block)
        fragment += 1
    return "".join(lines)[:size]


def large_events(count: int, megabytes: list[float]) -> list[str]:
    """Trino COMPLETE events of several MB: long plan and statistics texts in their run facets."""
    base = json.loads((FIXTURES / "04-ctas-complete.json").read_text())
    rng = random.Random(8)  # noqa: S311 - test data, not secrets
    out = []
    for i in range(count):
        size = int(megabytes[i % len(megabytes)] * 1_000_000)
        event = json.loads(json.dumps(base))
        event["run"]["runId"] = f"large-{i}"
        event["eventTime"] = now_text()
        stats = event["run"]["facets"].setdefault("trino_query_statistics", {})
        stats["planText"] = plan_text(rng, size * 2 // 3)
        stats["operatorSummaries"] = [
            {
                "stageId": k // 5,
                "operatorId": k,
                "operatorType": rng.choice(PLAN_OPERATORS) + "Operator",
                "inputPositions": rng.randint(0, 10**9),
                "outputPositions": rng.randint(0, 10**9),
                "addInputWall": f"{rng.uniform(0, 999):.2f}ms",
                "getOutputCpu": f"{rng.uniform(0, 999):.2f}ms",
                "peakUserMemoryReservation": f"{rng.randint(0, 10**9)}B",
                "info": {"dynamicFilterSplitsProcessed": rng.randint(0, 999), "splitInfo": f"split-{rng.random()}"},
            }
            for k in range(size // 3 // 330)
        ]
        out.append(json.dumps(event, separators=(",", ":")))
    return out


def measure_large_events(count: int, megabytes: list[float]) -> dict[str, Any]:
    bodies = large_events(count, megabytes)
    raw = sum(len(b) for b in bodies)
    server = LocalPostgres(bin_path=Path("/usr/lib/postgresql/15/bin")).start(durable=True)
    out: dict[str, Any] = {"server": "PostgreSQL 15 (Debian, built with lz4)", "events": count, "raw_bytes": raw}
    try:
        for method in ("lz4", "pglz"):
            dbname = f"toast_{method}"
            provision(server, dbname)
            owner = server.dsn_for(OWNER, dbname)
            with psycopg.connect(owner, autocommit=True) as conn:
                for rel in [
                    "metastore.events",
                    *[
                        r[0]
                        for r in conn.execute(
                            "SELECT inhrelid::regclass::text FROM pg_inherits "
                            "WHERE inhparent = 'metastore.events'::regclass"
                        )
                    ],
                ]:
                    conn.execute(f"ALTER TABLE {rel} ALTER COLUMN payload SET COMPRESSION {method}")
            ingest_s: list[float] = []
            with psycopg.connect(server.dsn_for(SERVICE, dbname), autocommit=True) as conn:
                for body in bodies:
                    started = time.perf_counter()
                    row = conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body.encode(),)).fetchone()
                    ingest_s.append(time.perf_counter() - started)
                    assert row is not None and row[0] == "stored", row
            with psycopg.connect(owner, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('metastore.events') WHERE isleaf"
                ).fetchone()
                total = int(row[0]) if row else 0
                stored = conn.execute(
                    "SELECT sum(pg_column_size(payload)), sum(octet_length(payload::text)), "
                    "count(*) FILTER (WHERE pg_column_compression(payload) = %s) FROM metastore.events",
                    (method,),
                ).fetchone()
                started = time.perf_counter()
                conn.execute("SELECT sum(octet_length(payload::text)) FROM metastore.events").fetchone()
                read_s = time.perf_counter() - started
            assert stored is not None
            out[method] = {
                "events_compressed_with_it": stored[2],
                "payload_stored_bytes": int(stored[0]),
                "payload_text_bytes": int(stored[1]),
                "ratio": round(int(stored[1]) / int(stored[0]), 2),
                "events_table_bytes_per_event": round(total / count),
                "ingest_ms_per_event_median": round(statistics.median(ingest_s) * 1000, 1),
                "read_all_payloads_ms": round(read_s * 1000, 1),
            }
            print(f"  large events, {method}: {out[method]}", file=sys.stderr)
    finally:
        server.cleanup()
    return out


# ---------------------------------------------------------------- main


def machine(pg: LocalPostgres, bodies: list[str]) -> dict[str, Any]:
    """What the figures were measured on."""
    with psycopg.connect(pg.dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    return {
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "python": platform.python_version(),
        "postgresql": version[0] if version else "?",
        "durable_commits": True,
        "server_options": SERVER_OPTIONS,
        "ingest_event_bytes": {
            "min": min(map(len, bodies)),
            "median": int(statistics.median(map(len, bodies))),
            "max": max(map(len, bodies)),
        },
    }


def measure_steps(
    args: argparse.Namespace,
    results: dict[str, Any],
    owner: str,
    service: str,
    bodies: list[str],
    first: dict[str, int],
    pg: LocalPostgres,
) -> list[dict[str, Any]]:
    """At each --events total: bulk load up to it, then ingest, reads and sizes; scale.json after each."""
    have = 0
    steps = []
    for target in args.events:
        print(f"== {target:,} events", file=sys.stderr)
        step: dict[str, Any] = {"target_events": target, "load": bulk_load(owner, target - have, first)}
        have = target
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            # Not to measure ingest during the checkpoint that gigabytes of bulk load bring about.
            conn.execute("CHECKPOINT")
        print(f"  load {step['load']}", file=sys.stderr)
        step["ingest"] = measure_ingest(service, bodies, args.clients, args.seconds)
        print(f"  ingest {step['ingest']}", file=sys.stderr)
        step["get_dataset"] = measure_reads(service, owner, first)
        print(f"  get_dataset { {k: v for k, v in step['get_dataset'].items() if 'plan' not in k} }", file=sys.stderr)
        step["sizes"] = sizes(owner)
        print(f"  sizes {step['sizes']['bytes_per_event']} db {step['sizes']['database_bytes']:,}", file=sys.stderr)
        steps.append(step)
        (args.out / "scale.json").write_text(json.dumps({**results, "steps": steps}, indent=2, default=str) + "\n")
    return steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--events",
        type=int,
        nargs="+",
        default=[0, 1_000_000, 5_000_000],
        help="total events at each measuring step, ascending (default: 0 1000000 5000000)",
    )
    parser.add_argument("--clients", type=int, default=8, help="concurrent ingest connections")
    parser.add_argument("--seconds", type=float, default=10, help="duration of each ingest measurement")
    parser.add_argument("--retention-days", type=int, default=30, help="days dropped by the retention run")
    parser.add_argument("--large-events", type=int, default=12, help="multi-MB events per compression method")
    parser.add_argument("--large-mb", type=float, nargs="+", default=[1.5, 3, 6], help="their sizes, MB")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    if args.events != sorted(args.events):
        parser.error("--events must be ascending")
    # SIGTERM unwinds like Ctrl-C, so that the servers below are stopped and removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"started": datetime.now(UTC).isoformat(timespec="seconds")}
    began = time.perf_counter()
    bodies = ingest_bodies()
    pg = LocalPostgres().start(durable=True, options=SERVER_OPTIONS)
    try:
        provision(pg, "scale")
        owner, service = pg.dsn_for(OWNER, "scale"), pg.dsn_for(SERVICE, "scale")
        results["machine"] = machine(pg, bodies)
        with psycopg.connect(owner, autocommit=True) as conn:
            made = conn.execute("SELECT metastore.create_partitions(current_date - %s, 14)", (DAYS - 1,)).fetchone()
        results["partitions_created"] = made[0] if made else None
        first = make_bulk_datasets(owner)
        steps = measure_steps(args, results, owner, service, bodies, first, pg)
        results["steps"] = steps
        print("== create_partitions (one new day) during ingest", file=sys.stderr)
        results["create_partitions"] = measure_create_partitions(owner, service, bodies, args.clients)
        print(f"  {results['create_partitions']}", file=sys.stderr)
        print(f"== apply_retention ({args.retention_days} days) during ingest", file=sys.stderr)
        results["apply_retention"] = measure_retention(owner, service, bodies, args.clients, args.retention_days)
        print(f"  {results['apply_retention']}", file=sys.stderr)
    finally:
        pg.cleanup()
    if args.large_events > 0:
        print("== large events: lz4 and pglz", file=sys.stderr)
        results["large_events"] = measure_large_events(args.large_events, args.large_mb)
    results["total_minutes"] = round((time.perf_counter() - began) / 60, 1)
    (args.out / "scale.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "steps"}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
