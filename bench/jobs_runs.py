"""`python -m bench.jobs_runs`: what deriving jobs and runs (metastore.derive_job_run, V0007)
costs. Two databases on one throwaway PostgreSQL take the same shape of load: Trino CTAS queries,
a START and a COMPLETE each (the fixtures 03 and 04, with a new query id and run id per query),
in batches of metastore.ingest_events, in an arrival order shuffled within each batch. In one
database the derivation runs; in the other it is replaced by a function that returns at once.
Rounds alternate between them, so that a noisy machine hits both alike. Then, in each, storage
per event (every relation of schema metastore, indexes and TOAST included) and CALL
metastore.backfill() in events/s. Writes bench/results/jobs_runs.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from devtools import localpg
from devtools.localpg import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "openlineage" / "trino"
NOOP = """CREATE OR REPLACE FUNCTION metastore.derive_job_run(
    p_payloads jsonb[], p_events metastore.valid_event[]) RETURNS void LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$ BEGIN RETURN; END $fn$"""
SIZE = """SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class AS c
           WHERE c.relnamespace = 'metastore'::regnamespace AND c.relkind IN ('r', 'm')"""


def queries(start: int, count: int, base: datetime) -> list[bytes]:
    """count queries from number start: START and COMPLETE of each, as JSON bodies."""
    begin = json.loads((FIXTURES / "03-ctas-start.json").read_text())
    end = json.loads((FIXTURES / "04-ctas-complete.json").read_text())
    bodies = []
    for n in range(start, start + count):
        at = base + timedelta(milliseconds=n * 10)
        for event, offset in ((begin, 0), (end, 600)):
            event = json.loads(json.dumps(event))
            event["run"]["runId"] = f"bench-run-{n:09d}"
            event["job"]["name"] = f"20261130_000000_{n:09d}_bench"
            event["eventTime"] = (at + timedelta(milliseconds=offset)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            bodies.append(json.dumps(event).encode())
    return bodies


def backend_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the server process of a connection has used: unlike wall time,
    hardly moved by other processes sharing the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ingest(conn: psycopg.Connection[Any], bodies: list[bytes], batch: int, rng: random.Random) -> tuple[float, float]:
    """Wall and server CPU seconds to store the bodies, batch by batch, each batch shuffled."""
    pid = conn.info.backend_pid
    cpu = backend_cpu_s(pid)
    started = time.perf_counter()
    for i in range(0, len(bodies), batch):
        chunk = bodies[i : i + batch]
        rng.shuffle(chunk)
        rows = conn.execute("SELECT status FROM metastore.ingest_events(%s::bytea[])", (chunk,)).fetchall()
        assert all(r[0] == "stored" for r in rows), rows[:3]
    return time.perf_counter() - started, backend_cpu_s(pid) - cpu


def ingest_rounds(
    conns: dict[str, psycopg.Connection[Any]], args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Events/s and server CPU per event of each round, the two databases in alternating order."""
    rng = random.Random(15)  # noqa: S311  (an arrival order, not a secret)
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=6)
    rates: dict[str, list[float]] = {"with": [], "without": []}
    cpu_us: dict[str, list[float]] = {"with": [], "without": []}
    number = 0
    for r in range(args.rounds):
        order = ("with", "without") if r % 2 == 0 else ("without", "with")
        for label in order:
            bodies = queries(number, args.queries, base)
            number += args.queries
            seconds, cpu = ingest(conns[label], bodies, args.batch, rng)
            rates[label].append(len(bodies) / seconds)
            cpu_us[label].append(cpu / len(bodies) * 1e6)
            print(
                f"round {r + 1} {label:7s}: {len(bodies) / seconds:8.0f} events/s, "
                f"{cpu / len(bodies) * 1e6:6.0f} us server CPU per event"
            )
    return rates, cpu_us


