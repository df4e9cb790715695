"""`python -m bench.lineage [--datasets N]`: what the dataset layer costs and how it reads.

- ingest: the same Trino CTAS events (a new query each: new run, new job, as Trino names jobs
  after the query id) into two databases of one server, one with metastore.derive_lineage and one
  with it replaced by a function that does nothing; batches alternate between them so that a
  noisy machine slows both alike. events/s of metastore.ingest_event, and bytes of the schema's
  relations per event.
- ctas: 1000 CTAS reading the same table, the derived tables' rows after every 100 events (Trino's
  job per query, and one job rerun): rows added per event stay constant.
- backfill: CALL metastore.backfill() over the same events in both databases, events/s.
- lineage: a synthetic graph written straight into the tables (N datasets, each written from two
  earlier ones, one in ten with a symlink alias); metastore.dataset_lineage(id, 'both', 5, 200)
  from random datasets, p50/p99 over the client round trip.
Results: bench/results/lineage.json (and lineage-ctas.png).
`--field-search`: metastore.datasets_with_field at --datasets datasets (lineage-field-search.json).
`--wide`: one event of n inputs and n outputs (n x n edges) into a young store, analyzed
(lineage-wide.json): storing it costs time linear in its edges.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from devtools import localpg
from devtools.localpg import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
NOOP = """CREATE OR REPLACE FUNCTION metastore.derive_lineage(
    p_event_ids bigint[], p_payloads jsonb[], p_events metastore.valid_event[], p_dataset_ids jsonb DEFAULT NULL)
    RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $fn$ BEGIN END $fn$"""
CTAS = json.loads((ROOT / "tests" / "fixtures" / "openlineage" / "trino" / "04-ctas-complete.json").read_text())
START = json.loads((ROOT / "tests" / "fixtures" / "openlineage" / "trino" / "03-ctas-start.json").read_text())


def ctas(i: int, job: str | None = None, start: bool = False) -> bytes:
    """Query i's COMPLETE (or with start, its START: no datasets, as Trino sends it)."""
    event: dict[str, Any] = copy.deepcopy(START if start else CTAS)
    event["eventTime"] = f"2026-07-20T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{i:06d}Z"
    event["run"]["runId"] = f"01900000-0000-7000-8000-{i:012d}"
    event["job"]["name"] = job or f"20260720_000000_{i:05d}_bench"
    return json.dumps(event).encode()


