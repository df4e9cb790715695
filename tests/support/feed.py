"""The event feed read in SQL (metastore.read_events), and the events its tests store."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg

from metastore.arguments import FILTERS
from tests.support.events import run_event

# read_events takes the filters of GET /api/v1/events, in that order.
READ = "SELECT event, cursor, more FROM metastore.read_events(%s::int, %s" + ", %s" * len(FILTERS) + ")"


def page(
    conn: psycopg.Connection[Any], limit: int = 100, cursor: str | None = None, **filters: str
) -> tuple[list[dict[str, Any]], str | None, bool]:
    """(events, next cursor, more): the cursor of the last event, or the one passed when none came."""
    unknown = set(filters) - set(FILTERS)
    assert not unknown, unknown
    rows = conn.execute(READ, (limit, cursor, *(filters.get(f) for f in FILTERS))).fetchall()
    events = [json.loads(r[0]) for r in rows]
    for event, row in zip(events, rows, strict=True):
        assert event["cursor"] == row[1]
    return events, (rows[-1][1] if rows else cursor), bool(rows and rows[0][2])


def event(i: int, *, job: str = "q", when: str | None = None, kind: str = "COMPLETE", ds: str = "t") -> dict[str, Any]:
    return run_event(
        f"run-{i}",
        job=f"{job}-{i}",
        namespace="trino://h:8080",
        event_time=when or f"2024-03-01T00:00:{i % 60:02d}.{i:06d}Z",
        event_type=kind,
        producer="https://example/test",
        inputs=[f"cat.sch.{ds}"],
        outputs=[{"namespace": "s3://bucket", "name": f"out/{i}"}],
    )


Page = Callable[..., tuple[list[dict[str, Any]], str | None, bool]]


def read_all(
    conn: psycopg.Connection[Any], limit: int = 100, reader: Page = page, **filters: str
) -> list[dict[str, Any]]:
    """Every event, page after page with `reader` (page, or one that runs the sequencer first)."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        events, cursor, more = reader(conn, limit, cursor, **filters)
        out += events
        if not more:
            return out


# A page holds at most this much text, unless its one event is larger.
PAGE_BYTES = 1 << 20


def padded(i: int, size: int) -> dict[str, Any]:
    """event(i) with about `size` more bytes of text in a run facet."""
    return {**event(i), "run": {"runId": f"run-{i}", "facets": {"pad": {"text": "x" * size}}}}


def page_rows(
    conn: psycopg.Connection[Any], limit: int, cursor: str | None, sequenced: bool = False
) -> list[tuple[str, str, bool]]:
    """One page's rows as read_events returns them (event text, cursor, more); `sequenced`: after a
    pass of the sequencer, as the service reads on Citus."""
    if sequenced:
        conn.execute("SELECT metastore.sequence_feed()")
    return conn.execute(READ, (limit, cursor, *([None] * len(FILTERS)))).fetchall()


def text_pages(conn: psycopg.Connection[Any], limit: int, sequenced: bool = False) -> tuple[list[int], list[list[int]]]:
    """The whole feed page after page: the events' ids, and each page's texts' sizes in bytes; every
    row of a page says the same about more."""
    ids: list[int] = []
    pages: list[list[int]] = []
    cursor = None
    while True:
        rows = page_rows(conn, limit, cursor, sequenced)
        if not rows:
            return ids, pages
        assert all(r[2] == rows[0][2] for r in rows)
        pages.append([len(r[0].encode()) for r in rows])
        ids += [json.loads(r[0])["id"] for r in rows]
        cursor = rows[-1][1]
        if not rows[0][2]:
            return ids, pages
