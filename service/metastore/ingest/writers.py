"""Async mode's queue and its writers (also sync mode's overflow with a spool): events accepted
with a 202 wait in memory, or on disk in the spool, and writers store them in batches.

Writers always progress: a batch that fails as a whole (deadline missed, server error) is split
in two and each half stored on its own; a single event that keeps failing while the database
is otherwise writable is recorded in metastore.rejected_events with the reason (outcome
`unstorable`) instead of being retried forever; when nothing can be written at all (a lock, a
frozen or absent database) writers back off and retry, and /readyz reports them stuck.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from psycopg.rows import class_row

from metastore import metrics
from metastore.config import Config
from metastore.db import Database
from metastore.errors import ApiError
from metastore.ingest import outcome
from metastore.ingest.faults import environmental, halves
from metastore.ingest.outcome import Source, Stored
from metastore.spool import Record, Spool, SpoolDamaged, SpoolFull, Ticket

log = logging.getLogger("metastore.ingest")


@dataclass
class Item:
    request_id: str
    source: Source
    size: int
    body: bytes | None = None  # in memory (no spool), else read back from the spool
    ticket: Ticket | None = None
    enqueued_at: float = field(default_factory=time.monotonic)
    strikes: int = 0
    first_strike: float = 0.0
    stored: bool = False


class EventQueue:
    """FIFO bounded by count, and by bytes held in memory."""

    def __init__(self, max_items: int, max_bytes: int) -> None:
        self.max_items, self.max_bytes = max_items, max_bytes
        self._items: deque[Item] = deque()
        self._bytes = 0  # of bodies held in memory
        self._in_flight: dict[int, Item] = {}
        self._closed = False
        self._changed = asyncio.Condition()

    def __len__(self) -> int:
        return len(self._items) + len(self._in_flight)

    def oldest_age(self) -> float:
        times = [i.enqueued_at for i in self._in_flight.values()]
        if self._items:
            times.append(self._items[0].enqueued_at)
        return time.monotonic() - min(times) if times else 0.0

    def _fits(self, item: Item) -> bool:
        if len(self) >= self.max_items:
            return False
        # One oversized event still fits an empty queue, or it could never be queued.
        return item.body is None or not self._bytes or self._bytes + item.size <= self.max_bytes

    def _gauges(self) -> None:
        metrics.QUEUE_DEPTH.set(len(self))
        metrics.QUEUE_BYTES.set(self._bytes)

    async def put(self, item: Item, wait_s: float = 0, force: bool = False) -> bool:
        async with self._changed:
            if not force and not self._fits(item):
                if wait_s <= 0:
                    return False
                try:
                    await asyncio.wait_for(self._changed.wait_for(lambda: self._fits(item)), wait_s)
                except TimeoutError:
                    return False
            self._items.append(item)
            self._bytes += item.size if item.body is not None else 0
            self._gauges()
            self._changed.notify_all()
            return True

    async def take(self, max_items: int, max_bytes: int) -> list[Item]:
        """Up to max_items and max_bytes (at least one item); waits for one; [] once closed and empty."""
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._items) or self._closed)
            batch: list[Item] = []
            size = 0
            while self._items and len(batch) < max_items and (not batch or size + self._items[0].size <= max_bytes):
                item = self._items.popleft()
                size += item.size
                batch.append(item)
                self._in_flight[id(item)] = item
                self._bytes -= item.size if item.body is not None else 0
            self._gauges()
            self._changed.notify_all()
            return batch

    async def done(self, items: list[Item]) -> None:
        async with self._changed:
            for item in items:
                self._in_flight.pop(id(item), None)
            self._gauges()
            self._changed.notify_all()

    async def close(self) -> None:
        async with self._changed:
            self._closed = True
            self._changed.notify_all()


class _Blame(Exception):
    """A single event failed alone while the database was writable."""

    def __init__(self, item: Item, error: ApiError) -> None:
        super().__init__(error.message)
        self.item, self.error = item, error


class _Blocked(Exception):
    """Nothing could be written: retry later, nobody's fault."""


