"""Bounded resources: connections, request bytes held in memory, and time to receive a request.

Whatever clients do, the service's memory stays a function of its settings (docs/operations.md,
"Sizing"): at most METASTORE_MAX_CONNECTIONS connections (one more is answered 503 and closed), at
most METASTORE_MAX_INFLIGHT_BYTES of request bodies held at once, and a request's headers, then its
body, must each arrive within METASTORE_REQUEST_DEADLINE_S in total (Sanic's own timers restart on
every byte, which a slow sender exploits).

The in-flight budget counts what a body costs in memory, not what was sent: bytes as they arrive,
then as they inflate (a 16 KB gzip body of 16 MB counts 16 MB), the moment a body's pieces are
joined (pieces and whole exist together), and a group commit's array of bodies; a request's bytes
are given back when nothing holds them any more, which is when the database call that carries them
ends, not when its client was answered (a call past its deadline still holds its parameters until
PostgreSQL has cancelled it). A request whose next bytes would pass the budget is answered 503 with
Retry-After at once and its connection closed. Inflation runs off the event loop.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto as sslproto
import concurrent.futures
import ctypes
import ctypes.util
import logging
import ssl
import threading
import time
import zlib
from typing import Any, ClassVar

from sanic import Request
from sanic.exceptions import RequestTimeout
from sanic.http.constants import Stage
from sanic.server.protocols.http_protocol import HttpProtocol

from metastore import metrics
from metastore.errors import ApiError

log = logging.getLogger("metastore")

_INFLATE_STEP = 1 << 20  # inflate at most this much at a time, reserving as it grows
# Inflation threads: two, as many as the cores a pod is sized for; more would only queue in zlib.
_INFLATERS = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="metastore-inflate")
_FEED_STEP = 1 << 16  # compressed input handed to zlib at a time (its unconsumed tail is a copy)
_TLS_READ_BYTES = 16 << 10  # ciphertext read at a time per connection (TLS records are 16 KiB at most)

# glibc's malloc: allocations at least this large are mapped on their own and unmapped when freed.
_MMAP_THRESHOLD = 128 << 10
_M_ARENA_MAX, _M_MMAP_THRESHOLD = -8, -3


def tune_allocator() -> bool:
    """Make freed bodies leave the process: without this, glibc raises its mmap threshold to the
    size of the largest block freed (up to 32 MiB), so 16 MB bodies are then carved from heaps that
    are seldom returned to the system, one heap per thread that inflated or sent one; RSS kept
    growing from flood to flood. A fixed threshold keeps every block over 128 KiB mapped on its own
    (returned at free, and grown by mremap without a copy); two arenas bound the rest.
    False where the C library is not glibc (nothing to tune there)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(mallopt(_M_ARENA_MAX, 2))
    if not ok:
        log.warning("could not set the allocator's thresholds: memory may exceed the documented bound")
    return ok


class ByteBudget:
    """Bytes shared by all requests; taken from the event loop and from inflation threads.

    The last `reserve` bytes are for requests that hold no more than a large event's threshold:
    bodies of the limit, however many arrive, cannot refuse the small events everyone else posts."""

    def __init__(self, limit: int, reserve: int = 0) -> None:
        self.limit, self.used, self.reserve = limit, 0, reserve
        self._lock = threading.Lock()

    def take(self, n: int, large: bool = False) -> bool:
        with self._lock:
            if self.used + n > self.limit - (self.reserve if large else 0):
                return False
            self.used += n
        metrics.INFLIGHT.set(self.used)
        return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used -= n
        metrics.INFLIGHT.set(self.used)


