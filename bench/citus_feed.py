"""`python -m bench.citus_feed`: what a page of the event feed costs on each layout, side by side on
one machine, in one run: plain PostgreSQL 15 and Citus 13.2.2 (a coordinator and two workers on the
same machine), the same binaries, the same events, rounds alternating which goes first.

- page: the whole feed read from its start in pages of --limit as the service role, as
  `GET /api/v1/events` reads it (on Citus a sequencer pass in its own transaction before each
  page; on one server none is needed): ms per page and µs per event;
- tail poll: a reader at the end of the feed asking for more (the pass and an empty page), the
  steady cost of a follower such as live forwarding: ms per poll.

Writes --out (bench/results/citus-feed.json); docs/events.md reads it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.citus import DB, bodies, sequential
from bench.common import emit
from devtools import localpg
from devtools.citus import CitusCluster
from devtools.localpg import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
READ = "SELECT cursor, more FROM metastore.read_events(p_limit => %s, p_cursor => %s)"


def read_feed(conn: psycopg.Connection[Any], limit: int, sequenced: bool) -> tuple[int, int, float, str | None]:
    """(pages, events, seconds, last cursor) of reading the whole feed from its start."""
    pages = events = 0
    cursor = None
    started = time.perf_counter()
    while True:
        if sequenced:
            conn.execute("SELECT metastore.sequence_feed()")
        rows = conn.execute(READ, (limit, cursor)).fetchall()
        pages += 1
        events += len(rows)
        if rows:
            cursor = rows[-1][0]
        if not (rows and rows[0][1]):
            return pages, events, time.perf_counter() - started, cursor


def tail_polls(conn: psycopg.Connection[Any], cursor: str | None, limit: int, sequenced: bool, polls: int) -> float:
    """Median ms of a poll at the end of the feed, which `cursor` names."""
    times = []
    for _ in range(polls):
        started = time.perf_counter()
        if sequenced:
            conn.execute("SELECT metastore.sequence_feed()")
        rows = conn.execute(READ, (limit, cursor)).fetchall()
        times.append(time.perf_counter() - started)
        assert rows == [], "nothing is ingested while the tail is polled"
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="events in the feed of each layout")
    parser.add_argument("--limit", type=int, default=100, help="events per page")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--polls", type=int, default=200, help="tail polls per round")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "citus-feed.json")
    args = parser.parse_args()

    started = time.monotonic()
    with CitusCluster() as cluster, LocalPostgres(bin_path=cluster.bin) as plain:
        cluster.provision(DB, "metastore_owner", "metastore_service")
        dsns: dict[str, str] = {}
        for label, server in (("plain", plain), ("citus", cluster)):
            localpg.provision(server, DB)
            dsns[label] = server.dsn_for("metastore_service", DB)
            sequential(dsns[label], bodies(args.events, f"feed-{label}"))
        pages: dict[str, list[float]] = {label: [] for label in dsns}
        per_event: dict[str, list[float]] = {label: [] for label in dsns}
        tail: dict[str, list[float]] = {label: [] for label in dsns}
        for r in range(args.rounds):
            for label in list(dsns) if r % 2 == 0 else list(reversed(dsns)):
                with psycopg.connect(dsns[label], autocommit=True) as conn:
                    n_pages, n_events, seconds, end = read_feed(conn, args.limit, label == "citus")
                    assert n_events == args.events, (label, n_events)
                    pages[label].append(seconds / n_pages * 1000)
                    per_event[label].append(seconds / n_events * 1e6)
                    tail[label].append(tail_polls(conn, end, args.limit, label == "citus", args.polls))
                print(f"round {r} {label}: {pages[label][-1]:.2f} ms per page, {tail[label][-1]:.2f} ms per tail poll")

    results: dict[str, Any] = {"layouts": {}}
    for label in dsns:
        results["layouts"][label] = {
            "page_ms_median": round(statistics.median(pages[label]), 2),
            "page_ms_rounds": [round(x, 2) for x in pages[label]],
            "us_per_event_median": round(statistics.median(per_event[label]), 1),
            "tail_poll_ms_median": round(statistics.median(tail[label]), 2),
            "tail_poll_ms_rounds": [round(x, 2) for x in tail[label]],
        }
    layouts = results["layouts"]
    results["citus_over_plain"] = {
        "page": round(layouts["citus"]["page_ms_median"] / layouts["plain"]["page_ms_median"], 2),
        "tail_poll": round(layouts["citus"]["tail_poll_ms_median"] / layouts["plain"]["tail_poll_ms_median"], 2),
    }
    results["setup"] = {
        "command": "python -m bench.citus_feed " + " ".join(f"--{k} {v}" for k, v in vars(args).items() if k != "out"),
        "postgresql": "15 (Debian), the same binaries for both layouts",
        "citus": "13.2.2, a coordinator and 2 workers on the same machine, citus.shard_count 4",
        "events": "bench/run.py's Trino events (3 KB to 250 KB), one ingest_event call each",
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "seconds": round(time.monotonic() - started, 1),
    }
    emit(results, args.out)


if __name__ == "__main__":
    main()
