"""Sync mode's way to the database: one event, one call (store_now), or concurrent requests'
events sharing one call and one commit (GroupCommit)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg.rows import class_row

from metastore import metrics
from metastore.db import Pool
from metastore.errors import ApiError
from metastore.ingest.faults import fault, halves
from metastore.ingest.outcome import Source, Stored
from metastore.limits import ByteBudget, Reservation

log = logging.getLogger("metastore.ingest")


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
            return await asyncio.wait_for(waiter.answer, deadline_s)
        except TimeoutError:
            raise ApiError(
                503, f"the database did not answer within {deadline_s:.1f} s; retry later", "57014"
            ) from None

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
            # A lock, a missed deadline, a lost connection or a missing grant is everyone's:
            # splitting would only repeat it.
            if len(group) > 1 and fault(exc) == "event":
                metrics.GROUP_SPLITS.inc()
                for part in halves(group):
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