def reserve_for_small(limit: int, max_body: int) -> int:
    """An eighth of the budget, as long as a body of the limit still fits beside it."""
    return max(0, min(limit // 8, limit - max_body))


def _budget_full() -> ApiError:
    """The refusal of a body the in-flight byte budget cannot hold now (counted as refused)."""
    metrics.REFUSED.labels("inflight_bytes").inc()
    return ApiError(
        503,
        "the service is holding as many request bytes as it may at once; retry in a second",
        "53000",
        retry_after=1,
        close=True,
    )


class Reservation:
    """What one request holds of the budget. Given back when the request is done and nothing else
    holds its body: a database call that carries it pins it until the call has really ended."""

    def __init__(self, budget: ByteBudget, large_bytes: int = 1 << 62) -> None:
        self.budget, self.held, self.large_bytes = budget, 0, large_bytes
        self._pins = 0
        self._ended = False

    def take(self, n: int) -> None:
        if not self.budget.take(n, large=self.held + n > self.large_bytes):
            raise _budget_full()
        self.held += n

    def give(self, n: int) -> None:
        """Give back part of what is held (a copy that is gone)."""
        n = min(n, self.held)
        self.held -= n
        self.budget.give(n)

    def pin(self) -> None:
        self._pins += 1

    def unpin(self) -> None:
        self._pins -= 1
        if self._ended and not self._pins:
            self.give(self.held)

    def release(self) -> None:
        """The request is done: give everything back, now or when the last pin goes."""
        self._ended = True
        if not self._pins:
            self.give(self.held)


def fits_now(reservation: Reservation, n: int) -> bool:
    """Would n more bytes fit the budget at this moment (nothing taken)?"""
    budget = reservation.budget
    large = reservation.held + n > reservation.large_bytes
    return budget.used + n <= budget.limit - (budget.reserve if large else 0)


def join(chunks: list[bytes], reservation: Reservation) -> bytes:
    """The chunks as one bytes object: for a moment both exist, and the budget counts both."""
    if len(chunks) == 1:
        return chunks[0]  # b"".join of one bytes object returns it, no copy
    size = sum(len(c) for c in chunks)
    reservation.take(size)
    whole = b"".join(chunks)
    chunks.clear()
    reservation.give(size)
    return whole


async def receive_body(request: Request, reservation: Reservation, max_bytes: int, deadline_s: float) -> bytes:
    """The whole body of a streamed request, within the size limit, the deadline and the budget."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise ApiError(413, f"the body is larger than {max_bytes} bytes", "54000", close=True)
    # A client that waits for "100 Continue" is told before it sends anything that its body cannot
    # be held now; the budget still holds only bytes that arrived (below).
    expects_continue = request.headers.get("expect", "").lower() == "100-continue"
    if expects_continue and length.isdigit() and not fits_now(reservation, int(length)):
        raise _budget_full()
    # The budget holds bytes that arrived, never bytes announced: reserving a Content-Length before
    # its bytes came let four clients that announce 16 MiB and send nothing hold the default budget
    # until their deadline, refusing every other POST meanwhile.
    chunks: list[bytes] = []
    received = 0

    async def read_all() -> None:
        nonlocal received
        while True:
            chunk = await request.stream.read()  # type: ignore[union-attr]
            if chunk is None:
                return
            received += len(chunk)
            if received > max_bytes:
                raise ApiError(413, f"the body is larger than {max_bytes} bytes", "54000", close=True)
            reservation.take(len(chunk))
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read_all(), deadline_s)
        return join(chunks, reservation) if chunks else b""
    except TimeoutError:
        metrics.REFUSED.labels("request_deadline").inc()
        raise ApiError(408, f"the request body did not arrive within {deadline_s:g} s", close=True) from None
    finally:
        # Also when refused: the exception's traceback holds this frame, and with it whatever the
        # frame holds, for as long as the exception lives (a cycle: until the collector runs).
        chunks.clear()


def _inflate(body: bytes, encoding: str, limit: int, reservation: Reservation) -> bytes:
    out: list[bytes] = []
    try:
        _inflate_into(out, body, encoding, limit, reservation)
        return join(out, reservation) if out else b""
    finally:
        out.clear()  # also when refused: see receive_body


def _inflate_into(out: list[bytes], body: bytes, encoding: str, limit: int, reservation: Reservation) -> None:
    inflater = zlib.decompressobj(wbits=47 if encoding != "deflate" else 15)  # 47: gzip or zlib header
    total = 0
    view = memoryview(body)
    try:
        for start in range(0, max(len(view), 1), _FEED_STEP):
            data: bytes | memoryview = view[start : start + _FEED_STEP]
            while data and not inflater.eof:
                chunk = inflater.decompress(data, _INFLATE_STEP)
                data = inflater.unconsumed_tail
                if chunk:
                    total += len(chunk)
                    if total > limit:
                        raise ApiError(413, f"the body inflates to more than {limit} bytes", "54000")
                    reservation.take(len(chunk))
                    out.append(chunk)
            if inflater.eof:
                break
        # What zlib holds back for want of output space (a tail of a small stream) comes out here.
        while not inflater.eof and (chunk := inflater.decompress(b"", _INFLATE_STEP)):
            total += len(chunk)
            if total > limit:
                raise ApiError(413, f"the body inflates to more than {limit} bytes", "54000")
            reservation.take(len(chunk))
            out.append(chunk)
        if not inflater.eof:
            raise ApiError(400, f"the {encoding} body is truncated", "22P03")
    except zlib.error as exc:
        raise ApiError(400, f"the body is not valid {encoding}: {exc}", "22P03") from None
    finally:
        chunk = b""
        view.release()
    if inflater.unused_data or start + _FEED_STEP < len(body):
        # A second gzip member or trailing bytes: what would be stored is not what was sent.
        raise ApiError(400, f"the {encoding} body has data after its end (several members, or trailing bytes)", "22P03")


async def inflate(body: bytes, encoding: str, limit: int, reservation: Reservation) -> bytes:
    """Undo Content-Encoding in a thread, refusing anything that inflates past the body limit; the
    compressed bytes are given back to the budget once the inflated ones are held."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send gzip or none")
    loop = asyncio.get_running_loop()
    # Pinned until the thread has ended, not until this coroutine has: a client that leaves
    # mid-inflation cancels the wait, not the thread, which keeps taking from the budget.
    reservation.pin()
    job = _INFLATERS.submit(_inflate, body, encoding, limit, reservation)
    job.add_done_callback(lambda _: loop.call_soon_threadsafe(reservation.unpin))
    inflated: bytes = await asyncio.wrap_future(job)
    reservation.give(len(body))
    return inflated


_REFUSAL_BODY = (
    b'{"error": {"status": 503, "message": "the service has as many connections as it may; retry in a second", '
    b'"code": "53300"}}'
)
_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_REFUSAL_BODY)).encode() + b"\r\n\r\n" + _REFUSAL_BODY
)


