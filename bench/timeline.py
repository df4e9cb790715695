"""`python -m bench.timeline [--scale N]`: the runs timeline, search and field lineage at scale.

A synthetic store is written straight into the tables of a throwaway PostgreSQL (the derived
tables, as ingest and backfill would leave them; no events: these reads never touch them): N
datasets named catalog.schema.table from a vocabulary of 40 words (one in ten with an S3 symlink
alias), N jobs (Trino's query ids, plus 300 jobs of stable names in a namespace of their own) with a
run each (states, users and sources skewed as a Trino cluster's are, over 30 days), each run
reading two datasets and writing one, each dataset with a schema of five fields (two derived from
fields of two earlier datasets: 4 N column-lineage rows) from a vocabulary of 5000 field names.
Then, as the service's role, client round trip, `--samples` calls each: `metastore.list_runs` (a
page of 50) without a filter, deep in the timeline, and with each filter; `metastore.search` for
an exact name, a last part, a prefix, common and rare substrings, a field (one every dataset has),
two characters; `metastore.field_lineage` at depth 5 both ways; and `metastore.list_namespaces`. p50, p99, max in ms.
Results: bench/results/timeline.json.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.jobs_runs import backend_cpu_s
from devtools import localpg
from devtools.localpg import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
FILTERS = ("cursor", "state", "user", "source", "job_namespace", "dataset_id", "from", "to")
# fmt: off
WORDS = [
    "orders", "customers", "sales", "payments", "invoices", "products", "stock", "shipments", "returns", "refunds",
    "accounts", "users", "sessions", "events", "clicks", "visits", "carts", "reviews", "ratings", "prices",
    "discounts", "coupons", "taxes", "fees", "ledger", "budget", "forecast", "revenue", "margin", "cost",
    "supplier", "vendor", "warehouse", "region", "country", "city", "store", "channel", "campaign", "audience",
]
# fmt: on


# The synthetic store, step by step: (name, statement, its parameters among n and words).
STEPS: list[tuple[str | None, str, tuple[str, ...]]] = [
    (
        "datasets",
        "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)"
        " SELECT (ARRAY['trino://trino:8080', 'trino://trino:8080', 'trino://trino:8080', 'trino://etl:8080',"
        "               'postgres://db:5432'])[g % 5 + 1],"
        "        (ARRAY['hive', 'iceberg', 'tpch', 'memory'])[g % 4 + 1] || '.s' || (g / 4 % 100) || '.'"
        "        || (%(words)s::text[])[g % 40 + 1] || '_' || (%(words)s::text[])[g / 40 % 40 + 1] || '_' || g,"
        "        'dataset', now() - interval '30 days', now()"
        "   FROM generate_series(1, %(n)s) AS g",
        ("n", "words"),
    ),
    (
        "symlinks",
        "WITH a AS (INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)"
        " SELECT 's3://warehouse', 'tables/t' || g, 'symlink', now(), now() FROM generate_series(10, %(n)s, 10) g"
        " RETURNING id, name)"
        " INSERT INTO metastore.dataset_symlinks (dataset_id, symlink_id, type)"
        " SELECT substr(a.name, 9)::bigint, a.id, 'TABLE' FROM a",
        ("n",),
    ),
    (
        "jobs",
        "INSERT INTO metastore.jobs (namespace, name, first_seen, last_seen, latest_sql)"
        " SELECT CASE WHEN g <= 300 THEN 'airflow' WHEN g % 10 = 0 THEN 'trino://etl:8080'"
        "             ELSE 'trino://trino:8080' END,"
        "        CASE WHEN g <= 300 THEN 'dag_' || (g % 30) || '.load_' || g"
        "             ELSE to_char(timestamptz '2026-06-01' + g * interval '2.5 seconds', 'YYYYMMDD_HH24MISS')"
        "                  || '_' || lpad(g::text, 5, '0') || '_xq7tm' END,"
        "        now(), now(), 'SELECT 1'"
        "   FROM generate_series(1, %(n)s) AS g",
        ("n",),
    ),
    # Users: one in three of the runs alice's, then fewer and fewer; "rare" has 50 runs.
    (
        "runs",
        "INSERT INTO metastore.runs (job_id, run_id, state, state_class, state_rank, state_time, started_at, ended_at,"
        " error_message, trino_user, trino_source, first_event_time, last_event_time, event_count)"
        " SELECT g, 'run-' || g,"
        "        CASE WHEN g % 200 = 7 THEN 'ABORT' WHEN g % 20 = 3 THEN 'FAIL' WHEN g % 33 = 5 THEN 'START'"
        "             ELSE 'COMPLETE' END,"
        "        2, 1, t + interval '3 seconds', t, t + interval '3 seconds',"
        "        CASE WHEN g % 20 = 3 THEN 'Division by zero' END,"
        "        CASE WHEN g % (%(n)s / 50) = 11 THEN 'rare' WHEN g % 3 = 0 THEN 'alice'"
        "             ELSE 'user' || (g * 7919 % 97) END,"
        "        (ARRAY['trino-cli', 'superset', 'airflow', 'dbt', 'jupyter', 'tableau', 'metabase', 'jdbc', 'odbc',"
        "               'trino-python-client'])[g % 10 + 1],"
        "        t, t + interval '3 seconds', 2"
        "   FROM generate_series(1::bigint, %(n)s) AS g"
        "  CROSS JOIN LATERAL (SELECT timestamptz '2026-06-01' + g * (interval '30 days' / %(n)s)) AS x (t)",
        ("n",),
    ),
    (
        "run datasets",
        "INSERT INTO metastore.run_datasets (run_id, dataset_id, direction, run_time)"
        " SELECT r.id, d.dataset_id, d.direction, r.first_event_time"
        "   FROM metastore.runs AS r"
        "  CROSS JOIN LATERAL (VALUES (1 + (r.id * 2654435761) % %(n)s, 'input'),"
        "                             (1 + (r.id * 40503 + 17) % %(n)s, 'input'),"
        "                             (1 + (r.id * 97) % %(n)s, 'output')) AS d (dataset_id, direction)"
        " ON CONFLICT DO NOTHING",
        ("n",),
    ),
    # Untimed (no name): the field names are inserted at once below, not row by row by the trigger.
    (None, "ALTER TABLE metastore.dataset_schema_versions DISABLE TRIGGER dataset_schema_versions_field_names", ()),
    (
        "schemas",
        "INSERT INTO metastore.dataset_schema_versions"
        " (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen)"
        " SELECT d.id, sha256(convert_to(f::text, 'UTF8')), f, 1, now(), now()"
        "   FROM metastore.datasets AS d CROSS JOIN LATERAL (SELECT jsonb_build_array("
        "        jsonb_build_object('name', 'f0'), jsonb_build_object('name', 'f1'),"
        "        jsonb_build_object('name', (%(words)s::text[])[d.id % 40 + 1] || '_' || (d.id % 125)),"
        "        jsonb_build_object('name', (%(words)s::text[])[d.id / 40 % 40 + 1] || '_id'),"
        "        jsonb_build_object('name', 'amount')) AS f) AS x"
        "  WHERE d.kind = 'dataset'",
        ("words",),
    ),
    (None, "ALTER TABLE metastore.dataset_schema_versions ENABLE TRIGGER dataset_schema_versions_field_names", ()),
    (
        "field names",
        "INSERT INTO metastore.field_names (name)"
        " SELECT DISTINCT f ->> 'name' FROM metastore.dataset_schema_versions AS v, jsonb_array_elements(v.fields) f",
        (),
    ),
    # Field k of dataset g from field k of a near earlier one (DIRECT) and field 1 - k of a far one.
    (
        "column lineage",
        "INSERT INTO metastore.column_lineage (output_dataset_id, output_field, input_dataset_id, input_field,"
        " transformation_type, transformation_subtype, first_seen, last_seen, edge_sha256)"
        " SELECT g, 'f' || k, u.id, 'f' || u.f, u.t, u.s, now(), now(),"
        "        sha256(convert_to(jsonb_build_array('f' || k, 'f' || u.f, u.t, u.s)::text, 'UTF8'))"
        "   FROM generate_series(3::bigint, %(n)s) AS g CROSS JOIN generate_series(0, 1) AS k"
        "  CROSS JOIN LATERAL (VALUES (greatest(1, g - 1 - (g * 7919) % 97), k, 'DIRECT', 'IDENTITY'),"
        "                             (greatest(1, g - 1 - (g * 104729) % 99991), 1 - k, 'INDIRECT', 'FILTER'))"
        "        AS u (id, f, t, s)",
        ("n",),
    ),
    ("vacuum analyze", "VACUUM ANALYZE", ()),
]


def build(conn: psycopg.Connection[Any], n: int) -> dict[str, float]:
    """The synthetic store; seconds per step."""
    steps: dict[str, float] = {}
    values: dict[str, Any] = {"n": n, "words": WORDS}
    for name, statement, names in STEPS:
        params = {k: values[k] for k in names} or None
        if params:
            # A literal % is %% where parameters are passed: every modulo.
            statement = statement.replace("%", "%%")
            for param in params:
                statement = statement.replace(f"%%({param})s", f"%({param})s")
        started = time.perf_counter()
        conn.execute(statement.encode(), params)
        if name is not None:
            steps[name] = round(time.perf_counter() - started, 1)
            print(f"  {name}: {steps[name]} s", flush=True)
    return steps


def cursor(at: str, run_id: int) -> str:
    """A cursor of the timeline at a place: what next_cursor holds (base64url of [time, id])."""
    return base64.urlsafe_b64encode(json.dumps([at, run_id]).encode()).decode()


def timed(call: Callable[[], Any], samples: int, pid: int) -> dict[str, Any]:
    """Wall time of each call (client round trip) and the server process's CPU time per call: on a
    machine shared with other work the wall time holds the waits for a core, the CPU time does not."""
    times: list[float] = []
    sizes: list[int] = []
    cpu = backend_cpu_s(pid)
    for _ in range(samples):
        started = time.perf_counter()
        size = call()
        times.append((time.perf_counter() - started) * 1000)
        sizes.append(size)
    cpu = backend_cpu_s(pid) - cpu
    times.sort()
    return {
        "calls": samples,
        "ms_p50": round(statistics.median(times), 2),
        "ms_p99": round(times[max(0, int(len(times) * 0.99) - 1)], 2),
        "ms_max": round(times[-1], 2),
        "server_cpu_ms_per_call": round(cpu / samples * 1000, 2),
        "results_median": statistics.median(sizes),
    }


def measure_timeline(conn: psycopg.Connection[Any], n: int, samples: int, rng: random.Random) -> dict[str, Any]:
    pid = conn.info.backend_pid

    def runs(**f: Any) -> Callable[[], int]:
        def call() -> int:
            args = {k: (v() if callable(v) else v) for k, v in f.items()}
            row = conn.execute(
                "SELECT metastore.list_runs(50, %(cursor)s, %(state)s, %(user)s, %(source)s, %(job_namespace)s,"
                " %(dataset_id)s::bigint, %(from)s, %(to)s)::text",
                {k: args.get(k) for k in FILTERS},
            ).fetchone()
            assert row is not None
            return len(json.loads(row[0])["runs"])

        return call

    def deep() -> str:
        i = rng.randint(1, n)
        return cursor(f"2026-06-{1 + i * 30 // n:02d} 00:00:00+00", i)

    def day() -> str:
        return f"2026-06-{rng.randint(1, 29):02d}T00:00:00Z"

    timeline: dict[str, Any] = {}
    for label, call in (
        ("no filter, first page", runs()),
        ("no filter, deep page", runs(cursor=deep)),
        ("state FAIL (5 %)", runs(state="FAIL")),
        ("state ABORT (0.5 %), deep", runs(state="ABORT", cursor=deep)),
        ("state COMPLETE", runs(state="COMPLETE", cursor=deep)),
        ("state FAIL,ABORT", runs(state="FAIL,ABORT", cursor=deep)),
        ("user alice (a third)", runs(user="alice", cursor=deep)),
        ("user of 1 %", runs(user=lambda: f"user{rng.randint(0, 96)}", cursor=deep)),
        ("user of 50 runs", runs(user="rare")),
        ("source (10 %)", runs(source="superset", cursor=deep)),
        ("job namespace of 10 %", runs(job_namespace="trino://etl:8080", cursor=deep)),
        ("job namespace of 300 jobs", runs(job_namespace="airflow")),
        ("dataset", runs(dataset_id=lambda: rng.randint(1, n))),
        ("one day", runs(**{"from": day, "to": None})),
        ("user and state FAIL", runs(user="alice", state="FAIL", cursor=deep)),
        ("user of 1 % and state ABORT (rare)", runs(user=lambda: f"user{rng.randint(0, 96)}", state="ABORT")),
    ):
        timeline[label] = timed(call, samples, pid)
        print(f"  timeline, {label}: {timeline[label]}", flush=True)
    return timeline


def measure_search(conn: psycopg.Connection[Any], n: int, samples: int, rng: random.Random) -> dict[str, Any]:
    pid = conn.info.backend_pid

    def search(q: Callable[[], str]) -> Callable[[], int]:
        def call() -> int:
            row = conn.execute("SELECT metastore.search(%s, 20)::text", (q(),)).fetchone()
            assert row is not None
            return len(json.loads(row[0])["results"])

        return call

    def some_name() -> str:
        g = rng.randint(1, n)
        return f"{WORDS[g % 40]}_{WORDS[g // 40 % 40]}_{g}"

    def full_name() -> str:
        g = rng.randint(1, n)
        catalog = ("hive", "iceberg", "tpch", "memory")[g % 4]
        return f"{catalog}.s{g // 4 % 100}.{WORDS[g % 40]}_{WORDS[g // 40 % 40]}_{g}"

    found: dict[str, Any] = {}
    for label, q in (
        ("exact name", full_name),
        ("common field", lambda: "amount"),
        ("two characters", lambda: f"{rng.choice(WORDS)[:2]}"),
        ("last part of a name", some_name),
        ("prefix of a last part", lambda: f"{rng.choice(WORDS)}_{rng.choice(WORDS)[:3]}"),
        ("common word", lambda: rng.choice(WORDS)),
        ("rare substring", lambda: f"_{rng.randint(n // 10, n)}"),
        ("field name", lambda: f"{rng.choice(WORDS)}_id"),
        ("job (query id) prefix", lambda: f"202606{rng.randint(1, 28):02d}_1"),
        ("no match", lambda: f"zz{rng.randint(0, 10**6)}qq"),
    ):
        found[label] = timed(search(q), samples, pid)
        print(f"  search, {label}: {found[label]}", flush=True)
    return found


def measure_fields(conn: psycopg.Connection[Any], n: int, samples: int, rng: random.Random) -> dict[str, Any]:
    pid = conn.info.backend_pid
    result: dict[str, Any] = {}

    def fields(direction: str) -> Callable[[], int]:
        def call() -> int:
            row = conn.execute(
                "SELECT metastore.field_lineage(%s, %s, %s, 5, 200)::text",
                (rng.randint(3, n), f"f{rng.randint(0, 1)}", direction),
            ).fetchone()
            assert row is not None
            return len(json.loads(row[0])["nodes"])

        return call

    result["field lineage (depth 5, at most 200 nodes)"] = {
        direction: timed(fields(direction), samples, pid) for direction in ("upstream", "downstream", "both")
    }
    print(f"  field lineage: {result['field lineage (depth 5, at most 200 nodes)']}", flush=True)

    def namespaces() -> int:
        row = conn.execute("SELECT metastore.list_namespaces()::text").fetchone()
        assert row is not None
        return len(json.loads(row[0])["namespaces"])

    result["namespaces"] = timed(namespaces, max(5, samples // 20), pid)
    print(f"  namespaces: {result['namespaces']}", flush=True)
    return result


def measure(conn: psycopg.Connection[Any], n: int, samples: int) -> dict[str, Any]:
    rng = random.Random(29)  # noqa: S311 (reproducible samples, not secrets)
    return {
        "timeline (list_runs, pages of 50)": measure_timeline(conn, n, samples, rng),
        "search (20 results)": measure_search(conn, n, samples, rng),
        **measure_fields(conn, n, samples, rng),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=1_000_000, help="datasets, jobs and runs")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / "timeline.json")
    args = parser.parse_args()
    with LocalPostgres() as server:
        server.stop()
        server.start(options="-c shared_buffers=1GB")
        localpg.provision(server, "bench_timeline")
        with psycopg.connect(server.dsn_for("metastore_owner", "bench_timeline"), autocommit=True) as owner:
            version = owner.execute("SHOW server_version").fetchone()
            print(f"building {args.scale} datasets, jobs and runs", flush=True)
            started = time.perf_counter()
            steps = build(owner, args.scale)
            built = time.perf_counter() - started
            rows = {}
            for table in ("datasets", "jobs", "runs", "run_datasets", "column_lineage", "field_names"):
                count = owner.execute(sql.SQL("SELECT count(*) FROM metastore.{}").format(sql.Identifier(table)))
                rows[table] = count.fetchone()[0]  # type: ignore[index]
        with psycopg.connect(server.dsn_for("metastore_service", "bench_timeline"), autocommit=True) as service:
            load = os.getloadavg()[0]
            result = {
                "command": f"python -m bench.timeline --scale {args.scale} --samples {args.samples}",
                "load_average_1min_at_start_of_reads": round(load, 1),
                "postgresql": version[0] if version else None,
                "shared_buffers": "1GB",
                "rows": rows,
                "build_seconds": round(built, 1),
                "build_steps_seconds": steps,
                **measure(service, args.scale, args.samples),
            }
    result["load_average_1min_at_end"] = round(os.getloadavg()[0], 1)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
