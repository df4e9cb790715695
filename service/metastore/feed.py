"""GET /api/v1/events: the stored events, as sent, in the feed's order (metastore.read_events).

JSON pages for browsing; NDJSON (Accept: application/x-ndjson) for bulk reads: the stream is
fetched page by page, each page one short statement under the usual deadline. Events are passed
through as PostgreSQL rendered them: Python never parses them.

What a response may hold, and for how long:
- A page of metastore.read_events is at most PAGE_BYTES of text, unless it is one larger event.
  Before a page is read, room for it is taken from one budget that all responses share
  (METASTORE_FEED_BUFFER_BYTES); an event larger than the room taken comes without its text, and
  is read again once there is room for its size. The room is given back once the page has been
  taken by the reader (the transport's buffer back under its low-water mark), except what the
  kernel's send buffer may still hold of the response (KERNEL_HOLD, at most what it wrote), which
  is kept until the response ends.
- The next page is read only then (back-pressure): a reader that stops reading holds one page.
- The whole response has a deadline (METASTORE_FEED_DEADLINE_S). A stream at its deadline between
  pages ends with an error line holding the cursor to resume from; a response still being written
  at its deadline has its connection aborted, which frees what it held at once.
"""

from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import fcntl
import json
import logging
import socket
import termios
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sanic import Request, Sanic

from metastore.arguments import FILTERS
from metastore.config import Config
from metastore.db import Pool
from metastore.errors import ApiError, whole_number

log = logging.getLogger("metastore.feed")

NDJSON = "application/x-ndjson"
# Events per page of a stream (a page is also cut at PAGE_BYTES).
STREAM_PAGE = 200
# metastore.read_events cuts its pages at 1 MiB of text (db/functions/120_read_events.sql), unless
# the page is one larger event: the store accepts none over 16 MiB (035_validate_event.sql).
PAGE_BYTES = 1 << 20
MAX_EVENT_BYTES = 16 << 20
# Commas, newlines and the JSON page's envelope, beyond the events' own bytes.
OVERHEAD = 4096
# Bytes handed to the transport at once. Sanic waits for the transport to drain under its low-water
# mark before each write, so a connection buffers at most one slice beyond its high-water mark.
SLICE = 64 << 10
# The kernel's send buffer of a feed response's connection (Linux doubles it): left to itself it
# grows to 4 MiB (tcp_wmem) for a reader that stops reading, memory the pod is charged for.
KERNEL_SEND_BUFFER = 256 << 10
# What that buffer may hold of a response once Linux has doubled it: bytes handed to the kernel and
# not yet acknowledged by the reader. A response keeps that much of its pages' room in the budget
# (no more than it wrote) until it ends, so that the budget bounds the kernel's copies too.
KERNEL_HOLD = 2 * KERNEL_SEND_BUFFER


class Sequencer:
    """Runs a pass of the feed's sequencer (metastore.sequence_feed) before each page, in a
    transaction of its own: on Citus the feed reads only what a pass has numbered, so an event
    reaches a reader at its first read after the event is visible, unless another reader's pass
    holds the sequencer for longer than the pass waits (docs/events.md, "On Citus").
    On one server the function answers NULL and is asked again only after RECHECK_S."""

    RECHECK_S = 60.0

    def __init__(self, db: Pool) -> None:
        self.db = db
        self.skip_until = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() < self.skip_until:
            return
        row = await self.db.one("sequence_feed", {})
        if row.moved is None:
            self.skip_until = loop.time() + self.RECHECK_S


