"""Storing events: at once (sync), or through a queue that writers drain into PostgreSQL in
batches (async mode; and sync mode's overflow when the database misses the ingest budget and a
spool is configured).

Queued events wait in memory, or, with a spool, on disk (fsynced before the 202; only a
reference stays in memory). What can be lost: without a spool, what was queued when the process
died without a graceful shutdown (SIGKILL, OOM kill, node loss), at most the queue's bounds;
with a spool, nothing acknowledged unless the spool's volume is lost.

Writers always progress: a batch that fails as a whole (deadline missed, server error) is split
in two and each half stored on its own; a single event that keeps failing while the database
is otherwise writable is recorded in metastore.rejected_events with the reason (outcome
`unstorable`) instead of being retried forever; when nothing can be written at all (a lock, a
frozen or absent database) writers back off and retry, and /readyz reports them stuck.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg.rows import AsyncRowFactory, class_row, namedtuple_row

from metastore import metrics
from metastore.config import Config
from metastore.db import Database, Pool
from metastore.errors import ApiError
from metastore.limits import ByteBudget, Reservation
from metastore.spool import Record, Spool, SpoolDamaged, SpoolFull, Ticket

log = logging.getLogger("metastore.ingest")

# (source_kind, source_principal): how the sender is known.
Source = tuple[str, str | None]
UNAUTHENTICATED: Source = ("unauthenticated", None)

# Failures that say the database cannot write at all now, not that one event is to blame.
_ENVIRONMENT = ("08", "53", "55", "57P", "40")


@dataclass(frozen=True)
class Stored:
    status: str  # stored | duplicate | rejected
    event_id: int | None
    error_code: str | None
    error_message: str | None
    event_type: str | None


def record(result: Stored) -> None:
    if result.status == "rejected":
        metrics.count_event("rejected", result.error_code, result.event_type)
    else:
        metrics.count_event(result.status, None, result.event_type)


async def store_now(
    pool: Pool,
    body: bytes,
    source: Source,
    deadline_s: float | None = None,
    reservation: Reservation | None = None,
) -> Stored:
    """One event, one call. The reservation that counts the body stays held until the call has
    really ended (a call past its deadline holds the body until PostgreSQL has cancelled it)."""
    params = {"body": body, "source_kind": source[0], "source_principal": source[1]}
    result: Stored = await pool.one(
        "ingest_event", params, deadline_s=deadline_s, row=class_row(Stored), on_done=pinned([reservation])
    )
    record(result)
    return result


def pinned(reservations: list[Reservation | None], then: Callable[[], None] | None = None) -> Callable[[], None]:
    """Pins the reservations now; the callable returned unpins them (and runs `then`), once."""
    held = [r for r in reservations if r is not None]
    for r in held:
        r.pin()

    def done() -> None:
        for r in held:
            r.unpin()
        if then is not None:
            then()

    return done


@dataclass(eq=False)
class _Waiter:
    body: bytes
    source: Source
    until: float  # loop time: after it, nobody waits for this answer
    answer: asyncio.Future[Stored]
    reservation: Reservation | None
    # The request's context (request id in logs, trace): its group's call runs in the first member's.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)


class GroupCommit:
    """Sync mode: concurrent POSTs share one transaction and one commit (metastore.ingest_events).

    A request that finds fewer than max_calls calls in flight is sent at once, with whatever arrived
    in the same turn of the event loop: nothing waits to gather. Requests arriving while max_calls
    calls are in flight form the next group (at most max_events events and max_bytes bytes, one
    source), sent when one returns.
    Each request waits for its answer until its own deadline, counted from its arrival; a group's
    call runs until the latest deadline of its members. A call that fails as a whole for a reason
    that may be one event's (not a lock, timeout or connection: those are everyone's) is split in
    two and each half sent again, so that an event that fails, fails alone.

    Memory: each member's body stays counted in the in-flight budget until the call that carries it
    has really ended, and a group's array of bodies (psycopg joins them into one parameter) is
    counted too, from `budget`: a group that cannot have it is sent smaller."""

    def __init__(
        self, pool: Pool, max_events: int, max_bytes: int, max_calls: int = 1, budget: ByteBudget | None = None
    ) -> None:
        self.pool, self.max_events, self.max_bytes, self.max_calls = pool, max_events, max_bytes, max_calls
        self.budget = budget
        self._active_at = float("-inf")  # loop time of the last event given to store()
        self._waiting: deque[_Waiter] = deque()
        # Calls in flight. Counted by hand, not by the task's done-callback: that runs a turn later,
        # and a request arriving in between would find no sender to send it.
        self._sending = 0
        self._senders: set[asyncio.Task[None]] = set()

    def active(self, within_s: float = 1.0) -> bool:
        """Were events given to store() in the last within_s seconds, or are calls in flight?"""
        return self._sending > 0 or asyncio.get_running_loop().time() - self._active_at < within_s

    async def store(
        self, body: bytes, source: Source, deadline_s: float, reservation: Reservation | None = None
    ) -> Stored:
        self._active_at = asyncio.get_running_loop().time()
        if self.max_events <= 1:
            return await store_now(self.pool, body, source, deadline_s, reservation)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(body, source, loop.time() + deadline_s, loop.create_future(), reservation)
        self._waiting.append(waiter)
        if self._sending < self.max_calls:
            self._sending += 1
            task = loop.create_task(self._send())
            self._senders.add(task)
            task.add_done_callback(self._senders.discard)
        try:
            # On timeout (or the request's cancellation) the answer is cancelled: the waiter is
            # dropped if not sent yet, and its result, if it comes, is not counted.
            result = await asyncio.wait_for(waiter.answer, deadline_s)
        except TimeoutError:
            raise ApiError(
                503, f"the database did not answer within {deadline_s:.1f} s; retry later", "57014"
            ) from None
        record(result)
        return result

    async def _send(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while group := self._take():
                try:
                    commit = self._commit(group, self._array(group))
                    await loop.create_task(commit, context=group[0].context)
                except Exception as exc:  # a bug, not the database: answer now, not at the deadline
                    log.exception("group commit failed")
                    for w in group:
                        if not w.answer.done():
                            w.answer.set_exception(exc)
        finally:
            self._sending -= 1

    def _take(self) -> list[_Waiter]:
        now = asyncio.get_running_loop().time()
        group: list[_Waiter] = []
        size = 0
        while self._waiting and len(group) < self.max_events:
            waiter = self._waiting[0]
            if waiter.answer.done() or waiter.until <= now:
                self._waiting.popleft()  # nobody waits for it any more
                continue
            if group and (waiter.source != group[0].source or size + len(waiter.body) > self.max_bytes):
                break
            group.append(self._waiting.popleft())
            size += len(waiter.body)
        return group

    def _array(self, group: list[_Waiter]) -> int:
        """Takes the budget for the group's array of bodies (0: a group of one needs none). Members
        for which there is no room go back to the head of the queue, for the next group."""
        if self.budget is None or len(group) < 2:
            return 0
        size = sum(len(w.body) for w in group)
        while len(group) > 1 and not self.budget.take(size):
            back = group.pop()
            size -= len(back.body)
            self._waiting.appendleft(back)
        return size if len(group) > 1 else 0

    async def _commit(self, group: list[_Waiter], array_bytes: int) -> None:
        budget = self.budget

        def give_array() -> None:
            if array_bytes and budget is not None:
                budget.give(array_bytes)

        group = [w for w in group if not w.answer.done()]
        if not group:
            give_array()
            return
        source = group[0].source
        deadline = max(w.until for w in group) - asyncio.get_running_loop().time()
        metrics.GROUP_SIZE.observe(len(group))
        params: dict[str, Any] = {"source_kind": source[0], "source_principal": source[1]}
        # The bodies (and the array) are held until the call has ended, even past its deadline.
        done = pinned([w.reservation for w in group], give_array)
        try:
            if len(group) == 1:  # alone: the single-event path
                params["body"] = group[0].body
                rows = await self.pool.call(
                    "ingest_event", params, deadline_s=deadline, row=class_row(Stored), on_done=done
                )
            else:
                params["bodies"] = [w.body for w in group]
                rows = await self.pool.call(
                    "ingest_events", params, deadline_s=deadline, fetch_all=True, row=class_row(Stored), on_done=done
                )
        except ApiError as exc:
            if len(group) > 1 and _one_to_blame(exc):
                metrics.GROUP_SPLITS.inc()
                half = len(group) // 2
                for part in (group[:half], group[half:]):
                    size = sum(len(w.body) for w in part) if len(part) > 1 and self.budget else 0
                    if size and not self.budget.take(size):  # type: ignore[union-attr]
                        for w in part:  # no room for an array: one by one
                            await self._commit([w], 0)
                    else:
                        await self._commit(part, size)
                return
            for w in group:
                if not w.answer.done():
                    w.answer.set_exception(ApiError(exc.status, exc.message, exc.code))
            return
        for w, row in zip(group, rows, strict=True):
            if not w.answer.done():
                w.answer.set_result(row)


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


class Breaker:
    """Stops sync requests from each waiting out the budget while the store is in trouble, and
    only then: one event's cost never opens it.

    A failure counts when the database answered no ingest call between the request's start and
    its failure (it answers nobody: down, frozen, locked, out of connections), never when a large
    event missed its deadline (its own cost, paid in its own lane: LargeLane). After `threshold`
    such failures in a row it opens for `cooldown_s`: requests then skip the database (spooled, or
    a 503 at once) except one probe at a time. Any answer of the database (an event stored, or
    refused for its content) closes it. So a burst of queries meets a broken database in
    milliseconds, not budget after budget queued behind Trino's five connections, and two senders
    of events that can never be stored in time cannot make it refuse everyone else."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 1.0) -> None:
        self.threshold, self.cooldown_s = threshold, cooldown_s
        self._failures = 0
        self._open_until = 0.0
        self._probing = False
        self._answered_at = float("-inf")  # time.monotonic() of the database's last answer

    def allow(self) -> bool:
        """May this request try the database? (Report its outcome: answered, failed or abandon.)"""
        if self._failures < self.threshold:
            return True
        if time.monotonic() >= self._open_until and not self._probing:
            self._probing = True  # half-open: this one request finds out
            return True
        return False

    def refusing(self) -> bool:
        """Would allow() refuse now? Asks without taking the probe."""
        return self._failures >= self.threshold and (self._probing or time.monotonic() < self._open_until)

    def abandon(self) -> None:
        """The request that was let through ended without an outcome (its client left): another
        may probe. Without this, a probe cancelled mid-call kept the breaker open for good."""
        self._probing = False

    def answered(self) -> None:
        """The database answered: the event was stored, or refused for what it holds."""
        self._answered_at = time.monotonic()
        self._probing = False
        if self._failures:
            self._failures = 0
            metrics.BREAKER_OPEN.set(0)

    def answered_since(self, started: float) -> bool:
        """Did the database answer any ingest call since `started` (time.monotonic())?"""
        return self._answered_at >= started

    def failed(self, started: float, error: ApiError, large: bool = False) -> None:
        """A request that began at `started` (time.monotonic()) failed with a 5xx."""
        self._probing = False
        if large and error.code == "57014":
            return  # the event's own cost: it was alone in its lane
        if self._answered_at >= started:
            return  # others were answered meanwhile: not the store's trouble
        self._failures += 1
        if self._failures >= self.threshold:
            self._open_until = time.monotonic() + self.cooldown_s
            metrics.BREAKER_OPEN.set(1)