def jobs_runs_rows(conn: psycopg.Connection[Any], events: int) -> dict[str, int]:
    jr = conn.execute(
        "SELECT (SELECT count(*) FROM metastore.jobs), (SELECT count(*) FROM metastore.runs), "
        "pg_total_relation_size('metastore.jobs') + pg_total_relation_size('metastore.runs')"
    ).fetchone()
    assert jr is not None
    return {"jobs": jr[0], "runs": jr[1], "bytes": jr[2], "bytes_per_event": round(jr[2] / events)}


def backfills(conns: dict[str, psycopg.Connection[Any]], events: int, result: dict[str, Any]) -> None:
    result["backfill_events_per_s"] = {}
    result["backfill_server_cpu_us_per_event"] = {}
    for label, conn in conns.items():
        cpu = backend_cpu_s(conn.info.backend_pid)
        started = time.perf_counter()
        conn.execute("CALL metastore.backfill()")
        seconds = time.perf_counter() - started
        cpu = backend_cpu_s(conn.info.backend_pid) - cpu
        result["backfill_events_per_s"][label] = round(events / seconds)
        result["backfill_server_cpu_us_per_event"][label] = round(cpu / events * 1e6)
        print(f"backfill {label:7s}: {events / seconds:8.0f} events/s ({seconds:.1f} s, {cpu:.2f} s CPU)")
    check = (
        conns["with"]
        .execute(
            "SELECT count(*) FILTER (WHERE state = 'COMPLETE' AND duration IS NOT NULL), count(*) FROM metastore.runs"
        )
        .fetchone()
    )
    assert check is not None and check[0] == check[1] == events // 2, check


def measure(conns: dict[str, psycopg.Connection[Any]], args: argparse.Namespace) -> dict[str, Any]:
    version = conns["with"].execute("SHOW server_version").fetchone()
    size0 = {label: conn.execute(SIZE).fetchone()[0] for label, conn in conns.items()}  # type: ignore[index]
    rates, cpu_us = ingest_rounds(conns, args)
    events = args.rounds * args.queries * 2
    result: dict[str, Any] = {
        "command": "python -m bench.jobs_runs "
        + f"--queries {args.queries} --rounds {args.rounds} --batch {args.batch}",
        "postgresql": version[0] if version else None,
        "events_per_database": events,
        "event": "Trino CTAS START (2.2 kB) and COMPLETE (22 kB), fixtures 03 and 04, one job and run per query",
        "ingest_events_per_s": {label: [round(x) for x in xs] for label, xs in rates.items()},
        "ingest_events_per_s_median": {label: round(statistics.median(xs)) for label, xs in rates.items()},
    }
    result["server_cpu_us_per_event_median"] = {label: round(statistics.median(xs)) for label, xs in cpu_us.items()}
    result["server_cpu_ratio_with_over_without"] = round(
        result["server_cpu_us_per_event_median"]["with"] / result["server_cpu_us_per_event_median"]["without"], 3
    )
    result["ingest_ratio_with_over_without"] = round(
        result["ingest_events_per_s_median"]["with"] / result["ingest_events_per_s_median"]["without"], 3
    )
    sizes = {label: conn.execute(SIZE).fetchone()[0] for label, conn in conns.items()}  # type: ignore[index]
    result["storage_bytes_per_event"] = {label: round((sizes[label] - size0[label]) / events) for label in conns}
    result["storage_ratio_with_over_without"] = round(
        result["storage_bytes_per_event"]["with"] / result["storage_bytes_per_event"]["without"], 3
    )
    result["jobs_runs_rows"] = jobs_runs_rows(conns["with"], events)
    backfills(conns, events, result)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, default=1000, help="queries per round and database (2 events each)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "jobs_runs.json")
    args = parser.parse_args()
    server = LocalPostgres().start()
    try:
        conns: dict[str, psycopg.Connection[Any]] = {}
        for label in ("with", "without"):
            localpg.provision(server, f"bench_{label}")
            conns[label] = psycopg.connect(server.dsn_for("metastore_owner", f"bench_{label}"), autocommit=True)
        conns["without"].execute(NOOP)
        result = measure(conns, args)
        for conn in conns.values():
            conn.close()
    finally:
        server.cleanup()
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