class Budget:
    """Bytes of pages read from the database and not yet taken by their readers, all responses
    together. Waiters are served in order; a page larger than the whole budget is let in when
    nothing else is held (an event stored before the store refused such events)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: collections.deque[tuple[int, int, asyncio.Future[int]]] = collections.deque()

    def _fits(self, n: int) -> bool:
        return self.used + min(n, self.limit) <= self.limit

    def _grab(self, n: int, up_to: int) -> int:
        got = max(n, min(up_to, self.limit - self.used))
        self.used += got
        return got

    async def take(self, n: int, timeout: float, up_to: int = 0) -> int:
        """n bytes, or as many more as are free up to up_to; 0 when n did not fit within timeout."""
        if not self._waiters and self._fits(n):
            return self._grab(n, up_to)
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        entry = (n, up_to, waiter)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(max(timeout, 0)):
                return await waiter
        except TimeoutError:
            # Granted as the timeout fired: kept.
            return waiter.result() if waiter.done() and not waiter.cancelled() else 0
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)
                self._grant()

    def give(self, n: int) -> None:
        self.used -= n
        self._grant()

    def _grant(self) -> None:
        while self._waiters:
            n, up_to, waiter = self._waiters[0]
            if waiter.done():
                self._waiters.popleft()
            elif self._fits(n):
                self._waiters.popleft()
                waiter.set_result(self._grab(n, up_to))
            else:
                return


@dataclass
class Page:
    events: list[bytes]
    cursor: str | None  # of the last event, or the one the page was read after
    more: bool
    held: int  # bytes of the budget it holds


class Cut(Exception):
    """The response passed its deadline while being written, or its reader went away."""


def _arg(request: Request, name: str) -> str | None:
    values: list[str] = request.args.getlist(name)
    if len(values) > 1:
        raise ApiError(400, f"query parameter {name!r} is given more than once")
    if values and "\x00" in values[0]:
        raise ApiError(400, f"query parameter {name!r} holds a NUL character, which text cannot", "22021")
    return values[0] if values else None


def _limit(request: Request, default: int | None) -> int | None:
    value = _arg(request, "limit")
    return default if value is None else whole_number("limit", value)


def wants_ndjson(request: Request) -> bool:
    return any(part.split(";")[0].strip().lower() == NDJSON for part in request.headers.get("accept", "").split(","))


class Feed:
    def __init__(self, db: Pool, config: Config) -> None:
        self.db = db
        self.deadline_s = config.feed_deadline_s
        self.budget = Budget(config.feed_buffer_bytes)
        self.sequencer = Sequencer(db)

    async def page(self, limit: int, cursor: str | None, filters: dict[str, str | None], until: float) -> Page:
        """One page of metastore.read_events, with room for it taken from the budget; raises ApiError
        (the database's, or 503 when no room came within the read budget)."""
        loop = asyncio.get_running_loop()
        await self.sequencer.run()
        need = PAGE_BYTES + OVERHEAD
        for _ in range(3):
            wait = min(self.db.deadline_s, until - loop.time())
            # Room for a page, and for the largest event the store accepts when that much is free:
            # twice, while it is read (libpq's result, then the bytes made from it).
            room = await self.budget.take(2 * need, wait, up_to=2 * (MAX_EVENT_BYTES + OVERHEAD))
            if not room:
                # Closed after the answer: a reader that stopped reading would otherwise keep its
                # connection for the keep-alive timeout.
                raise ApiError(
                    503,
                    "the event feed holds as many bytes for its readers as it may "
                    "(METASTORE_FEED_BUFFER_BYTES); retry later",
                    "53000",
                    retry_after=1,
                    close=True,
                )
            try:
                params = {"limit": limit, "cursor": cursor, "max_bytes": room // 2 - OVERHEAD, **filters}
                rows = await self.db.call("read_events", params, fetch_all=True, binary=True)
            except BaseException:
                self.budget.give(room)
                raise
            if rows and rows[0].event is None:
                # One event larger than the room taken: read it alone once there is room for it.
                self.budget.give(room)
                need, limit = rows[0].bytes + OVERHEAD, 1
                continue
            events = [r.event for r in rows]
            held = sum(len(e) + 2 for e in events) + OVERHEAD
            self.budget.give(room - held)  # negative when a page came larger than the room: taken too
            return Page(events, rows[-1].cursor if rows else cursor, bool(rows and rows[0].more), held)
        raise ApiError(503, "the events after this cursor changed while being read; retry later", retry_after=1)


class Writer:
    """Writes one response within its deadline, a slice at a time."""

    def __init__(self, request: Request, until: float) -> None:
        self.request = request
        self.until = until
        self.response: Any = None

    def left(self) -> float:
        return self.until - asyncio.get_running_loop().time()

    async def start(self, content_type: str, headers: dict[str, str]) -> None:
        sock = self.request.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, KERNEL_SEND_BUFFER)
        self.response = await self.request.respond(content_type=content_type, headers=headers)

    async def write(self, chunks: Iterable[bytes]) -> None:
        """Sends the chunks, then waits until the reader has taken them (the transport's buffer back
        under its low-water mark); raises Cut at the deadline."""
        for piece in _slices(chunks):
            await self._within(self.response.send(piece))
        # Sanic's protocol clears this event while the transport is over its high-water mark.
        drained: asyncio.Event = self.request.protocol._can_write  # type: ignore[attr-defined]
        await self._within(drained.wait())
        if self.request.transport.is_closing():
            raise Cut("the reader went away")

    async def end(self) -> None:
        """Ends the response once the reader's side has acknowledged all of it: a reader that stops
        reading after the last bytes were handed to the kernel is cut at the deadline too."""
        await self._within(self.response.eof())
        await self._within(self._acknowledged())

    async def _acknowledged(self) -> None:
        transport: Any = self.request.transport
        sock = transport.get_extra_info("socket")
        drained: asyncio.Event = self.request.protocol._can_write  # type: ignore[attr-defined]
        await drained.wait()
        if sock is None or not hasattr(termios, "TIOCOUTQ"):
            return
        pause = 0.002
        unsent = array.array("i", [0])
        # Checked before each look: once the transport closes, its descriptor may be another's.
        while not transport.is_closing():
            try:
                fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, unsent)  # bytes not yet acknowledged
            except OSError:
                return
            if unsent[0] == 0:
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)

    async def _within(self, step: Any) -> None:
        try:
            async with asyncio.timeout(max(self.left(), 0)):
                await step
        except TimeoutError:
            raise Cut("deadline") from None

    def abort(self) -> None:
        transport: Any = self.request.transport
        if transport is not None and not transport.is_closing():
            transport.abort()


