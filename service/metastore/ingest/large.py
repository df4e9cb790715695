"""Sync mode's lane for large events: stored alone, in turn, on connections of their own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from psycopg.rows import AsyncRowFactory, class_row, namedtuple_row

from metastore import metrics
from metastore.db import Pool
from metastore.errors import ApiError
from metastore.ingest.group import pinned
from metastore.ingest.outcome import Source, Stored
from metastore.limits import Reservation


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
