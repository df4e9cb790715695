"""Every read call of the service, and every table, as comparable values: for tests that compare
two stores (Citus and plain PostgreSQL; a store before and after an archive round trip)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import sql

# Columns whose values are the moment or the transaction of storing, not the events.
UNEQUAL = {"received_at", "xact_id"}


def without_unequal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_unequal(v) for k, v in value.items() if k not in UNEQUAL}
    if isinstance(value, list | tuple):
        return [without_unequal(v) for v in value]
    return value


def tables(dsn: str) -> dict[str, list[Any]]:
    """Every table of the schema (partitions through their parents), as the owner sees it."""
    out: dict[str, list[Any]] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'metastore'::regnamespace "
                "AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1"
            )
        ]
        for name in names:
            rows = conn.execute(
                sql.SQL("SELECT to_jsonb(t) FROM metastore.{} AS t").format(sql.Identifier(name))
            ).fetchall()
            out[name] = sorted(json.dumps(without_unequal(r[0]), sort_keys=True) for r in rows)
    return out


def pages(conn: psycopg.Connection[Any], call: str, **params: Any) -> list[Any]:
    """Every page of a listing, following next_cursor."""
    got, cursor = [], None
    while True:
        row = conn.execute(call, {**params, "cursor": cursor}).fetchone()
        assert row is not None
        got.append(row[0])
        cursor = row[0]["next_cursor"]
        if cursor is None:
            return got


VIEWS = ("datasets_view", "dataset_events_view", "dataset_symlinks_view")


def view_rows(conn: psycopg.Connection[Any], view: str) -> list[str]:
    """A view's rows as sorted JSON texts (rows in no order). Named by the columns the client gets:
    on Citus a whole-row value of a view over distributed tables loses its column names."""
    cur = conn.execute(sql.SQL("SELECT * FROM metastore.{}").format(sql.Identifier(view)))
    names = [c.name for c in cur.description or ()]
    rows = (without_unequal(dict(zip(names, r, strict=True))) for r in cur)
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def read_calls(dsn: str, views: tuple[str, ...] = VIEWS) -> Iterator[tuple[str, Any]]:
    """Every read function of the service (queries.sql), with arguments that reach every dataset, job
    and run; and the views. The event feed (read_events) is not among them: see docs/scale.md."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        list_datasets = "SELECT metastore.list_datasets(%(limit)s, %(cursor)s, %(ns)s, %(scheme)s, %(kind)s, %(q)s)"
        for limit, ns, scheme, kind, q in [
            (7, None, None, None, None),
            (100, None, None, None, None),
            (5, "trino://h:8080", None, None, None),
            (5, None, "hive", None, None),
            (5, None, None, "symlink", None),
            (5, None, None, None, "out1"),
            (3, None, None, None, "T1"),
        ]:
            args = {"limit": limit, "ns": ns, "scheme": scheme, "kind": kind, "q": q}
            yield f"list_datasets {args}", pages(conn, list_datasets, **args)
        ids = [r[0] for r in conn.execute("SELECT id FROM metastore.datasets_view ORDER BY id")]
        for i in ids:
            yield f"get_dataset {i}", conn.execute("SELECT metastore.get_dataset(%s)", (i,)).fetchone()
            yield f"get_dataset {i} 3", conn.execute("SELECT metastore.get_dataset(%s, 3)", (i,)).fetchone()
            yield f"dataset_runs {i}", conn.execute("SELECT metastore.dataset_runs(%s)", (i,)).fetchone()
            for direction, depth in (("both", 3), ("upstream", 1), ("downstream", 5)):
                yield (
                    f"dataset_lineage {i} {direction} {depth}",
                    conn.execute("SELECT metastore.dataset_lineage(%s, %s, %s)", (i, direction, depth)).fetchone(),
                )
        for field in ("c0", "c3", "nationkey", "absent"):
            yield (
                f"datasets_with_field {field}",
                conn.execute("SELECT metastore.datasets_with_field(%s)", (field,)).fetchone(),
            )
        yield "dataset_summary", conn.execute("SELECT metastore.dataset_summary()").fetchone()
        list_jobs = "SELECT metastore.list_jobs(%(limit)s, %(cursor)s, %(ns)s, %(q)s)"
        for limit, ns, q in [(5, None, None), (100, None, None), (4, "ns1", None), (4, None, "job1")]:
            yield f"list_jobs {limit} {ns} {q}", pages(conn, list_jobs, limit=limit, ns=ns, q=q)
        for (i,) in conn.execute(
            "SELECT (j->>'id')::bigint FROM jsonb_array_elements(metastore.list_jobs(1000)->'jobs') AS j"
        ).fetchall():
            yield f"get_job {i}", conn.execute("SELECT metastore.get_job(%s)", (i,)).fetchone()
        run_ids = conn.execute(
            "SELECT DISTINCT (r->>'id')::bigint FROM jsonb_array_elements(metastore.list_jobs(1000)->'jobs') AS j, "
            "jsonb_array_elements(metastore.get_job((j->>'id')::bigint, 1000)->'runs') AS r ORDER BY 1"
        ).fetchall()
        assert run_ids
        for (i,) in run_ids:
            yield f"get_run {i}", conn.execute("SELECT metastore.get_run(%s)", (i,)).fetchone()
        for call in ("schema_version", "partitions_ahead", "forward_status"):
            yield call, conn.execute(sql.SQL("SELECT metastore.{}()").format(sql.Identifier(call))).fetchone()
        for view in views:
            yield view, view_rows(conn, view)