def _slices(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks' bytes in pieces of SLICE (the last one shorter), copied a slice at a time."""
    buffer = bytearray()
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            take = SLICE - len(buffer)
            buffer += view[:take]
            view = view[take:]
            if len(buffer) == SLICE:
                yield bytes(buffer)
                buffer.clear()
    if buffer:
        yield bytes(buffer)


def _json_page(page: Page) -> list[bytes]:
    """The JSON page around the events' bytes, which are not copied into one."""
    parts = [b'{"events": [']
    for i, event in enumerate(page.events):
        parts += [b", ", event] if i else [event]
    tail = f'], "next_cursor": {json.dumps(page.cursor)}, "has_more": {"true" if page.more else "false"}}}'
    return [*parts, tail.encode()]


def _error_line(status: int, message: str, code: str | None, cursor: str | None) -> bytes:
    error = {"status": status, "message": message, "code": code, "resume_cursor": cursor}
    return (json.dumps({"error": error}) + "\n").encode()


def register(app: Sanic[Any, Any], db: Pool, config: Config) -> None:
    feed = Feed(db, config)

    @app.get("/api/v1/events")
    async def list_events(request: Request) -> None:
        until = asyncio.get_running_loop().time() + feed.deadline_s
        filters = {name: _arg(request, name) for name in FILTERS}
        cursor = _arg(request, "cursor")
        writer = Writer(request, until)
        page: Page | None = None
        done = False
        try:
            if wants_ndjson(request):
                await stream(request, writer, cursor, filters, until)
            else:
                page = await feed.page(_limit(request, 100) or 0, cursor, filters, until)  # 0: refused (22023)
                # Chunked, like the stream: a response cut at its deadline then ends without an error of its own.
                await writer.start("application/json", {})
                await writer.write(_json_page(page))
                await writer.end()  # acknowledged: the kernel holds none of it any more
                feed.budget.give(page.held)
                page = None
            done = True
        except Cut as exc:
            log.info("event feed response cut short: %s", exc)
        finally:
            if page is not None:
                feed.budget.give(page.held)
            if not done and writer.response is not None:
                writer.abort()  # frees what the transport holds now, not after Sanic's close timeout

    async def stream(
        request: Request, writer: Writer, cursor: str | None, filters: dict[str, str | None], until: float
    ) -> None:
        total = _limit(request, None)
        if total is not None and total < 1:
            raise ApiError(400, f"limit must be at least 1, not {total}", "22023")
        size = STREAM_PAGE if total is None else min(STREAM_PAGE, total)
        # The first page is read before the response starts, so that a bad cursor or filter is a
        # 4xx with the usual error body rather than a broken stream.
        page = await feed.page(size, cursor, filters, until)
        sent = written = kernel = 0
        try:
            await writer.start(NDJSON, {"Cache-Control": "no-store"})
            while True:
                await writer.write(_lines(page.events))
                # Of the page's room, what the kernel may still hold of the response is kept.
                written += page.held
                keep = min(written, KERNEL_HOLD) - kernel
                kernel += keep
                feed.budget.give(page.held - keep)
                sent, cursor = sent + len(page.events), page.cursor
                page.held = 0
                if not page.events or not page.more or (total is not None and sent >= total):
                    break
                size = STREAM_PAGE if total is None else min(STREAM_PAGE, total - sent)
                error = None
                if writer.left() <= feed.db.deadline_s:
                    error = _error_line(
                        503,
                        f"the response reached its deadline ({feed.deadline_s} s): resume from resume_cursor",
                        None,
                        cursor,
                    )
                else:
                    try:
                        page = await feed.page(size, cursor, filters, until)
                    except ApiError as exc:
                        # The status is sent already: the last line says why the stream stops and
                        # where to resume (the cursor of the last event sent).
                        log.warning("event stream cut short after %d events: %s %s", sent, exc.code, exc.message)
                        error = _error_line(exc.status, exc.message, exc.code, cursor)
                if error is not None:
                    await writer.write([error])
                    break
            await writer.end()
        finally:
            # After the reader acknowledged all of it, or just before its connection is aborted.
            feed.budget.give(page.held + kernel)


def _lines(events: list[bytes]) -> Iterator[bytes]:
    for event in events:
        yield event
        yield b"\n"