class ConnectionLimits:
    def __init__(
        self,
        max_connections: int,
        header_deadline_s: float,
        tls: ssl.SSLContext | None = None,
        handshake_timeout_s: float = 10,
    ) -> None:
        self.max_connections, self.header_deadline_s = max_connections, header_deadline_s
        self.tls, self.handshake_timeout_s = tls, handshake_timeout_s
        self.open = 0  # connections counted against the cap: handshaking or established
        self.refusing = 0  # TLS handshakes made only to answer 503


# Beyond the cap, this many connections at most are still shaken hands with to be told 503 (what
# an ordinary client understands and retries); past that, an attacker's connections are closed
# before the handshake, which is what costs memory.
_REFUSING_MAX = 64


class _TLS(sslproto.SSLProtocol):
    """asyncio's TLS protocol with small read buffers. uvloop's reads up to 256 KiB of ciphertext
    at a time into a buffer of that size and lets as much again wait in its BIO, both kept for the
    connection's life: a connection that once received a body at full speed held about 500 KiB
    (1000 of them: 500 MB). Here it keeps about 70 KiB (`make floods`, busy_connections); and
    receiving a 16 MB body cost the service 80 to 89 ms of CPU against 125 to 139 with uvloop's."""

    max_size = _TLS_READ_BYTES

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # How much ciphertext may wait while the application does not read (CPython 3.11+).
        self._set_read_buffer_limits(high=2 * _TLS_READ_BYTES, low=_TLS_READ_BYTES // 2)  # type: ignore[attr-defined]


class _Refusal(asyncio.Protocol):
    """Told 503 once its handshake is done, then closed."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits, self._ended = limits, False

    def connection_made(self, transport: Any) -> None:
        self.end()
        transport.write(_REFUSAL)
        transport.close()

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self.limits.refusing -= 1


def _start_tls(transport: Any, protocol: asyncio.BaseProtocol, limits: ConnectionLimits, failed: Any) -> None:
    """loop.start_tls, done at once from connection_made: the event loop starts reading right after
    connection_made returns, and the client's first bytes must reach the TLS layer, not Sanic.
    The TLS layer calls protocol.connection_made with its transport once the handshake is done,
    before any data; failed() is called when the handshake does not finish."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    tls = _TLS(
        loop,
        protocol,
        limits.tls,
        waiter,
        server_side=True,
        server_hostname=None,
        call_connection_made=True,
        ssl_handshake_timeout=limits.handshake_timeout_s,
    )
    transport.set_protocol(tls)
    tls.connection_made(transport)

    def finished(future: asyncio.Future[None]) -> None:
        if future.cancelled() or future.exception() is not None:
            transport.abort()
            failed()

    waiter.add_done_callback(finished)


