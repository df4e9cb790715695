"""What de-duplication and the dataset counters cost per event, against a throwaway PostgreSQL:
python -m bench.dedupe [--events 2000] [--seconds 10] [--clients 8]

1. The hash: metastore.store_event keys an event on sha256 of its jsonb printed as text. Per
   event, on the Trino COMPLETE fixtures (about 18 KB) and a minimal event: printing alone, the
   key as stored, and the candidates (jsonb_hash_extended, md5 of the text), over a temp table of
   distinct events, as the median of 5 rounds. Then whether jsonb_hash_extended tells apart the
   events the stored key does (it must, or it changes what counts as a duplicate).
   With --old DIR: ingest_event per event, this checkout against an older one, alternating.
2. The counters: store_event updated input_events, output_events and last_seen of every dataset an
   event mentions (ON CONFLICT DO UPDATE), which row-locks it until commit; now it appends to
   dataset_activity (metastore.roll_up_datasets folds it in). --clients connections, one durable
   commit per event (synchronous_commit on, fsync on), each event reading one dataset: all the
   same dataset, or each its own; with --old DIR the older checkout too, in alternating rounds.
   Events/s over --seconds each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.common import emit, in_threads
from devtools.localpg import LocalPostgres, provision

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "openlineage" / "trino"
COMPLETE = ("02-select-complete.json", "04-ctas-complete.json", "07-ctas-complete-trino476.json")
MINIMAL = {
    "eventTime": "2024-05-01T12:00:00Z",
    "eventType": "COMPLETE",
    "run": {"runId": "r"},
    "job": {"namespace": "j", "name": "n"},
    "inputs": [{"namespace": "s3://b", "name": "t"}],
}


def bench_hash(owner_dsn: str, events: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cases = {"trino_complete": [(FIXTURES / n).read_text() for n in COMPLETE], "minimal": [json.dumps(MINIMAL)]}
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        for case, bodies in cases.items():
            conn.execute("DROP TABLE IF EXISTS pg_temp.t")
            conn.execute(
                "CREATE TEMP TABLE t AS SELECT (b.j::jsonb || jsonb_build_object('i', g)) AS j "
                "FROM generate_series(1, %s) AS g, LATERAL (SELECT (%s::text[])[1 + g %% %s] AS j) AS b",
                (events, bodies, len(bodies)),
            )
            size = conn.execute("SELECT avg(octet_length(j::text))::int FROM t").fetchone()
            result: dict[str, Any] = {"bytes": size[0] if size else None}
            for name, expr in (
                # The table's values are compressed; store_event's is not: detoasting is the baseline.
                ("detoast_only", "jsonb_typeof(j) IS NOT NULL"),
                ("print_text", "j::text IS NOT NULL"),
                ("sha256_of_text_as_stored", "sha256(convert_to(j::text, 'UTF8')) IS NOT NULL"),
                ("md5_of_text", "md5(j::text) IS NOT NULL"),
                ("jsonb_hash_extended", "jsonb_hash_extended(j, 0) IS NOT NULL"),
            ):
                times = []
                for _ in range(5):
                    started = time.perf_counter()
                    conn.execute(sql.SQL("SELECT count(*) FROM t WHERE {}").format(sql.SQL(expr))).fetchone()
                    times.append(time.perf_counter() - started)
                result[f"{name}_us"] = round(statistics.median(times) / events * 1e6, 2)
            out[case] = result
            print(f"  {case}: {result}", file=sys.stderr)
        # Equal as jsonb is not equal as stored: numbers keep the digits they were sent with.
        row = conn.execute(
            "SELECT a = b, sha256(convert_to(a::text, 'UTF8')) = sha256(convert_to(b::text, 'UTF8')), "
            "jsonb_hash_extended(a, 0) = jsonb_hash_extended(b, 0) "
            "FROM (SELECT '{\"n\": 1.0}'::jsonb AS a, '{\"n\": 1.00}'::jsonb AS b) AS x"
        ).fetchone()
        assert row is not None
        out["1.0_vs_1.00"] = {"jsonb_equal": row[0], "stored_key_equal": row[1], "jsonb_hash_equal": row[2]}
        print(f"  {{'n': 1.0}} vs {{'n': 1.00}}: {out['1.0_vs_1.00']}", file=sys.stderr)
    return out


def event(client: int, i: int, dataset: str) -> bytes:
    return json.dumps(
        {
            "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "eventType": "COMPLETE",
            "run": {"runId": str(uuid.uuid4())},
            "job": {"namespace": "bench", "name": f"c{client}"},
            "inputs": [{"namespace": "s3://bench", "name": dataset}],
            "outputs": [{"namespace": "s3://bench", "name": f"out/{client}/{i}"}],
        }
    ).encode()


def run_clients(service_dsn: str, clients: int, seconds: float, dataset: str | None) -> float:
    """Events/s of `clients` connections, each event reading `dataset` (None: each client its own)."""
    counts = [0] * clients
    stop = time.monotonic() + seconds

    def client(c: int) -> None:
        with psycopg.connect(service_dsn, autocommit=True) as conn:
            i = 0
            while time.monotonic() < stop:
                body = event(c, i, dataset or f"own/{c}/{uuid.uuid4()}")
                row = conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone()
                assert row == ("stored",), row
                i += 1
            counts[c] = i

    in_threads(client, ((c,) for c in range(clients)))
    return sum(counts) / seconds


def bench_counters(
    server: LocalPostgres, old: Path | None, clients: int, seconds: float, rounds: int
) -> dict[str, Any]:
    """This checkout (and an older one, deployed beside it), alternating rounds."""
    provision(server, "counters")
    dsns = {"this": server.dsn_for("metastore_service", "counters")}
    if old:
        from bench.ingest_guards import deploy_old

        dsns["old"] = deploy_old(server, old)[0]
    results: dict[str, list[float]] = {}
    for r in range(rounds):
        for shared in (True, False):
            for label, dsn in dsns.items():
                case = f"{label}_{'shared' if shared else 'own'}_dataset"
                rate = run_clients(dsn, clients, seconds, f"shared/{r}" if shared else None)
                results.setdefault(case, []).append(rate)
                print(f"  round {r + 1}, {case}: {rate:.0f} events/s", file=sys.stderr)
    return {
        case: {"events_per_s": [round(x) for x in rates], "median": round(statistics.median(rates))}
        for case, rates in results.items()
    }


def bench_ingest_ab(server: LocalPostgres, old: Path, events: int, rounds: int) -> dict[str, Any]:
    """metastore.ingest_event per event (Trino COMPLETE events, one call each), this checkout against
    an older one deployed beside it, in alternating rounds (the machine's load shifts between them)."""
    from bench.ingest_guards import complete_events, deploy_old

    provision(server, "ab")
    dsns = {"this": server.dsn_for("metastore_service", "ab"), "old": deploy_old(server, old)[0]}
    times: dict[str, list[float]] = {k: [] for k in dsns}
    for r in range(rounds):
        for label, dsn in dsns.items():
            bodies = [e.encode() for e in complete_events(events)]
            with psycopg.connect(dsn, autocommit=True) as conn:
                started = time.perf_counter()
                for body in bodies:
                    conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone()
                times[label].append((time.perf_counter() - started) / events * 1000)
            print(f"  round {r + 1}, {label}: {times[label][-1]:.3f} ms per event", file=sys.stderr)
    return {
        k: {"ms_per_event": [round(x, 3) for x in v], "median": round(statistics.median(v), 3)}
        for k, v in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--skip-counters", action="store_true")
    parser.add_argument("--ab-rounds", type=int, default=8)
    parser.add_argument("--old", type=Path, help="an older checkout: ingest_event per event, this one against it")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with LocalPostgres() as server:
        provision(server, "hash")
        print("== hash per event (not durable)", file=sys.stderr)
        results["hash"] = bench_hash(server.dsn_for("metastore_owner", "hash"), args.events)
        row = psycopg.connect(server.dsn, autocommit=True).execute("SELECT version()").fetchone()
        results["hash"]["server"] = row[0] if row else None
        if args.old and args.ab_rounds:
            print(f"== ingest_event per event, this checkout and {args.old}", file=sys.stderr)
            results["ingest_event"] = bench_ingest_ab(server, args.old, 300, args.ab_rounds)
    if args.skip_counters:
        emit(results, None)
        return 0
    with LocalPostgres() as server:
        server.stop()
        server.start(durable=True)
        print(f"== counters, {args.clients} clients, durable commits", file=sys.stderr)
        results["counters"] = bench_counters(server, args.old, args.clients, args.seconds, args.rounds)
    emit(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