def schema_bytes(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c"
        " WHERE c.relnamespace = 'metastore'::regnamespace AND c.relkind IN ('r', 'm')"
    ).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def derived_rows(conn: psycopg.Connection[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for table in ("dataset_schema_versions", "lineage_edges", "column_lineage", "event_datasets", "datasets"):
        row = conn.execute(sql.SQL("SELECT count(*) FROM metastore.{}").format(sql.Identifier(table))).fetchone()
        out[table] = int(row[0]) if row else 0
    return out


def ingest(conn: psycopg.Connection[Any], bodies: list[bytes], set_size: int = 1) -> float:
    """One ingest_event call per event, or ingest_events calls of set_size events (group commit's)."""
    started = time.perf_counter()
    if set_size == 1:
        for body in bodies:
            row = conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone()
            assert row is not None and row[0] == "stored", row
    else:
        for i in range(0, len(bodies), set_size):
            rows = conn.execute(
                "SELECT status FROM metastore.ingest_events(%s::bytea[])", (bodies[i : i + set_size],)
            ).fetchall()
            assert all(r[0] == "stored" for r in rows), rows
    return time.perf_counter() - started


def bench_ingest(server: LocalPostgres, events: int, batch: int, set_size: int = 1) -> dict[str, Any]:
    conns = {}
    for label in ("with", "without"):
        localpg.provision(server, f"bench_{label}")
        conns[label] = psycopg.connect(server.dsn_for("metastore_owner", f"bench_{label}"), autocommit=True)
    conns["without"].execute(NOOP)
    overloads = conns["without"].execute("SELECT count(*) FROM pg_proc WHERE proname = 'derive_lineage'").fetchone()
    assert overloads == (1,), "the no-op must replace metastore.derive_lineage, not overload it"
    empty = {label: schema_bytes(c) for label, c in conns.items()}
    spent = {"with": 0.0, "without": 0.0}
    rounds: dict[str, list[float]] = {"with": [], "without": []}
    for start in range(0, events, batch):
        bodies = [ctas(i) for i in range(start, min(start + batch, events))]
        order = ("with", "without") if (start // batch) % 2 == 0 else ("without", "with")
        for label in order:
            seconds = ingest(conns[label], bodies, set_size)
            spent[label] += seconds
            rounds[label].append(len(bodies) / seconds)
    for c in conns.values():
        c.execute("VACUUM ANALYZE")
    result: dict[str, Any] = {"events": events, "batch": batch, "set_size": set_size}
    for label, c in conns.items():
        result[label] = {
            "events_per_s_overall": round(events / spent[label], 1),
            "events_per_s_median_batch": round(statistics.median(rounds[label]), 1),
            "bytes_per_event": round((schema_bytes(c) - empty[label]) / events, 1),
            "rows": derived_rows(c),
        }
    result["throughput_ratio"] = round(
        result["with"]["events_per_s_overall"] / result["without"]["events_per_s_overall"], 3
    )
    result["storage_ratio"] = round(result["with"]["bytes_per_event"] / result["without"]["bytes_per_event"], 3)
    # Backfill over the same events, with and without the derivation.
    result["backfill"] = {"events": events}
    for label in ("with", "without"):
        started = time.perf_counter()
        conns[label].execute("CALL metastore.backfill()")
        seconds = time.perf_counter() - started
        result["backfill"][label] = {"seconds": round(seconds, 2), "events_per_s": round(events / seconds, 1)}
    for c in conns.values():
        c.close()
    return result


def bench_ctas(server: LocalPostgres, n: int) -> dict[str, Any]:
    localpg.provision(server, "bench_ctas")
    series: dict[str, list[dict[str, int]]] = {"job_per_query": [], "same_job": []}
    with psycopg.connect(server.dsn_for("metastore_owner", "bench_ctas"), autocommit=True) as conn:
        for kind, offset in (("job_per_query", 0), ("same_job", 100000)):
            conn.execute(
                "TRUNCATE metastore.column_lineage, metastore.lineage_edges, metastore.dataset_schema_versions"
            )
            base = derived_rows(conn)
            for start in range(0, n, 100):
                job = None if kind == "job_per_query" else "etl"
                bodies = [ctas(offset + i, job) for i in range(start, start + 100)]
                ingest(conn, bodies)
                rows = derived_rows(conn)
                series[kind].append({"events": start + 100, **{k: rows[k] - base.get(k, 0) for k in rows}})
    return {"events": n, "series": series}


def insert_datasets(conn: psycopg.Connection[Any], n: int) -> None:
    """n plain datasets cat.s.t1 .. cat.s.tn, written straight into the table (no events)."""
    conn.execute(
        "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)"
        " SELECT 'trino://h:8080', 'cat.s.t' || i, 'dataset', now(), now() FROM generate_series(1, %s) i",
        (n,),
    )


def bench_graph(server: LocalPostgres, datasets: int, samples: int) -> dict[str, Any]:
    localpg.provision(server, "bench_graph")
    with psycopg.connect(server.dsn_for("metastore_owner", "bench_graph"), autocommit=True) as conn:
        started = time.perf_counter()
        insert_datasets(conn, datasets)
        lo = conn.execute("SELECT min(id) FROM metastore.datasets").fetchone()
        assert lo is not None
        base = int(lo[0]) - 1
        # Each dataset written from two earlier ones (near and far), by a job of its own.
        conn.execute(
            "INSERT INTO metastore.lineage_edges (upstream_id, downstream_id, job_sha256, job_namespace, job_name,"
            " first_seen, last_seen)"
            " SELECT DISTINCT ON (u, i) u, i, sha256(convert_to('job' || i, 'UTF8')), 'jobs', 'job' || i, now(), now()"
            "   FROM (SELECT %(base)s + g AS i, %(base)s + greatest(1, g - 1 - (g * 7919) %% 97) AS u1,"
            "                %(base)s + greatest(1, g - 1 - (g * 104729) %% 99991) AS u2"
            "           FROM generate_series(2::bigint, %(n)s) g) s CROSS JOIN LATERAL (VALUES (s.u1), (s.u2)) v (u)"
            "  ORDER BY u, i",
            {"base": base, "n": datasets},
        )
        # One in ten has a symlink alias (a table name for a storage path).
        conn.execute(
            "WITH a AS (INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen)"
            " SELECT 's3://bucket', 'warehouse/t' || i, 'symlink', now(), now()"
            " FROM generate_series(10, %(n)s, 10) i RETURNING id, name)"
            " INSERT INTO metastore.dataset_symlinks (dataset_id, symlink_id, type)"
            " SELECT %(base)s + substr(a.name, 12)::bigint, a.id, 'LOCATION' FROM a",
            {"base": base, "n": datasets},
        )
        conn.execute("VACUUM ANALYZE")
        built = time.perf_counter() - started
        edges = conn.execute("SELECT count(*) FROM metastore.lineage_edges").fetchone()
        rng = random.Random(15)  # noqa: S311 (reproducible samples, not secrets)
        times: list[float] = []
        sizes: list[int] = []
        for _ in range(samples):
            start = base + rng.randint(1, datasets)
            t0 = time.perf_counter()
            row = conn.execute("SELECT metastore.dataset_lineage(%s, 'both', 5, 200)::text", (start,)).fetchone()
            times.append((time.perf_counter() - t0) * 1000)
            assert row is not None
            sizes.append(len(json.loads(row[0])["nodes"]))
        times.sort()
        return {
            "datasets": datasets,
            "edges": int(edges[0]) if edges else 0,
            "build_seconds": round(built, 1),
            "samples": samples,
            "depth": 5,
            "node_limit": 200,
            "ms_p50": round(statistics.median(times), 2),
            "ms_p99": round(times[int(len(times) * 0.99) - 1], 2),
            "ms_max": round(times[-1], 2),
            "nodes_median": statistics.median(sizes),
            "nodes_max": max(sizes),
        }


def bench_field_search(server: LocalPostgres, datasets: int, samples: int) -> dict[str, Any]:
    """metastore.datasets_with_field over `datasets` datasets with a current schema version each:
    five fields, "id" in all, a name shared by 100 datasets, one by 10, one unique; and one dataset
    in 33 with an older version that had a field no current one has."""
    localpg.provision(server, "bench_fields")
    with psycopg.connect(server.dsn_for("metastore_owner", "bench_fields"), autocommit=True) as conn:
        started = time.perf_counter()
        insert_datasets(conn, datasets)
        conn.execute(
            "INSERT INTO metastore.dataset_schema_versions"
            " (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen)"
            " SELECT d.id, sha256(convert_to(f::text, 'UTF8')), f, 1, now(), now()"
            "   FROM metastore.datasets d CROSS JOIN LATERAL (SELECT jsonb_build_array("
            "        jsonb_build_object('name', 'id', 'type', 'bigint'),"
            "        jsonb_build_object('name', 'shared100_' || (d.id %% (%(n)s / 100)), 'type', 'varchar'),"
            "        jsonb_build_object('name', 'shared10_' || (d.id %% (%(n)s / 10)), 'type', 'varchar'),"
            "        jsonb_build_object('name', 'unique_' || d.id, 'type', 'varchar'),"
            "        jsonb_build_object('name', 'amount', 'type', 'decimal(12,2)')) AS f) AS x",
            {"n": datasets},
        )
        # One dataset in 33 had "renamed" in an older version: a field many had and none has now.
        conn.execute(
            "INSERT INTO metastore.dataset_schema_versions"
            " (dataset_id, fields_sha256, fields, first_event_id, first_seen, last_seen)"
            " SELECT d.id, sha256(convert_to(f::text, 'UTF8')), f, 1, now() - interval '1 day',"
            "        now() - interval '1 day'"
            "   FROM metastore.datasets d CROSS JOIN LATERAL (SELECT jsonb_build_array("
            "        jsonb_build_object('name', 'id', 'type', 'bigint'),"
            "        jsonb_build_object('name', 'renamed', 'type', 'varchar')) AS f) AS x"
            "  WHERE d.id % 33 = 0"
        )
        conn.execute("VACUUM ANALYZE")
        built = time.perf_counter() - started
        rng = random.Random(16)  # noqa: S311 (reproducible samples, not secrets)
        result: dict[str, Any] = {"datasets": datasets, "build_seconds": round(built, 1), "samples": samples}
        for label, make in (
            ("unique", lambda: f"unique_{rng.randint(1, datasets)}"),
            ("shared_by_10", lambda: f"shared10_{rng.randint(0, datasets // 10 - 1)}"),
            ("shared_by_100", lambda: f"shared100_{rng.randint(0, datasets // 100 - 1)}"),
            ("in_every_dataset_first_100", lambda: "id"),
            ("dropped_by_every_33rd", lambda: "renamed"),
        ):
            times: list[float] = []
            for _ in range(samples if label in ("unique", "shared_by_10", "shared_by_100") else max(5, samples // 20)):
                t0 = time.perf_counter()
                conn.execute("SELECT metastore.datasets_with_field(%s, 100)::text", (make(),)).fetchone()
                times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            result[label] = {
                "calls": len(times),
                "ms_p50": round(statistics.median(times), 2),
                "ms_p99": round(times[max(0, int(len(times) * 0.99) - 1)], 2),
            }
        return result


def bench_wide(server: LocalPostgres, sizes: tuple[int, ...]) -> dict[str, Any]:
    """An event of n inputs and n outputs, each size into its own database holding 100 small events,
    analyzed (what autovacuum does to a young store): ms to store it and its n x n edges."""
    result: dict[str, Any] = {"sizes": []}
    for n in sizes:
        name = f"bench_wide_{n}"
        localpg.provision(server, name)
        with psycopg.connect(server.dsn_for("metastore_service", name), autocommit=True) as conn:
            for i in range(100):
                small = json.loads(ctas(i))
                small["inputs"], small["outputs"] = (
                    [{"namespace": "n", "name": f"a{i}"}],
                    [{"namespace": "n", "name": f"b{i}"}],
                )
                conn.execute("SELECT metastore.ingest_event(%b)", (json.dumps(small).encode(),))
        with psycopg.connect(server.dsn_for("metastore_owner", name), autocommit=True) as owner:
            owner.execute("ANALYZE")
        wide = json.loads(ctas(1000))
        wide["inputs"] = [{"namespace": "n", "name": f"in{k}"} for k in range(n)]
        wide["outputs"] = [{"namespace": "n", "name": f"out{k}"} for k in range(n)]
        body = json.dumps(wide).encode()
        with psycopg.connect(server.dsn_for("metastore_service", name), autocommit=True) as conn:
            started = time.perf_counter()
            row = conn.execute("SELECT status FROM metastore.ingest_event(%b)", (body,)).fetchone()
            ms = (time.perf_counter() - started) * 1000
        assert row is not None and row[0] == "stored", row
        result["sizes"].append(
            {
                "n": n,
                "edges": n * n,
                "body_kb": round(len(body) / 1024, 1),
                "ms": round(ms, 1),
                "us_per_edge": round(ms * 1000 / (n * n), 2),
            }
        )
    return result


def plot(ctas_result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for kind, style in (("job_per_query", "-"), ("same_job", "--")):
        points = ctas_result["series"][kind]
        xs = [p["events"] for p in points]
        for table in ("lineage_edges", "column_lineage", "dataset_schema_versions"):
            ax.plot(xs, [p[table] for p in points], style, label=f"{table} ({kind.replace('_', ' ')})")
    ax.set_xlabel("CTAS events reading the same table")
    ax.set_ylabel("rows")
    ax.set_title("Derived rows, CTAS reading one table (Trino: a job per query)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=int, default=1_000_000, help="datasets of the synthetic graph")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--set-size", type=int, default=1, help="events per ingest call (1: ingest_event)")
    parser.add_argument("--out", type=Path, default=RESULTS / "lineage.json")
    parser.add_argument("--field-search", action="store_true", help="only the field-name search")
    parser.add_argument("--wide", action="store_true", help="only an event of n inputs and n outputs")
    args = parser.parse_args()
    server = LocalPostgres().start()
    try:
        if args.wide:
            wide = bench_wide(server, (50, 100, 200, 400, 600))
            wide["command"] = "python -m bench.lineage --wide"
            print(json.dumps(wide, indent=1))
            args.out.with_name("lineage-wide.json").write_text(json.dumps(wide, indent=2) + "\n")
            return
        if args.field_search:
            found = bench_field_search(server, args.datasets, args.samples)
            found["command"] = f"python -m bench.lineage --field-search --datasets {args.datasets}"
            print(json.dumps(found, indent=1))
            args.out.with_name("lineage-field-search.json").write_text(json.dumps(found, indent=2) + "\n")
            return
        result: dict[str, Any] = {"command": f"python -m bench.lineage --datasets {args.datasets}"}
        result["ingest"] = bench_ingest(server, args.events, 200, args.set_size)
        print(json.dumps(result["ingest"], indent=1))
        result["ctas"] = bench_ctas(server, 1000)
        print(json.dumps(result["ctas"]["series"]["job_per_query"][-1]))
        result["lineage"] = bench_graph(server, args.datasets, args.samples)
        print(json.dumps(result["lineage"], indent=1))
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        plot(result["ctas"], args.out.with_name("lineage-ctas.png"))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
