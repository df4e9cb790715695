"""Storing events: synchronously, or (async mode) through a bounded in-memory queue that
writers drain into PostgreSQL in batches.

What async mode can lose: events it answered 202 for and had not yet committed when the
process died without a graceful shutdown (SIGKILL, OOM kill, node loss), at most the
queue's bounds. On SIGTERM the queue is drained before the process exits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from metastore import metrics
from metastore.config import Config
from metastore.db import Database
from metastore.errors import ApiError

log = logging.getLogger("metastore.ingest")

# Where an event comes from: (source_kind, source_principal), from metastore.provenance.
Source = tuple[str, str | None]
UNAUTHENTICATED: Source = ("unauthenticated", None)


@dataclass(frozen=True)
class Stored:
    status: str  # stored | duplicate | rejected
    event_id: int | None
    error_code: str | None
    error_message: str | None
    event_type: str | None


def _record(result: Stored) -> None:
    if result.status == "rejected":
        metrics.count_event("rejected", result.error_code, result.event_type)
    else:
        metrics.count_event(result.status, None, result.event_type)


async def store_now(db: Database, body: bytes, source: Source = UNAUTHENTICATED) -> Stored:
    row = await db.one("ingest_event", {"body": body, "source_kind": source[0], "source_principal": source[1]})
    result = Stored(*row)
    _record(result)
    return result


@dataclass(frozen=True)
class _Item:
    body: bytes
    request_id: str
    source: Source = UNAUTHENTICATED


class EventQueue:
    """FIFO bounded by count and by bytes."""

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.max_items, self.max_bytes = max_items, max_bytes
        self._items: deque[_Item] = deque()
        self._bytes = 0
        self._in_flight = 0
        self._closed = False
        self._changed = asyncio.Condition()

    def __len__(self) -> int:
        return len(self._items) + self._in_flight

    def _fits(self, size: int) -> bool:
        # One oversized event still fits an empty queue, or it could never be queued.
        return len(self._items) < self.max_items and (not self._items or self._bytes + size <= self.max_bytes)

    def _gauges(self) -> None:
        metrics.QUEUE_DEPTH.set(len(self))
        metrics.QUEUE_BYTES.set(self._bytes)

    async def put(self, item: _Item, wait_s: float) -> bool:
        async with self._changed:
            if not self._fits(len(item.body)):
                if wait_s <= 0:
                    return False
                try:
                    await asyncio.wait_for(self._changed.wait_for(lambda: self._fits(len(item.body))), wait_s)
                except TimeoutError:
                    return False
            self._items.append(item)
            self._bytes += len(item.body)
            self._gauges()
            self._changed.notify_all()
            return True

    async def take(self, n: int) -> list[_Item]:
        """Up to n items; waits for one; [] once closed and empty."""
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._items) or self._closed)
            batch = [self._items.popleft() for _ in range(min(n, len(self._items)))]
            self._bytes -= sum(len(i.body) for i in batch)
            self._in_flight += len(batch)
            self._gauges()
            self._changed.notify_all()
            return batch

    async def done(self, n: int) -> None:
        async with self._changed:
            self._in_flight -= n
            self._gauges()
            self._changed.notify_all()

    async def close(self) -> None:
        async with self._changed:
            self._closed = True
            self._changed.notify_all()


class AsyncIngest:
    def __init__(self, db: Database, config: Config) -> None:
        self.db, self.config = db, config
        self.queue = EventQueue(config.queue_size, config.queue_bytes)
        self._writers: list[asyncio.Task[None]] = []
        self._give_up_at: float | None = None

    def start(self) -> None:
        # Plain tasks, not app.add_task: Sanic cancels its own tasks at shutdown, before we drain.
        self._writers = [asyncio.create_task(self._writer(i)) for i in range(self.config.writers)]

    async def submit(self, body: bytes, request_id: str, source: Source = UNAUTHENTICATED) -> Stored | None:
        """Queue the event (None), or store it at once when the queue is full and configured so."""
        wait_s = self.config.queue_wait_ms / 1000 if self.config.queue_full == "wait" else 0
        if await self.queue.put(_Item(body, request_id, source), wait_s):
            return None
        if self.config.queue_full == "sync":
            metrics.QUEUE_FULL.labels("sync").inc()
            return await store_now(self.db, body, source)
        metrics.QUEUE_FULL.labels("rejected").inc()
        raise ApiError(503, "the ingest queue is full; retry later")

    async def _writer(self, number: int) -> None:
        while True:
            batch = await self.queue.take(self.config.batch_size)
            if not batch:
                return
            try:
                # One source per call of ingest_events: store runs of items from the same sender.
                start = 0
                for end in range(1, len(batch) + 1):
                    if end == len(batch) or batch[end].source != batch[start].source:
                        await self._store(batch[start:end])
                        start = end
            finally:
                await self.queue.done(len(batch))

    async def _store(self, batch: list[_Item]) -> None:
        params: dict[str, Any] = {
            "bodies": [i.body for i in batch],
            "source_kind": batch[0].source[0],
            "source_principal": batch[0].source[1],
        }
        delay = 0.1
        while True:
            try:
                rows = await self.db.call("ingest_events", params, fetch_all=True)
                break
            except ApiError as exc:
                if exc.status < 500 or (self._give_up_at is not None and time.monotonic() > self._give_up_at):
                    # Not retriable, or shutdown's time is up: these accepted events are lost.
                    metrics.QUEUE_LOST.inc(len(batch))
                    log.error("async writer dropped %d accepted events: %s", len(batch), exc.message)
                    return
                metrics.WRITER_RETRIES.inc()
                log.warning("async writer will retry %d events in %.1f s: %s", len(batch), delay, exc.message)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        for item, row in zip(batch, rows, strict=True):
            result = Stored(*row)
            _record(result)
            if result.status == "rejected":
                log.warning(
                    "async event rejected (request %s): %s %s", item.request_id, result.error_code, result.error_message
                )

    async def drain(self, timeout_s: float) -> None:
        """Store everything queued, for at most timeout_s; then stop the writers."""
        self._give_up_at = time.monotonic() + timeout_s
        pending = len(self.queue)
        await self.queue.close()
        not_done: set[asyncio.Task[None]] = set()
        if self._writers:
            _, not_done = await asyncio.wait(self._writers, timeout=max(timeout_s, 0.1))
        left = len(self.queue)
        for task in not_done:
            task.cancel()
        if left:
            metrics.QUEUE_LOST.inc(left)
            log.error("shutdown: %d accepted events could not be stored in time and are lost", left)
        else:
            log.info("shutdown: async queue drained (%d events)", pending)
