"""The daily partitions of the events and their links: what exists, events at a given time, and
metastore.create_partitions called as the tests call it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg

from tests.support.rows import value


def utc_today() -> date:
    return datetime.now(UTC).date()


def event_at(when: datetime | str, name: str, run: str = "r") -> dict[str, Any]:
    stamp = when if isinstance(when, str) else when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "eventTime": stamp,
        "eventType": "COMPLETE",
        "run": {"runId": f"{run}-{stamp}"},
        "job": {"namespace": "trino://h:8080", "name": f"q-{name}"},
        "inputs": [{"namespace": "trino://h:8080", "name": name}],
    }


def noon(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def partitions(owner: psycopg.Connection[Any], table: str) -> dict[str, tuple[datetime, datetime] | None]:
    """Partition name -> (from, to), None for the default partition."""
    rows = owner.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = %s::regclass",
        (f"metastore.{table}",),
    ).fetchall()
    out: dict[str, tuple[datetime, datetime] | None] = {}
    for name, bound in rows:
        if bound == "DEFAULT":
            out[name] = None
            continue
        row = owner.execute(
            "SELECT (regexp_match(%s, 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz, "
            "(regexp_match(%s, 'TO \\(''([^'']+)''\\)'))[1]::timestamptz",
            (bound, bound),
        ).fetchone()
        assert row is not None
        out[name] = (row[0], row[1])
    return out


def create(conn: psycopg.Connection[Any], p_from: date | None = None, days_ahead: int | None = None) -> int:
    args = {"p_from": p_from or utc_today() - timedelta(days=1), "days": 14 if days_ahead is None else days_ahead}
    return int(value(conn, "SELECT metastore.create_partitions(%(p_from)s::date, %(days)s::integer)", args))
