"""Timings behind the V0002 guards, in SQL through psycopg against a throwaway PostgreSQL (commits
not durable): python -m bench.ingest_guards [--names 1000000] [--old DIR]

- ingest_batch at sizes around metastore.settings.max_batch_events, of real Trino COMPLETE events
  (tests/fixtures/openlineage/trino, each with its own runId so that nothing de-duplicates);
- ingest_batch of 4000 invalid events; ingest_events of 200 COMPLETE events;
- one event holding 5000 numbers 1e131071;
- list_datasets at --names datasets, first page, as the app role: a rare q, a common q and no q,
  with the trigram index and without it.

--old DIR runs the batch timings against an older checkout too (its db/ deployed in its own database).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.common import emit
from devtools.localpg import LocalPostgres, provision

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "openlineage" / "trino"
COMPLETE = ("02-select-complete.json", "04-ctas-complete.json", "07-ctas-complete-trino476.json")


def complete_events(n: int) -> list[str]:
    """n distinct compact Trino COMPLETE events (runId and eventTime varied), within the eventTime window."""
    bases = [json.loads((FIXTURES / name).read_text()) for name in COMPLETE]
    now = datetime.now(UTC)
    out = []
    for i in range(n):
        event = json.loads(json.dumps(bases[i % len(bases)]))
        event["run"]["runId"] = str(uuid.uuid4())
        event["eventTime"] = (now - timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out.append(json.dumps(event, separators=(",", ":")))
    return out


def timed(conn: psycopg.Connection[Any], query: str, params: Any) -> float:
    started = time.perf_counter()
    conn.execute(query, params).fetchall()
    return time.perf_counter() - started


def bench_batches(service_dsn: str, owner_dsn: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with psycopg.connect(owner_dsn, autocommit=True) as owner:
        # Only where V0002 is deployed: an older schema has neither the table nor the limit.
        if owner.execute("SELECT to_regclass('metastore.settings') IS NOT NULL").fetchone() == (True,):
            owner.execute("UPDATE metastore.settings SET max_batch_events = 100000")
    with psycopg.connect(service_dsn, autocommit=True) as conn:
        conn.execute("SET statement_timeout = '60s'")
        conn.execute("SELECT metastore.ingest_event(%b)", (complete_events(1)[0].encode(),))  # warm up
        for size in sizes:
            times, body_bytes = [], 0
            for _ in range(rounds):
                events = complete_events(size)
                body = ("[" + ",".join(events) + "]").encode()
                body_bytes = len(body)
                times.append(timed(conn, "SELECT status FROM metastore.ingest_batch(%b)", (body,)))
            out[f"batch_{size}_complete"] = {
                "median_s": round(statistics.median(times), 3),
                "max_s": round(max(times), 3),
                "body_mb": round(body_bytes / 1e6, 2),
            }
            print(f"  batch of {size} COMPLETE events: {out[f'batch_{size}_complete']}", file=sys.stderr)

        invalid = [{"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": f"r{i}"}} for i in range(4000)]
        body = json.dumps(invalid).encode()
        times = [timed(conn, "SELECT status FROM metastore.ingest_batch(%b)", (body,)) for _ in range(rounds)]
        out["batch_4000_invalid"] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
        print(f"  batch of 4000 invalid events: {out['batch_4000_invalid']}", file=sys.stderr)

        times = []
        for _ in range(rounds):
            bodies = [e.encode() for e in complete_events(200)]
            times.append(timed(conn, "SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies,)))
        out["ingest_events_200_complete"] = {
            "median_s": round(statistics.median(times), 3),
            "max_s": round(max(times), 3),
        }
        print(f"  ingest_events of 200 COMPLETE events: {out['ingest_events_200_complete']}", file=sys.stderr)

        numbers = ", ".join(["1e131071"] * 5000)
        poison = json.loads(complete_events(1)[0])
        text = json.dumps(poison).replace('"run": {', '"run": {"poison": [' + numbers + "], ", 1)
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            try:
                conn.execute("SELECT status, error_code FROM metastore.ingest_event(%b)", (text.encode(),)).fetchall()
            except psycopg.Error as exc:  # an older schema may time out or fail
                out["poison_error"] = exc.sqlstate
            times.append(time.perf_counter() - started)
        out["poison_5000_numbers_1e131071"] = {"median_s": round(statistics.median(times), 4)}
        print(f"  one event with 5000 numbers 1e131071: {out['poison_5000_numbers_1e131071']}", file=sys.stderr)
    return out


def bench_numbers_check(owner_dsn: str) -> dict[str, Any]:
    """The cost of the number check on the largest COMPLETE fixture, against a whole validation."""
    body = (FIXTURES / "04-ctas-complete.json").read_text()
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TEMP TABLE t AS "
            "SELECT %s::jsonb || jsonb_build_object('i', g) AS j FROM generate_series(1, 2000) AS g",
            (body,),
        )
        # As metastore.validate_event checks them.
        check = (
            "SELECT count(*) FROM t WHERE EXISTS (SELECT FROM jsonb_path_query(j, 'strict $.** ? "
            '(@.type() == "number" && (@ == 0 || @ > 1.7976931348623157e308 || @ < -1.7976931348623157e308 '
            "|| (@ < 4.9e-324 && @ > -4.9e-324)))') AS n (v) WHERE n.v::numeric <> 0 OR scale(n.v::numeric) > 324)"
        )
        out = {}
        for name, query in (
            ("number_check", check),
            ("validate_event", "SELECT count(*) FROM t WHERE (metastore.validate_event(j)).event_kind IS NOT NULL"),
            ("text_and_hash", "SELECT count(*) FROM t WHERE sha256(convert_to(j::text, 'UTF8')) IS NOT NULL"),
        ):
            times = [timed(conn, query, None) for _ in range(5)]
            out[f"{name}_us_per_event"] = round(statistics.median(times) / 2000 * 1e6, 1)
    print(f"  per event of {len(body)} bytes: {out}", file=sys.stderr)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_names(server: LocalPostgres, count: int, calls: int) -> dict[str, Any]:
    provision(server, "names")
    owner_dsn, service_dsn = server.dsn_for("metastore_owner", "names"), server.dsn_for("metastore_service", "names")
    with psycopg.connect(owner_dsn, autocommit=True) as owner:
        # Trino-like names: 40 namespaces, catalog.schema.table with words that repeat (common q)
        # and one hex token per table (rare q).
        owner.execute(
            """
            INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)
            SELECT 'trino://trino-' || (g %% 40) || '.example:8080',
                   (ARRAY['hive', 'iceberg', 'delta', 'memory'])[1 + g %% 4] || '.'
                   || (ARRAY['sales', 'finance', 'ops', 'marketing', 'staging', 'raw'])[1 + (g / 7) %% 6] || '_'
                   || (g %% 97) || '.'
                   || (ARRAY['orders', 'customers', 'events', 'payments', 'sessions', 'inventory',
                             'clicks'])[1 + (g / 3) %% 7]
                   || '_' || substr(md5(g::text), 1, 8),
                   'dataset', now(), now()
              FROM generate_series(1, %s) AS g
            """,
            (count,),
        )
        owner.execute("VACUUM ANALYZE metastore.datasets")
        sample = owner.execute("SELECT name FROM metastore.datasets WHERE id = 424242 %% %s + 1", (count,)).fetchone()
        assert sample is not None
        rare = sample[0].rsplit("_", 1)[1][:6]  # a piece of one table's hex token
        has_index = owner.execute("SELECT to_regclass('metastore.datasets_name_trgm_idx') IS NOT NULL").fetchone()
        matches = {}
        for q in (rare, "payments", "SALES_1"):
            row = owner.execute(
                "SELECT count(*) FROM metastore.datasets WHERE strpos(lower(name), lower(%s)) > 0", (q,)
            ).fetchone()
            matches[q] = row[0] if row else 0
    print(f"  {count} datasets; matches per q: {matches}; trigram index: {has_index}", file=sys.stderr)

    def run(label: str) -> dict[str, Any]:
        out = {}
        with psycopg.connect(service_dsn, autocommit=True) as conn:
            for name, q in (("rare_q", rare), ("common_q", "payments"), ("mixed_case_q", "SALES_1"), ("no_q", None)):
                query = "SELECT metastore.list_datasets(100, NULL, NULL, NULL, NULL, %s)"
                conn.execute(query, (q,)).fetchall()  # warm the cache
                times = [timed(conn, query, (q,)) for _ in range(calls)]
                out[name] = {
                    "p50_ms": round(percentile(times, 0.5) * 1000, 2),
                    "p99_ms": round(percentile(times, 0.99) * 1000, 2),
                    "matches": matches.get(q or "", count),
                }
        print(f"  {label}: {out}", file=sys.stderr)
        return out

    result = {"datasets": count, "with_trigram_index": run("with the trigram index")}
    with psycopg.connect(owner_dsn, autocommit=True) as owner:
        owner.execute("DROP INDEX metastore.datasets_name_trgm_idx")
        owner.execute("ANALYZE metastore.datasets")
    result["without_trigram_index"] = run("without it")
    return result


def deploy_old(server: LocalPostgres, old: Path) -> tuple[str, str]:
    """An older checkout's schema, deployed by its own code, in a database of its own."""
    # Checkouts before devtools/ kept the launcher in the package (metastore.localpg).
    code = (
        "from pathlib import Path\n"
        "try:\n    from devtools.localpg import provision, LocalPostgres\n"
        "except ImportError:\n    from metastore.localpg import provision, LocalPostgres\n"
        f"s = LocalPostgres(data_dir=Path({str(server.base)!r}), port={server.port}); provision(s, 'old')"
    )
    env = {**os.environ, "PYTHONPATH": f"{old / 'service'}:{old}"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=old, timeout=600)
    return server.dsn_for("metastore_service", "old"), server.dsn_for("metastore_owner", "old")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="250,500,1000,2000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--old", type=Path, help="an older checkout to compare the batch timings with")
    parser.add_argument("--skip-batches", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {}
    with LocalPostgres() as server:
        provision(server, "batches")
        owner_dsn = server.dsn_for("metastore_owner", "batches")
        service_dsn = server.dsn_for("metastore_service", "batches")
        if not args.skip_batches:
            print("== batches (this checkout)", file=sys.stderr)
            results["batches"] = bench_batches(service_dsn, owner_dsn, sizes, args.rounds)
            results["numbers_check"] = bench_numbers_check(owner_dsn)
        if args.old and not args.skip_batches:
            print(f"== batches ({args.old})", file=sys.stderr)
            old_service, old_owner = deploy_old(server, args.old)
            results["batches_old"] = bench_batches(old_service, old_owner, sizes, 1)
        if args.names:
            print("== list_datasets", file=sys.stderr)
            results["list_datasets"] = bench_names(server, args.names, args.calls)
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