class Ingest:
    """The queue, its writers and (optionally) the spool."""

    def __init__(self, db: Database, config: Config) -> None:
        self.db, self.writer_pool, self.config = db, db.writer, config
        self.spool = Spool(config.spool_dir, config.spool_max_bytes) if config.spool_dir else None
        self.queue = EventQueue(config.queue_size, config.queue_bytes)
        self._writers: list[asyncio.Task[None]] = []
        self._give_up_at: float | None = None
        self._last_progress = time.monotonic()
        self._commits = 0  # successful writer calls: evidence that the database is writable
        self._adopted: set[asyncio.Future[bool]] = set()

    async def start(self) -> None:
        if self.spool:
            loop = asyncio.get_running_loop()
            records: list[Record] = await loop.run_in_executor(None, self.spool.recover)
            for r in records:
                item = Item(r.request_id, (r.source_kind, r.source_principal), r.ticket.length, ticket=r.ticket)
                await self.queue.put(item, force=True)  # on disk already: the bound is the spool's
        # Plain tasks, not app.add_task: Sanic cancels its own tasks at shutdown, before we drain.
        self._writers = [asyncio.create_task(self._writer()) for _ in range(self.config.writers)]

    def stuck_for(self) -> float:
        """Seconds the writers have stored nothing while events wait (0 when none wait)."""
        return min(time.monotonic() - self._last_progress, self.queue.oldest_age())

    async def enqueue(self, body: bytes, request_id: str, source: Source, wait_s: float = 0) -> bool:
        """Accept the event for the writers (durably first, with a spool). False: no room."""
        return await self.offer(body, request_id, source, wait_s) is None

    async def offer(self, body: bytes, request_id: str, source: Source, wait_s: float) -> str | None:
        """Queues the event (None), or says why not."""
        item = Item(request_id, source, len(body), body=body)
        if self.spool:
            if len(self.queue) >= self.queue.max_items:
                return "the ingest queue is full"
            try:
                append = self.spool.submit(body, request_id, source[0], source[1])
                # Shielded: a record written for a client that left is still queued, not left behind.
                item.ticket = await asyncio.shield(append)
            except SpoolFull as exc:
                metrics.REFUSED.labels("spool_full").inc()
                return str(exc)
            except OSError as exc:  # disk full, volume gone: nothing was acknowledged
                metrics.REFUSED.labels("spool_unwritable").inc()
                return f"the spool cannot write ({exc.strerror or exc})"
            except asyncio.CancelledError:
                append.add_done_callback(lambda done: self._adopt(item, done))
                raise
            item.body = None  # it waits on disk
            await self.queue.put(item, force=True)
            metrics.ACCEPTED.labels("spool").inc()
            return None
        if await self.queue.put(item, wait_s):
            metrics.ACCEPTED.labels("memory").inc()
            return None
        return "the ingest queue is full"

    def _adopt(self, item: Item, append: asyncio.Future[Ticket]) -> None:
        if append.cancelled() or append.exception() is not None:
            return
        item.ticket, item.body = append.result(), None
        task = asyncio.ensure_future(self.queue.put(item, force=True))
        self._adopted.add(task)
        task.add_done_callback(self._adopted.discard)

    async def _writer(self) -> None:
        while True:
            batch = await self.queue.take(self.config.batch_size, self.config.batch_bytes)
            if not batch:
                return
            try:
                await self._store(batch)
            except Exception:  # a bug: a writer that died silently would leave its events unstored
                log.exception("writer failed; its %d events are queued again", len(batch))
                await asyncio.sleep(1.0)
                for item in batch:
                    if not item.stored:
                        await self.queue.put(_requeue(item), force=True)
            finally:
                await self.queue.done(batch)

    async def _bodies(self, items: list[Item]) -> tuple[list[Item], list[bytes]]:
        """The items whose bodies could be read, and those bodies. An item whose spool record is
        damaged cannot be stored: its bytes go to quarantine and it is released."""
        if self.spool is None:
            return items, [i.body or b"" for i in items]
        spool = self.spool

        def read() -> tuple[list[Item], list[bytes]]:
            kept, bodies = [], []
            for item in items:
                try:
                    bodies.append(_body(spool, item))
                except SpoolDamaged as exc:
                    assert item.ticket is not None
                    item.stored = True  # nothing left to store
                    spool.set_aside(item.ticket, item.request_id, str(exc))
                    continue
                kept.append(item)
            return kept, bodies

        return await asyncio.get_running_loop().run_in_executor(None, read)

    async def _store(self, batch: list[Item]) -> None:
        """Store the batch, whatever it takes: split, set aside what cannot be stored, or retry."""
        pending = batch
        delay = 0.1
        while pending:
            try:
                await self._store_some(pending)
                pending = []
            except _Blame as blame:
                pending = [i for i in pending if i is not blame.item and not i.stored]
                await self._strike(blame.item, blame.error)
            except _Blocked as exc:
                pending = [i for i in pending if not i.stored]
                if self._give_up_at is not None and time.monotonic() > self._give_up_at:
                    self._lose(len(pending), str(exc))
                    return
                metrics.WRITER_RETRIES.inc()
                log.warning("writer will retry %d events in %.1f s: %s", len(pending), delay, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.1

    async def _store_some(self, items: list[Item]) -> None:
        """Stores items (grouped by source); raises _Blame for one event to blame, _Blocked otherwise."""
        groups: dict[Source, list[Item]] = {}
        for item in items:
            if not item.stored:
                groups.setdefault(item.source, []).append(item)
        for source, group in groups.items():
            await self._store_group(source, group)

    async def _store_group(self, source: Source, items: list[Item]) -> None:
        items, bodies = await self._bodies(items)
        if not items:
            return
        params: dict[str, Any] = {"bodies": bodies, "source_kind": source[0], "source_principal": source[1]}
        try:
            rows = await self.writer_pool.call("ingest_events", params, fetch_all=True, row=class_row(Stored))
        except ApiError as exc:
            if environmental(exc) or not await self._writable():
                raise _Blocked(exc.message) from None
            if len(items) == 1:
                raise _Blame(items[0], exc) from None
            # Deadline missed or a server error, with the database writable: halve and try each half.
            metrics.WRITER_SPLITS.inc()
            for part in halves(items):
                await self._store_group(source, part)
            return
        self._committed(items)
        for item, result in zip(items, rows, strict=True):
            outcome.record(result)
            if result.status == "rejected":
                log.warning(
                    "queued event rejected (request %s): %s %s",
                    item.request_id,
                    result.error_code,
                    result.error_message,
                )

    async def _writable(self) -> bool:
        """Can events be written right now (no lock held against writers, database answering)?"""
        try:
            (ok,) = await self.writer_pool.one("write_probe", {}, deadline_s=2.0)
        except ApiError:
            return False
        return bool(ok)

    def _committed(self, items: list[Item]) -> None:
        for item in items:
            item.stored = True
        if self.spool:
            self.spool.release([i.ticket for i in items if i.ticket is not None])
        self._commits += 1
        self._last_progress = time.monotonic()

    async def _strike(self, item: Item, error: ApiError) -> None:
        # Three failures alone, at least twice the writers' deadline apart end to end, while the
        # database was writable: this event is the problem. Keep its diagnosis, not the retries.
        now = time.monotonic()
        if item.strikes == 0:
            item.first_strike = now
        item.strikes += 1
        span = now - item.first_strike
        if item.strikes < 3 or span < 2 * self.writer_pool.deadline_s:
            log.warning(
                "event of request %s failed alone (%d): %s %s", item.request_id, item.strikes, error.code, error.message
            )
            await asyncio.sleep(min(1.0 * item.strikes, 5.0))
            await self.queue.put(_requeue(item), force=True)
            return
        kept, bodies = await self._bodies([item])
        if not kept:
            return
        body = bodies[0]
        reason = (
            f"accepted, then not storable after {item.strikes} attempts: {error.code or ''} {error.message}".strip()
        )
        try:
            await self.writer_pool.call(
                "reject_event",
                {
                    "body": body,
                    "sqlstate": error.code or "XX000",
                    "reason": reason,
                    "source_kind": item.source[0],
                    "source_principal": item.source[1],
                },
            )
        except ApiError as exc:
            log.error("could not record unstorable event of request %s: %s", item.request_id, exc.message)
            await self.queue.put(_requeue(item), force=True)
            return
        self._committed([item])
        outcome.unstorable(error.code)
        log.error("event of request %s set aside in rejected_events: %s", item.request_id, reason)

    def _lose(self, count: int, why: str) -> None:
        # Without a spool, accepted events that shutdown could not store are gone: counted and logged.
        if self.spool:
            log.warning("shutdown: %d accepted events stay in the spool for the next start", count)
            return
        metrics.QUEUE_LOST.inc(count)
        log.error("shutdown: %d accepted events could not be stored in time and are lost: %s", count, why)

    async def drain(self, timeout_s: float) -> None:
        """Store everything queued, for at most timeout_s; then stop the writers."""
        self._give_up_at = time.monotonic() + timeout_s
        pending = len(self.queue)
        await self.queue.close()
        not_done: set[asyncio.Task[None]] = set()
        if self._writers:
            _, not_done = await asyncio.wait(self._writers, timeout=max(timeout_s, 0.1))
        # Writers that gave up counted their own; what is left is queued or in a stuck writer's hands.
        left = len(self.queue)
        for task in not_done:
            task.cancel()
        if left:
            self._lose(left, "shutdown ran out of time")
        else:
            log.info("shutdown: queue drained (%d events)", pending)
        if self.spool:
            self.spool.close()


def _body(spool: Spool, item: Item) -> bytes:
    if item.body is not None:
        return item.body
    assert item.ticket is not None
    return spool.read(item.ticket)


def _requeue(item: Item) -> Item:
    # A fresh identity: the failed one is still counted in flight until its batch is done.
    copy = Item(item.request_id, item.source, item.size, item.body, item.ticket, item.enqueued_at)
    copy.strikes, copy.first_strike = item.strikes, item.first_strike
    return copy