class GuardedProtocol(HttpProtocol):
    """Sanic's HTTP protocol with a connection cap and a total deadline for a request's headers.

    With TLS, the server listens in plain TCP and each connection starts TLS here, once counted:
    a connection in its handshake holds TLS buffers (about 50 KB), and asyncio's own TLS calls
    the protocol only once the handshake is done, so a cap counted there would leave any number
    of clients that never finish their handshake uncounted.
    """

    __slots__ = ("_counted", "_handshaking", "_headers_since", "_started")
    limits: ClassVar[ConnectionLimits] = ConnectionLimits(1000, 10)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._counted = False
        self._started = False
        self._handshaking = False
        self._headers_since: float | None = None

    def connection_made(self, transport: Any) -> None:
        if self._handshaking:  # again, from the TLS layer: its handshake is done
            self._handshaking = False
            self._start(transport)
            return
        limits = self.limits
        if limits.open >= limits.max_connections:
            metrics.REFUSED.labels("connections").inc()
            if limits.tls is None:
                transport.write(_REFUSAL)
                transport.close()
            elif limits.refusing < _REFUSING_MAX:
                limits.refusing += 1
                refusal = _Refusal(limits)
                _start_tls(transport, refusal, limits, refusal.end)
            else:
                transport.abort()
            return
        limits.open += 1
        self._counted = True
        metrics.CONNECTIONS.set(limits.open)
        if limits.tls is None:
            self._start(transport)
        else:
            self._handshaking = True
            _start_tls(transport, self, limits, self._release)  # the handshake failed, timed out, or the client left

    def _start(self, transport: Any) -> None:
        self._started = True
        super().connection_made(transport)  # type: ignore[no-untyped-call]

    def _release(self) -> None:
        if not self._counted:
            return
        self._counted = False
        self.limits.open -= 1
        metrics.CONNECTIONS.set(self.limits.open)

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self._started:
            self._started = False
            super().connection_lost(exc)  # type: ignore[no-untyped-call]

    def data_received(self, data: bytes) -> None:
        http = getattr(self, "_http", None)  # set once the connection's task runs
        if http is None or http.stage is Stage.IDLE:
            # The first bytes of a request: its headers' deadline runs from now.
            self._headers_since = time.monotonic()
        super().data_received(data)

    def check_timeouts(self) -> None:
        http = getattr(self, "_http", None)
        if self._task and http is not None and http.stage is Stage.REQUEST:
            now = time.monotonic()
            if self._headers_since is None:
                self._headers_since = now
            elif now - self._headers_since > self.limits.header_deadline_s:
                metrics.REFUSED.labels("request_deadline").inc()
                http.exception = RequestTimeout("Request Timeout")
                self._task.cancel()
                return
        elif http is None or http.stage is not Stage.IDLE:
            self._headers_since = None
        super().check_timeouts()  # type: ignore[no-untyped-call]