class LargeLane:
    """Sync mode: events over METASTORE_LARGE_EVENT_BYTES. Each is stored alone (in a group, its
    cost would be every member's wait), in turn, at most `calls` at once, on a pool of their own.
    A turn is held until the call has really ended: a call past its deadline keeps its turn until
    PostgreSQL has cancelled it, so that however many large events arrive and whatever they cost
    the database, they hold `calls` of its backends and none of the other events' connections.

    And while other events are being stored, large ones get at most `share` of the lane's time:
    after a call of t seconds the lane rests t x (1/share - 1). A large event whose turn cannot
    come within its budget waits out the budget (a sender posting again at once is slowed to the
    lane's pace, not spun) and is answered 503, 57014. With no other events, no rest."""

    def __init__(
        self, pool: Pool, calls: int, share: float = 1.0, others_busy: Callable[[], bool] | None = None
    ) -> None:
        self.pool, self.share = pool, share
        self.others_busy = others_busy or (lambda: False)
        self._turns = asyncio.Semaphore(calls)
        self._rest_until = 0.0  # loop time

    async def store(
        self, body: bytes, source: Source, deadline_s: float, reservation: Reservation | None = None
    ) -> Stored:
        params = {"body": body, "source_kind": source[0], "source_principal": source[1]}
        result: Stored = await self.call("ingest_event", params, deadline_s, reservation, class_row(Stored))
        record(result)
        return result

    async def call(
        self,
        query: str,
        params: dict[str, Any],
        deadline_s: float,
        reservation: Reservation | None,
        row: AsyncRowFactory[Any] = namedtuple_row,
    ) -> Any:
        """The query's one row, once it is this call's turn, all within deadline_s."""
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline_s
        metrics.LARGE_WAITING.inc()
        try:
            await asyncio.wait_for(self._turns.acquire(), deadline_s)
            try:
                await self._rest(until, deadline_s)
            except BaseException:
                self._turns.release()
                raise
        except TimeoutError:
            raise ApiError(
                503, f"large events ahead of this one used its {deadline_s:.1f} s budget; retry later", "57014"
            ) from None
        finally:
            metrics.LARGE_WAITING.dec()
        began = loop.time()

        def ended() -> None:
            cost = loop.time() - began
            if self.share < 1 and self.others_busy():
                self._rest_until = max(self._rest_until, loop.time() + cost * (1 / self.share - 1))
            self._turns.release()

        return await self.pool.one(
            query, params, deadline_s=max(until - loop.time(), 0.001), row=row, on_done=pinned([reservation], ended)
        )

    async def admit(self, deadline_s: float) -> None:
        """Before a large body is read: when the lane rests past deadline_s, wait the deadline out
        (its sender, posting again at once, is slowed to the lane's pace, its body unread) and
        refuse, closing the connection."""
        loop = asyncio.get_running_loop()
        if self._rest_until - loop.time() <= deadline_s:
            return
        await asyncio.sleep(deadline_s)
        metrics.DEADLINE_MISSED.labels("large").inc()
        raise ApiError(503, self._resting(deadline_s), "57014", close=True)

    def _resting(self, deadline_s: float) -> str:
        return (
            f"large events may use {self.share:.0%} of the database's time while other events are stored, and "
            f"this one's turn comes after its {deadline_s:.1f} s budget; retry later"
        )

    async def _rest(self, until: float, deadline_s: float) -> None:
        loop = asyncio.get_running_loop()
        rest = self._rest_until - loop.time()
        if rest <= 0:
            return
        if loop.time() + rest <= until:
            await asyncio.sleep(rest)
            return
        await asyncio.sleep(max(until - loop.time(), 0))
        raise ApiError(503, self._resting(deadline_s), "57014")


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
        return await self._offer(body, request_id, source, wait_s) is None

    async def _offer(self, body: bytes, request_id: str, source: Source, wait_s: float) -> str | None:
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

    async def submit(self, body: bytes, request_id: str, source: Source) -> Stored | None:
        """Async mode: queue the event (None), or store it at once when the queue is full and configured so."""
        wait_s = self.config.queue_wait_ms / 1000 if self.config.queue_full == "wait" else 0
        refused = await self._offer(body, request_id, source, wait_s)
        if refused is None:
            return None
        if self.config.queue_full == "sync":
            metrics.QUEUE_FULL.labels("sync").inc()
            return await store_now(self.db.ingest, body, source)
        metrics.QUEUE_FULL.labels("rejected").inc()
        raise ApiError(503, f"{refused}; retry later")

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
            if _environmental(exc) or not await self._writable():
                raise _Blocked(exc.message) from None
            if len(items) == 1:
                raise _Blame(items[0], exc) from None
            # Deadline missed or a server error, with the database writable: halve and try each half.
            metrics.WRITER_SPLITS.inc()
            half = len(items) // 2
            await self._store_group(source, items[:half])
            await self._store_group(source, items[half:])
            return
        self._committed(items)
        for item, result in zip(items, rows, strict=True):
            record(result)
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
        metrics.count_event("unstorable", error.code or "XX000", None)
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


def _one_to_blame(exc: ApiError) -> bool:
    # A whole group's failure that one event may have caused; a lock, a missed deadline, a lost
    # connection or a missing grant is everyone's, and splitting would only repeat it.
    return exc.code is not None and not exc.code.startswith((*_ENVIRONMENT, "57", "42501"))


def _environmental(exc: ApiError) -> bool:
    if exc.code is None:
        return True  # no SQLSTATE: the pool or the connection failed
    # A data error (4xx) of a whole group is some event's: split and set aside, never retried as is.
    return exc.code.startswith((*_ENVIRONMENT, "42501"))
