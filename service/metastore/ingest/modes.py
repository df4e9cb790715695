"""The ingest modes: how an event received on POST /api/v1/lineage is stored, decided once at
start from the configuration (build). Each mode has one accept(): a result of the database, or
None when the event was accepted for the writers (202); a refusal is an ApiError."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator

from sanic import Request

from metastore import metrics
from metastore.config import Config
from metastore.db import Database
from metastore.errors import ApiError
from metastore.ingest.breaker import Breaker
from metastore.ingest.group import GroupCommit, store_now
from metastore.ingest.large import LargeLane
from metastore.ingest.outcome import Source, Stored
from metastore.ingest.writers import Ingest
from metastore.limits import ByteBudget, Reservation

log = logging.getLogger("metastore")

# Copies of a body that metastore.spool.Spool.append makes while it writes the record.
_SPOOL_COPIES = 2


class Mode:
    """What every mode has: the large events' lane (large batches take their turn on it in every
    mode) and, in the modes that queue, the queue and its writers (started and drained by ops)."""

    large_lane: LargeLane
    queue: Ingest | None = None

    async def admit(self, request: Request) -> None:
        """Before the body is read: refuse now what could not be taken anyway."""

    async def accept(self, body: bytes, request_id: str, source: Source, reservation: Reservation) -> Stored | None:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def spooling(self, body: bytes, reservation: Reservation) -> AsyncIterator[None]:
        """The spool writes a record built from copies of the body (its header, then the record
        itself): counted while it is written."""
        spooled = self.queue is not None and self.queue.spool is not None
        copies = _SPOOL_COPIES * len(body) if spooled else 0
        reservation.take(copies)
        try:
            yield
        finally:
            reservation.give(copies)


class Sync(Mode):
    """Sync mode without a spool: each event is stored before it is answered (201/200), within the
    ingest budget, or answered 503. Events up to METASTORE_LARGE_EVENT_BYTES share calls and commits
    (GroupCommit); larger ones take their turn alone (LargeLane); all through the breaker."""

    def __init__(self, config: Config, db: Database, budget: ByteBudget) -> None:
        self.config, self.pool = config, db.ingest
        self.breaker = Breaker()
        self.group = GroupCommit(db.ingest, config.group_events, config.group_bytes, config.group_calls, budget)
        share = config.large_event_share_percent / 100
        self.large_lane = LargeLane(db.large, config.large_event_calls, share, self.group.active)

    async def admit(self, request: Request) -> None:
        if self.breaker.refusing():
            metrics.REFUSED.labels("database_failing").inc()
            raise ApiError(503, "the database keeps failing; retry in a second", close=True)
        await self._admit_large(request)

    async def _admit_large(self, request: Request) -> None:
        length = request.headers.get("content-length", "")
        plain = request.headers.get("content-encoding", "identity").strip().lower() == "identity"
        if plain and length.isdigit() and int(length) > self.config.large_event_bytes:
            # A large event's sender posting again at once waits here, its body unread.
            await self.large_lane.admit(self.pool.deadline_s)

    def deadline_s(self, large: bool) -> float:
        return self.pool.deadline_s

    async def accept(self, body: bytes, request_id: str, source: Source, reservation: Reservation) -> Stored | None:
        large = len(body) > self.config.large_event_bytes
        started = time.monotonic()
        try:
            return await self.store(body, source, reservation, large, started)
        except ApiError as failure:
            if failure.status < 500:
                raise
            if large and self.breaker.answered_since(started):
                # The database answered others meanwhile: the time was this event's own cost.
                # It fails alone, and is not handed to the spool (whose writers would spend it
                # again, for a sender that can post them faster than anything stores them).
                # Not in rejected_events either: the client was told 503 and may send it again.
                log.warning(
                    "a large event (%d bytes) was not stored within the ingest budget: answered %d (%s)",
                    len(body),
                    failure.status,
                    failure.code,
                )
                raise
            return await self.overflow(failure, body, request_id, source, reservation)

    async def overflow(
        self, failure: ApiError, body: bytes, request_id: str, source: Source, reservation: Reservation
    ) -> Stored | None:
        """The database did not store the event in time: without a spool, the client is told so."""
        raise failure

    async def store(self, body: bytes, source: Source, reservation: Reservation, large: bool, started: float) -> Stored:
        """Store the event within its budget (a 503 when missed), through the breaker."""
        breaker = self.breaker
        deadline_s = self.deadline_s(large)
        if not breaker.allow():
            metrics.REFUSED.labels("database_failing").inc()
            raise ApiError(503, "the database keeps failing; retry in a second")
        try:
            if large:
                result = await self.large_lane.store(body, source, deadline_s, reservation)
            else:
                result = await self.group.store(body, source, deadline_s, reservation)
        except ApiError as exc:
            if exc.status < 500:
                breaker.answered()
                raise
            breaker.failed(started, exc, large)
            if exc.code == "57014":
                metrics.DEADLINE_MISSED.labels("large" if large else "group").inc()
            raise
        except BaseException:
            breaker.abandon()  # cancelled (the client hung up): no outcome
            raise
        breaker.answered()
        return result


class SyncSpooled(Sync):
    """Sync mode with a spool: as Sync, but an event the database does not commit quickly is not
    waited for: it waits on disk for the writers, and the client gets its 202 now instead of a
    503 and a retry. With the breaker open, requests go straight to the spool."""

    def __init__(self, config: Config, db: Database, budget: ByteBudget, queue: Ingest) -> None:
        super().__init__(config, db, budget)
        self.queue = queue
        self.handoff_s = min(config.spool_handoff_ms, config.ingest_timeout_ms) / 1000

    async def admit(self, request: Request) -> None:
        await self._admit_large(request)  # the breaker open: the spool takes the event

    def deadline_s(self, large: bool) -> float:
        # A commit that is not there quickly is not waited for: the event waits on disk for the
        # writers, and Trino gets its 202 now instead of a 503 and a retry. Not a large one: it
        # has the whole budget, and the spool only when the store is in trouble.
        return self.pool.deadline_s if large else self.handoff_s

    async def overflow(
        self, failure: ApiError, body: bytes, request_id: str, source: Source, reservation: Reservation
    ) -> Stored | None:
        assert self.queue is not None
        async with self.spooling(body, reservation):
            if not await self.queue.enqueue(body, request_id, source):
                raise failure
        log.warning("the database did not commit in time (%s): event spooled for the writers", failure.code)
        return None


class Queued(Mode):
    """Async mode: every event is answered 202 once queued for the writers, in memory or (with a
    spool) on disk; when the queue is full, METASTORE_QUEUE_FULL says what happens: wait a while
    for room, store the event at once (sync), or refuse it (503)."""

    def __init__(self, config: Config, db: Database, queue: Ingest) -> None:
        self.config, self.pool = config, db.ingest
        self.queue: Ingest = queue
        share = config.large_event_share_percent / 100
        self.large_lane = LargeLane(db.large, config.large_event_calls, share)

    async def accept(self, body: bytes, request_id: str, source: Source, reservation: Reservation) -> Stored | None:
        queue, config = self.queue, self.config
        async with self.spooling(body, reservation):
            wait_s = config.queue_wait_ms / 1000 if config.queue_full == "wait" else 0
            refused = await queue.offer(body, request_id, source, wait_s)
            if refused is None:
                return None
            if config.queue_full == "sync":
                metrics.QUEUE_FULL.labels("sync").inc()
                return await store_now(self.pool, body, source)
            metrics.QUEUE_FULL.labels("rejected").inc()
            raise ApiError(503, f"{refused}; retry later")


def build(config: Config, db: Database, budget: ByteBudget) -> Mode:
    """The ingest mode the configuration asks for, built once at start."""
    if config.ingest_mode == "async":
        return Queued(config, db, Ingest(db, config))
    if config.spool_dir is not None:
        return SyncSpooled(config, db, budget, Ingest(db, config))
    return Sync(config, db, budget)
