"""Floods against a running service, and the memory bound they prove (`make floods`).

Each flood is bounded in count and in time, talks to loopback only, and returns what its clients
saw (status codes, time to an answer), how legitimate requests fared meanwhile, and the server's
resident memory: VmRSS sampled from /proc/<pid>/status during the flood, and VmHWM (the peak).

    python -m bench.floods --measure     # each flood at default settings, fit the bound
                                         # (bench/results/memory.json)

Floods: slow uploads of large bodies, gzip bombs, all kinds of bodies at once (stored events that
inflate to the body limit, plain ones, batches, slow uploads), idle TLS connections (and TCP
connections that never finish the TLS handshake), as many connections as the cap allows each
having received a body, thousands of made-up HTTP methods while /metrics
is scraped, slowloris headers, and (measure only) the async queue full in memory.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.support.events import run_event

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
JSON = {"Content-Type": "application/json"}


# ---------------------------------------------------------------- the target and its memory


@dataclass
class Target:
    """A running service: its URL (loopback only), the CA that signed its certificate, its pid."""

    url: str
    ca: Path | None
    pid: int

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.hostname not in ("localhost", "127.0.0.1", "::1"):
            raise ValueError(f"floods run against loopback only, not {parts.hostname}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        if self.ca is None:
            raise ValueError("the CA of the service's certificate is needed")
        return ssl.create_default_context(cafile=str(self.ca))

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        verify: Any = self.ssl_context() or False
        kwargs.setdefault("timeout", 30)
        return httpx.AsyncClient(base_url=self.url, verify=verify, **kwargs)

    async def connect(self, ctx: ssl.SSLContext | None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            self.host, self.port, ssl=ctx, server_hostname=self.host if ctx else None, ssl_handshake_timeout=30
        )

    async def connect_or_note(
        self, ctx: ssl.SSLContext | None, seen: Seen, started: float, label: str = ""
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection, or None once why it failed is noted in `seen` with the time since `started`."""
        try:
            return await self.connect(ctx)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            seen.add(f"{label}{type(exc).__name__}", time.perf_counter() - started)
            return None


def _status_kb(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


class RssSampler:
    """VmRSS every few ms in a thread, and VmHWM at the end (the kernel's peak since start)."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        self.pid, self.interval_s = pid, interval_s
        self.start_kb = self.peak_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_kb = max(self.peak_kb, _status_kb(self.pid, "VmRSS"))
            except OSError:
                return
            time.sleep(self.interval_s)

    def __enter__(self) -> RssSampler:
        self.start_kb = self.peak_kb = _status_kb(self.pid, "VmRSS")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def result(self) -> dict[str, float]:
        try:
            hwm = _status_kb(self.pid, "VmHWM")
        except OSError:
            hwm = 0
        return {
            "start_mb": round(self.start_kb / 1024, 1),
            "sampled_peak_mb": round(self.peak_kb / 1024, 1),
            "hwm_mb": round(hwm / 1024, 1),
        }


# ---------------------------------------------------------------- bodies and small helpers


def event(run_id: str, producer: str = "https://example.com/floods") -> dict[str, Any]:
    return run_event(run_id, namespace="floods", dataset_namespace="trino://floods:8080", producer=producer)


def padded_event(run_id: str, size: int) -> bytes:
    """A valid event of about `size` bytes: a long string in a run facet, as Trino's plan texts are."""
    ev = event(run_id)
    text = json.dumps(ev)
    ev["run"]["facets"] = {"floods": {"_producer": "floods", "_schemaURL": "https://example.com/s", "pad": ""}}
    ev["run"]["facets"]["floods"]["pad"] = "x" * max(0, size - len(text) - 120)
    return json.dumps(ev, separators=(",", ":")).encode()


def whitespace_bomb(run_id: str, inflated: int) -> bytes:
    """gzip of a valid event padded with whitespace to `inflated` bytes: ~1000:1."""
    head = json.dumps(event(run_id))[:-1].encode()
    pad = max(0, inflated - len(head) - 1)
    return gzip.compress(head + b" " * pad + b"}", 9)


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "min": round(ordered[0], 4),
        "p50": round(statistics.median(ordered), 4),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 4),
        "max": round(ordered[-1], 4),
    }


@dataclass
class Seen:
    """What a group of clients saw: an outcome (status code or what went wrong) and a time each."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    retry_after: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: str, seconds: float, retry_after: str | None = None) -> None:
        self.seconds.setdefault(outcome, []).append(seconds)
        if retry_after is not None:
            self.retry_after[retry_after] += 1

    @property
    def outcomes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.seconds.items()}

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"outcomes": self.outcomes, "answer_s": {k: summary(v) for k, v in self.seconds.items()}}
        if self.retry_after:
            out["retry_after"] = dict(self.retry_after)
        return out


async def read_status(reader: asyncio.StreamReader) -> tuple[str, str | None]:
    """The status code and Retry-After of an HTTP/1.1 response, or how the connection ended."""
    try:
        line = await reader.readline()
    except (ConnectionError, ssl.SSLError, OSError) as exc:
        return type(exc).__name__, None
    if not line:
        return "closed", None
    parts = line.split()
    code = parts[1].decode() if len(parts) > 1 else "garbled"
    retry_after = None
    while True:
        try:
            header = await reader.readline()
        except (ConnectionError, ssl.SSLError, OSError):
            break
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        if name.strip().lower() == "retry-after":
            retry_after = value.strip()
    return code, retry_after


def _close(writer: asyncio.StreamWriter) -> None:
    with suppress(Exception):  # already gone
        writer.transport.abort()


class Probe:
    """Legitimate small events posted on one keep-alive connection while a flood runs."""

    def __init__(self, target: Target, interval_s: float = 0.25) -> None:
        self.target, self.interval_s = target, interval_s
        self.seen = Seen()
        self._task: asyncio.Task[None] | None = None
        self._tag = f"probe-{time.time_ns()}"

    async def _run(self) -> None:
        i = 0
        async with self.target.client(timeout=15) as http:
            while True:
                i += 1
                started = time.perf_counter()
                try:
                    r = await http.post("/api/v1/lineage", json=event(f"{self._tag}-{i}"))
                    self.seen.add(str(r.status_code), time.perf_counter() - started)
                except httpx.HTTPError as exc:
                    self.seen.add(type(exc).__name__, time.perf_counter() - started)
                await asyncio.sleep(self.interval_s)

    async def __aenter__(self) -> Probe:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0.3)  # its connection is open before the flood starts
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task


async def after(target: Target) -> dict[str, Any]:
    """A legitimate request on a fresh connection once the flood is over (retrying a few seconds)."""
    started = time.perf_counter()
    outcome = "none"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            async with target.client(timeout=10) as http:
                r = await http.post("/api/v1/lineage", json=event(f"after-{time.time_ns()}"))
                outcome = str(r.status_code)
                if r.status_code < 300:
                    break
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        await asyncio.sleep(0.2)
    return {"outcome": outcome, "seconds": round(time.perf_counter() - started, 3)}


async def flooding(
    target: Target, name: str, params: dict[str, Any], body: Callable[[Seen], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """Run one flood with a probe beside it and the RSS sampler around it."""
    seen = Seen()
    started = time.perf_counter()
    with RssSampler(target.pid) as rss:
        async with Probe(target) as probe:
            extra = await body(seen)
        after_result = await after(target)
    return {
        "flood": name,
        "params": params,
        "seconds": round(time.perf_counter() - started, 1),
        "clients": seen.report(),
        "legit_during": probe.seen.report(),
        "legit_after": after_result,
        "rss": rss.result(),
        **extra,
    }


# ---------------------------------------------------------------- the floods


async def answered(
    seen: Seen,
    started: float,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    sender: asyncio.Task[None],
    max_s: float,
) -> None:
    """Waits up to max_s for the answer to what `sender` is sending, notes it, and hangs up."""
    try:
        code, retry_after = await asyncio.wait_for(read_status(reader), max_s)
    except TimeoutError:
        code, retry_after = "no answer", None
    seen.add(code, time.perf_counter() - started, retry_after)
    sender.cancel()
    _close(writer)


async def slow_uploads(
    target: Target, n: int = 36, size: int = 15_000_000, rate: int = 4096, max_s: float = 40
) -> dict[str, Any]:
    """n uploads announcing `size` bytes and sending `rate` bytes a second: bounded by max_s."""
    ctx = target.ssl_context()

    async def one(seen: Seen, i: int) -> None:
        started = time.perf_counter()
        if (conn := await target.connect_or_note(ctx, seen, started)) is None:
            return
        reader, writer = conn
        head = (
            f"POST /api/v1/lineage HTTP/1.1\r\nHost: {target.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {size}\r\n\r\n"
        ).encode()

        async def trickle() -> None:
            writer.write(head)
            sent = 0
            while sent < size:
                chunk = min(rate, size - sent)
                writer.write(b" " * chunk)
                sent += chunk
                await writer.drain()
                await asyncio.sleep(1)

        await answered(seen, started, reader, writer, asyncio.create_task(trickle()), max_s)

    async def body(seen: Seen) -> dict[str, Any]:
        await asyncio.gather(*(one(seen, i) for i in range(n)))
        return {}

    return await flooding(target, "slow_uploads", {"n": n, "size": size, "bytes_per_s": rate}, body)


async def large_bodies(target: Target, n: int = 8, size: int = 15_000_000) -> dict[str, Any]:
    """n valid events of `size` bytes sent at once at full speed: what the budget admits is received
    whole, then stored (the most memory per admitted byte)."""
    tag = f"large-{time.time_ns()}"

    async def body(seen: Seen) -> dict[str, Any]:
        async with target.client(limits=httpx.Limits(max_connections=n), timeout=60) as http:

            async def one(i: int) -> None:
                data = padded_event(f"{tag}-{i}", size)
                started = time.perf_counter()
                try:
                    r = await http.post("/api/v1/lineage", content=data, headers=JSON)
                    seen.add(str(r.status_code), time.perf_counter() - started, r.headers.get("retry-after"))
                except httpx.HTTPError as exc:
                    seen.add(type(exc).__name__, time.perf_counter() - started)

            await asyncio.gather(*(one(i) for i in range(n)))
        return {}

    return await flooding(target, "large_bodies", {"n": n, "size": size}, body)


async def gzip_bombs(target: Target, n: int = 16, inflated: int = 16_000_000) -> dict[str, Any]:
    """n gzip bodies (a valid event padded with whitespace) that inflate to `inflated` bytes, at once."""
    tag = f"bomb-{time.time_ns()}"
    bodies = [whitespace_bomb(f"{tag}-{i}", inflated) for i in range(n)]

    async def body(seen: Seen) -> dict[str, Any]:
        async with target.client(limits=httpx.Limits(max_connections=n), timeout=60) as http:

            async def one(data: bytes) -> None:
                started = time.perf_counter()
                try:
                    r = await http.post(
                        "/api/v1/lineage",
                        content=data,
                        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                    )
                    seen.add(str(r.status_code), time.perf_counter() - started, r.headers.get("retry-after"))
                except httpx.HTTPError as exc:
                    seen.add(type(exc).__name__, time.perf_counter() - started)

            await asyncio.gather(*(one(d) for d in bodies))
        return {"compressed_bytes": len(bodies[0])}

    return await flooding(target, "gzip_bombs", {"n": n, "inflated": inflated}, body)


async def idle_connections(
    target: Target, n: int = 3000, raw: int = 0, hold_s: float = 5, opening: int = 100
) -> dict[str, Any]:
    """n TLS connections opened and held idle for hold_s; `raw` more TCP connections that never
    send a byte of the TLS handshake. Counts those the server refused (503 and close)."""
    ctx = target.ssl_context()
    gate = asyncio.Semaphore(opening)
    held: list[asyncio.StreamWriter] = []
    raw_socks: list[asyncio.StreamWriter] = []

    async def tls_one(seen: Seen) -> None:
        started = time.perf_counter()
        async with gate:
            if (conn := await target.connect_or_note(ctx, seen, started)) is None:
                return
            reader, writer = conn
        # A refused connection is answered at once; a held one stays silent.
        try:
            code, retry_after = await asyncio.wait_for(read_status(reader), 0.5)
            seen.add(code, time.perf_counter() - started, retry_after)
            _close(writer)
        except TimeoutError:
            seen.add("held", time.perf_counter() - started)
            held.append(writer)

    async def raw_one(seen: Seen) -> None:
        try:
            _, writer = await asyncio.open_connection(target.host, target.port)
            raw_socks.append(writer)
        except OSError as exc:
            seen.add("raw " + type(exc).__name__, 0)

    async def body(seen: Seen) -> dict[str, Any]:
        opened = time.perf_counter()
        await asyncio.gather(*(raw_one(seen) for _ in range(raw)))
        await asyncio.gather(*(tls_one(seen) for _ in range(n)))
        open_s = time.perf_counter() - opened
        await asyncio.sleep(hold_s)
        for w in held + raw_socks:
            _close(w)
        return {"held": len(held), "raw_opened": len(raw_socks), "open_s": round(open_s, 1)}

    return await flooding(target, "idle_connections", {"tls": n, "raw_tcp": raw, "hold_s": hold_s}, body)


async def busy_connections(target: Target, n: int = 1000, size: int = 1 << 20, hold_s: float = 3) -> dict[str, Any]:
    """n connections that each post one event of `size` bytes at full speed, are answered, and stay
    open: what a connection keeps once it has received a body (its TLS and HTTP buffers), measured
    once every answer is in (`settled_mb`, the bodies gone)."""
    ctx = target.ssl_context()
    gate = asyncio.Semaphore(100)
    held: list[asyncio.StreamWriter] = []
    body_bytes = padded_event(f"busy-{time.time_ns()}", size)

    async def one(seen: Seen, i: int) -> None:
        started = time.perf_counter()
        async with gate:
            if (conn := await target.connect_or_note(ctx, seen, started)) is None:
                return
            reader, writer = conn
            data = body_bytes.replace(b'"busy-', f'"busy-{i}-'.encode(), 1)
            writer.write(
                f"POST /api/v1/lineage HTTP/1.1\r\nHost: {target.host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )
            try:
                code, retry_after = await asyncio.wait_for(read_status(reader), 60)
            except TimeoutError:
                code, retry_after = "no answer", None
        seen.add(code, time.perf_counter() - started, retry_after)
        held.append(writer)

    async def body(seen: Seen) -> dict[str, Any]:
        await asyncio.gather(*(one(seen, i) for i in range(n)))
        await asyncio.sleep(hold_s)  # every answer is in, the bodies are freed; the connections stay
        settled = _status_kb(target.pid, "VmRSS") / 1024
        for w in held:
            _close(w)
        return {"held": len(held), "settled_mb": round(settled, 1)}

    return await flooding(target, "busy_connections", {"n": n, "size": size}, body)


async def made_up_methods(
    target: Target, n: int = 5000, concurrency: int = 16, scrapes: int = 20, healthz: int = 200
) -> dict[str, Any]:
    """n requests with made-up methods; then /metrics scraped while /healthz is timed beside it."""

    async def body(seen: Seen) -> dict[str, Any]:
        async with target.client(limits=httpx.Limits(max_connections=concurrency)) as http:
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(n):
                queue.put_nowait(i)

            async def worker() -> None:
                while not queue.empty():
                    i = queue.get_nowait()
                    started = time.perf_counter()
                    try:
                        r = await http.request(f"FLOOD{i}", "/api/v1/lineage")
                        seen.add(str(r.status_code), time.perf_counter() - started)
                    except httpx.HTTPError as exc:
                        seen.add(type(exc).__name__, time.perf_counter() - started)

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            sizes: list[int] = []
            scrape_s: list[float] = []
            health_s: list[float] = []
            done = asyncio.Event()
            series = method_lines = 0

            async def scrape() -> None:
                for _ in range(scrapes):
                    started = time.perf_counter()
                    r = await http.get("/metrics")
                    scrape_s.append(time.perf_counter() - started)
                    sizes.append(len(r.content))
                    text = r.text
                done.set()
                nonlocal series
                series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
                nonlocal method_lines
                method_lines = sum(1 for line in text.splitlines() if "FLOOD" in line)

            async def health() -> None:
                async with target.client() as own:
                    for _ in range(healthz):
                        started = time.perf_counter()
                        await own.get("/healthz")
                        health_s.append(time.perf_counter() - started)
                        if done.is_set():
                            break
                        await asyncio.sleep(0.005)

            await asyncio.gather(scrape(), health())
        return {
            "metrics_bytes_max": max(sizes),
            "metrics_series": series,
            "metrics_lines_naming_a_made_up_method": method_lines,
            "metrics_scrape_s": summary(scrape_s),
            "healthz_during_scrapes_s": summary(health_s),
        }

    return await flooding(target, "made_up_methods", {"n": n, "scrapes": scrapes}, body)


async def slowloris(target: Target, n: int = 200, every_s: float = 2, max_s: float = 40) -> dict[str, Any]:
    """n connections sending a request's headers one byte every `every_s` seconds; time to be cut off."""
    ctx = target.ssl_context()
    gate = asyncio.Semaphore(100)

    async def one(seen: Seen) -> None:
        started = time.perf_counter()
        async with gate:
            if (conn := await target.connect_or_note(ctx, seen, started)) is None:
                return
            reader, writer = conn
        started = time.perf_counter()
        head = f"POST /api/v1/lineage HTTP/1.1\r\nHost: {target.host}\r\n".encode() + b"X-Slow: " + b"a" * 10_000

        async def drip() -> None:
            for i in range(len(head)):
                writer.write(head[i : i + 1])
                await writer.drain()
                await asyncio.sleep(every_s)

        await answered(seen, started, reader, writer, asyncio.create_task(drip()), max_s)

    async def body(seen: Seen) -> dict[str, Any]:
        await asyncio.gather(*(one(seen) for _ in range(n)))
        return {}

    return await flooding(target, "slowloris", {"n": n, "byte_every_s": every_s}, body)


def stored_event(run_id: str, size: int) -> bytes:
    """A valid event of `size` bytes that is stored as sent (a long string: jsonb keeps it whole),
    unlike a whitespace bomb, whose whitespace PostgreSQL drops: the most a body can cost."""
    return padded_event(run_id, size)


def batch_body(tag: str, size: int, events: int = 8) -> bytes:
    """A JSON array of `events` padded events, about `size` bytes in all."""
    each = max(2048, size // events - 64)
    return b"[" + b",".join(padded_event(f"{tag}-{i}", each) for i in range(events)) + b"]"


async def poster(
    target: Target,
    seen: Seen,
    stop_at: float,
    kind: str,
    make: Callable[[int], tuple[bytes, dict[str, str]]],
    path: str,
) -> None:
    """Posts what `make` gives, again as soon as it is answered, until stop_at."""
    i = 0
    async with target.client(timeout=60) as http:
        while time.monotonic() < stop_at:
            i += 1
            data, headers = await asyncio.to_thread(make, i)
            started = time.perf_counter()
            try:
                r = await http.post(path, content=data, headers={**JSON, **headers})
                code = r.json().get("error", {}).get("code", "") if r.status_code >= 400 else ""
                seen.add(f"{kind} {r.status_code} {code}".strip(), time.perf_counter() - started)
            except httpx.HTTPError as exc:
                seen.add(f"{kind} {type(exc).__name__}", time.perf_counter() - started)


async def slow_upload(target: Target, seen: Seen, stop_at: float, tag: str, size: int, slow_rate: int) -> None:
    """Events of `size` bytes sent at slow_rate bytes/s, one after the other, until stop_at."""
    ctx = target.ssl_context()
    while time.monotonic() < stop_at:
        started = time.perf_counter()
        if (conn := await target.connect_or_note(ctx, seen, started, "slow ")) is None:
            await asyncio.sleep(0.5)
            continue
        reader, writer = conn
        data = stored_event(f"{tag}-s-{time.time_ns()}", size)
        head = (
            f"POST /api/v1/lineage HTTP/1.1\r\nHost: {target.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()

        async def trickle(data: bytes = data, head: bytes = head, writer: asyncio.StreamWriter = writer) -> None:
            writer.write(head)
            for at in range(0, len(data), slow_rate):
                writer.write(data[at : at + slow_rate])
                await writer.drain()
                await asyncio.sleep(1)

        sender = asyncio.create_task(trickle())
        try:
            code, _ = await asyncio.wait_for(read_status(reader), max(1.0, stop_at - time.monotonic() + 15))
        except TimeoutError:
            code = "no answer"
        seen.add(f"slow {code}", time.perf_counter() - started)
        sender.cancel()
        _close(writer)


async def mixed(
    target: Target,
    seconds: float = 20,
    body_limit: int = 16 << 20,
    bombs: int = 12,
    plain: int = 3,
    batches: int = 2,
    slow: int = 4,
    slow_rate: int = 65536,
    readers: int = 0,
    reader_hold_s: float = 10,
) -> dict[str, Any]:
    """Every kind of body at once, for `seconds`: gzip and deflate bodies that inflate to the body
    limit (stored events, not whitespace), plain bodies of the limit, batches (gzip and plain) of
    the limit, and slow uploads of the limit; each client posts again as soon as it is answered.
    With `readers`, as many readers of GET /api/v1/events (NDJSON and JSON pages in turn) that read
    the first 4 KiB and stop, holding their connection up to reader_hold_s (beyond the feed's
    deadline, which should cut them first), then start again. Refusals (413, 503) are expected:
    what is measured is that memory stays bounded meanwhile."""
    tag = f"mixed-{time.time_ns()}"
    stop_at = time.monotonic() + seconds
    # Just under the limit after inflation: admitted, held whole, then stored.
    size = body_limit - 4096

    def bomb(n: int, k: int, encoding: str) -> tuple[bytes, dict[str, str]]:
        raw = stored_event(f"{tag}-b{k}-{n}", size)
        if encoding == "gzip":
            return gzip.compress(raw, 6), {"Content-Encoding": "gzip"}
        import zlib

        return zlib.compress(raw, 6), {"Content-Encoding": "deflate"}

    def plain_body(n: int, k: int) -> tuple[bytes, dict[str, str]]:
        return stored_event(f"{tag}-p{k}-{n}", size), {}

    def batch(n: int, k: int) -> tuple[bytes, dict[str, str]]:
        data = batch_body(f"{tag}-a{k}-{n}", size)
        return (gzip.compress(data, 6), {"Content-Encoding": "gzip"}) if n % 2 else (data, {})

    async def body(seen: Seen) -> dict[str, Any]:
        tasks = [
            *(
                poster(
                    target,
                    seen,
                    stop_at,
                    "bomb",
                    lambda n, k=k: bomb(n, k, "deflate" if k % 4 == 3 else "gzip"),
                    "/api/v1/lineage",
                )
                for k in range(bombs)
            ),
            *(
                poster(target, seen, stop_at, "plain", lambda n, k=k: plain_body(n, k), "/api/v1/lineage")
                for k in range(plain)
            ),
            *(
                poster(target, seen, stop_at, "batch", lambda n, k=k: batch(n, k), "/api/v1/lineage/batch")
                for k in range(batches)
            ),
            *(slow_upload(target, seen, stop_at, tag, size, slow_rate) for _ in range(slow)),
            *(stalled_reader(target, seen, stop_at, k % 2 == 0, reader_hold_s) for k in range(readers)),
        ]
        await asyncio.gather(*tasks)
        return {}

    params = {
        "seconds": seconds,
        "body_bytes": size,
        "bombs": bombs,
        "plain": plain,
        "batches": batches,
        "slow": slow,
        "slow_bytes_per_s": slow_rate,
        "readers": readers,
        "reader_hold_s": reader_hold_s,
    }
    return await flooding(target, "mixed", params, body)


async def stalled_reader(target: Target, seen: Seen, stop_at: float, ndjson: bool, hold_s: float) -> None:
    """Until stop_at: GET /api/v1/events, read the status and 4 KiB, then read nothing more for up
    to hold_s (the connection's receive buffer at 4 KiB, so that the service's sends stop soon).
    Outcomes: "reader <status>" (or how the connection failed)."""
    ctx = target.ssl_context()
    accept = "application/x-ndjson" if ndjson else "application/json"
    while time.monotonic() < stop_at:
        opened = time.monotonic()
        try:
            sock = socket.create_connection((target.host, target.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader, writer = await asyncio.open_connection(
                sock=sock, ssl=ctx, server_hostname=target.host if ctx else None, limit=4096
            )
        except (OSError, ssl.SSLError) as exc:
            seen.add(f"reader {type(exc).__name__}", time.monotonic() - opened)
            await asyncio.sleep(0.5)
            continue
        writer.write(f"GET /api/v1/events HTTP/1.1\r\nHost: {target.host}\r\nAccept: {accept}\r\n\r\n".encode())
        try:
            code, _ = await asyncio.wait_for(read_status(reader), 30)
            with suppress(Exception):
                await asyncio.wait_for(reader.read(4096), 5)
        except TimeoutError:
            code = "no answer"
        seen.add(f"reader {code}", time.monotonic() - opened)
        # Nothing read from here on: the transport stops reading once its 4 KiB buffer is full.
        await asyncio.sleep(max(0.0, min(stop_at, opened + hold_s) - time.monotonic()))
        _close(writer)


# ---------------------------------------------------------------- measuring the bound


async def warm(target: Target, count: int = 200) -> None:
    """Every code path once, so that the baseline holds what any request imports and caches."""
    async with target.client() as http:
        for i in range(count):
            await http.post("/api/v1/lineage", content=padded_event(f"warm-{time.time_ns()}-{i}", 20_000), headers=JSON)
        await http.get("/metrics")
        await http.get("/api/v1/datasets")


async def queue_full(target: Target, owner_dsn: str, event_bytes: int = 1 << 20, count: int = 96) -> dict[str, Any]:
    """Async mode, no spool: the writers held off by a lock while large events fill the queue."""
    import psycopg

    tag = f"queue-{time.time_ns()}"
    seen = Seen()
    with RssSampler(target.pid) as rss:
        conn = await psycopg.AsyncConnection.connect(owner_dsn)
        try:
            await conn.execute("LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE")
            async with target.client(limits=httpx.Limits(max_connections=8), timeout=30) as http:
                gate = asyncio.Semaphore(8)

                async def one(i: int) -> None:
                    async with gate:
                        started = time.perf_counter()
                        data = padded_event(f"{tag}-{i}", event_bytes)
                        r = await http.post("/api/v1/lineage", content=data, headers=JSON)
                        seen.add(str(r.status_code), time.perf_counter() - started)

                await asyncio.gather(*(one(i) for i in range(count)))
            await asyncio.sleep(1)
            async with target.client() as http:
                metrics_text = (await http.get("/metrics")).text
            lines = metrics_text.splitlines()
            queued = next((float(x.split()[-1]) for x in lines if x.startswith("metastore_async_queue_bytes ")), 0.0)
        finally:
            await conn.rollback()
            await conn.close()
    return {
        "flood": "async_queue_full",
        "params": {"event_bytes": event_bytes, "count": count},
        "clients": seen.report(),
        "queue_bytes_gauge": int(queued),
        "rss": rss.result(),
    }


async def writers_large(target: Target, n: int = 8, size: int = 15_000_000, drain_s: float = 120) -> dict[str, Any]:
    """Async mode: n events of `size` bytes, one after the other, then until the writers stored them
    all: a batch is at least one event, so a writer may hold one of the largest accepted bodies."""
    tag = f"writers-{time.time_ns()}"
    seen = Seen()
    drained: float | None = None
    with RssSampler(target.pid) as rss:
        async with target.client(timeout=60) as http:
            for i in range(n):
                started = time.perf_counter()
                r = await http.post("/api/v1/lineage", content=padded_event(f"{tag}-{i}", size), headers=JSON)
                seen.add(str(r.status_code), time.perf_counter() - started)
            begin = time.monotonic()
            while time.monotonic() - begin < drain_s:
                lines = (await http.get("/metrics")).text.splitlines()
                depth = next((float(x.split()[-1]) for x in lines if x.startswith("metastore_async_queue_events ")), 0)
                if depth == 0:
                    drained = round(time.monotonic() - begin, 1)
                    break
                await asyncio.sleep(0.5)
    return {
        "flood": "writers_large",
        "params": {"n": n, "size": size},
        "clients": seen.report(),
        "drained_s": drained,
        "rss": rss.result(),
    }


@contextmanager
def database() -> Iterator[tuple[str, str]]:
    from devtools.localpg import LocalPostgres, provision

    pg = LocalPostgres().start()
    try:
        provision(pg, "floods")
        yield pg.dsn_for("metastore_service", "floods"), pg.dsn_for("metastore_owner", "floods")
    finally:
        pg.cleanup()


def measure(out: Path, quick: bool = False) -> dict[str, Any]:
    """Every flood at default settings on a fresh service each; then the constants of the bound."""
    from metastore import config as settings
    from tests.support.certs import write_tls_files
    from tests.support.servers import start_server

    work = Path(tempfile.mkdtemp(prefix="metastore-floods-"))
    tls = write_tls_files(work)
    defaults = {s.env: s.default for s in settings.SETTINGS}
    max_connections = int(defaults["METASTORE_MAX_CONNECTIONS"] or 0)
    inflight = int(defaults["METASTORE_MAX_INFLIGHT_BYTES"] or 0)
    queue_bytes = int(defaults["METASTORE_ASYNC_QUEUE_BYTES"] or 0)
    scale = 4 if quick else 1
    runs: dict[str, dict[str, Any]] = {}

    def run(name: str, flood: Callable[[Target], Coroutine[Any, Any, dict[str, Any]]], **env: str) -> None:
        print(f"floods: {name} ...", file=sys.stderr)
        log = work / f"service-{name}.log"
        service = start_server(service_dsn, tls, log, ready="/readyz", **{"METASTORE_LOG_LEVEL": "WARNING", **env})
        target = Target(service.url, tls.ca, service.process.pid)
        try:
            asyncio.run(warm(target))
            baseline = _status_kb(service.process.pid, "VmRSS") / 1024
            result = asyncio.run(flood(target))
            result["baseline_mb"] = round(baseline, 1)
            result["settings"] = env
            runs[name] = result
        finally:
            service.stop()

    with database() as (service_dsn, owner_dsn):
        run("idle", lambda t: _idle(t))
        run("slow_uploads", lambda t: slow_uploads(t, n=36 // scale, max_s=30))
        run("gzip_bombs", lambda t: gzip_bombs(t, n=16 // scale))
        # As many bombs as the budget holds whole (64 MiB / 16 MB): none refused midway.
        run("gzip_bombs_4", lambda t: gzip_bombs(t, n=4))
        run("large_bodies", lambda t: large_bodies(t, n=8 // min(scale, 2)))
        # Every kind of body at once, sustained: stored events inflating to the limit, plain ones,
        # batches, slow uploads (with a spool too: its copies, and its writers).
        run("mixed", lambda t: mixed(t, seconds=30 / scale))
        run("mixed_spool", lambda t: mixed(t, seconds=30 / scale), METASTORE_SPOOL_DIR=str(work / "mixed-spool"))
        # And readers of the event feed that stop reading, among them (not fitted: the read side's
        # terms are READ_SIDE's; this run is held to the whole bound).
        run(
            "mixed_readers",
            lambda t: mixed(t, seconds=30 / scale, readers=40, reader_hold_s=15),
            METASTORE_FEED_DEADLINE_S="10",
        )
        run("idle_tls_3000", lambda t: idle_connections(t, n=3000 // scale, hold_s=3))
        run(
            "idle_tls_3000_uncapped",
            lambda t: idle_connections(t, n=3000 // scale, hold_s=3),
            METASTORE_MAX_CONNECTIONS=str(3000 // scale),
        )
        run("raw_tcp_3000", lambda t: idle_connections(t, n=0, raw=3000 // scale, hold_s=3))
        # Every connection the cap allows, each having received a body at full speed.
        run("busy_connections", lambda t: busy_connections(t, n=max_connections // scale))
        run("made_up_methods", lambda t: made_up_methods(t, n=5000 // scale))
        run("slowloris", lambda t: slowloris(t, n=200 // scale, max_s=30))
        run(
            "async_queue_full",
            lambda t: queue_full(t, owner_dsn, count=96 // scale),
            METASTORE_INGEST_MODE="async",
            METASTORE_DB_TIMEOUT_MS="60000",
        )
        run(
            "async_writers_large",
            lambda t: writers_large(t, n=8 // min(scale, 2)),
            METASTORE_INGEST_MODE="async",
        )
        run(
            "async_spool_writers_large",
            lambda t: writers_large(t, n=8 // min(scale, 2)),
            METASTORE_INGEST_MODE="async",
            METASTORE_SPOOL_DIR=str(work / "spool"),
        )
    report = fit(runs, max_connections, inflight, queue_bytes, defaults)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return report


async def _idle(target: Target) -> dict[str, Any]:
    with RssSampler(target.pid) as rss:
        await asyncio.sleep(2)
    return {"flood": "idle", "rss": rss.result()}


def _peak(run: dict[str, Any]) -> float:
    return max(run["rss"]["hwm_mb"], run["rss"]["sampled_peak_mb"])


def _settings(env: dict[str, str]) -> Callable[[str], int]:
    from metastore import config as settings

    def value(name: str) -> int:
        default = next(s.default for s in settings.SETTINGS if s.env == name)
        return int(env.get(name) or default or 0)

    return value


def send_buffers_mb(env: dict[str, str]) -> float:
    """What libpq's send buffers keep, exactly from the settings: a connection's buffer stays as
    large as the largest message it sent, for the connection's life. In sync mode, an ingest
    connection sends a group (at most GROUP_COMMIT_BYTES) or an event up to LARGE_EVENT_BYTES; a
    large-event connection, up to MAX_BODY_BYTES. In async mode with ASYNC_QUEUE_FULL=sync, an
    ingest connection may store any event when the queue is full. (The writers' connections are
    in the writers' term.)"""
    value = _settings(env)
    if env.get("METASTORE_INGEST_MODE") == "async":
        full = (env.get("METASTORE_ASYNC_QUEUE_FULL") or "sync") == "sync"
        return value("METASTORE_POOL_MAX") * value("METASTORE_MAX_BODY_BYTES") / MIB if full else 0.0
    group = max(value("METASTORE_GROUP_COMMIT_BYTES"), value("METASTORE_LARGE_EVENT_BYTES"))
    return (
        value("METASTORE_POOL_MAX") * group + value("METASTORE_LARGE_EVENT_CALLS") * value("METASTORE_MAX_BODY_BYTES")
    ) / MIB


# The read side (GET /api/v1/events), not fitted by these floods but measured with stalled readers
# and streams of large events (tests/service/test_feed_bounds.py, docs/events.md): the pages the
# feed's budget counts (twice a page while it is read), with what the transports hold of a page
# being written and the allocator's slack: k_feed x FEED_BUFFER_BYTES; and each read connection's
# libpq input buffer, as large as the largest row it read (an event of 16 MiB and its envelope,
# rounded up to a power of two).
READ_SIDE = {"k_feed": 2.0, "read_connection_mb": 32.0}


def read_side_mb(constants: dict[str, float], env: dict[str, str]) -> float:
    value = _settings(env)
    k_feed = constants.get("k_feed", READ_SIDE["k_feed"])
    per_connection = constants.get("read_connection_mb", READ_SIDE["read_connection_mb"])
    return k_feed * value("METASTORE_FEED_BUFFER_BYTES") / MIB + value("METASTORE_READ_POOL_MAX") * per_connection


def bound_mb(constants: dict[str, float], env: dict[str, str], read_side: bool = True) -> float:
    """The documented memory bound (MiB) at these settings (METASTORE_* variables; defaults otherwise),
    both sides: what requests bring in (ingest) and what the event feed serves (the read side).
    read_side=False: without the read side's terms, for floods that read no events (their peaks are
    held to the terms they load, not to 160 MiB they cannot use)."""
    value = _settings(env)
    spool = bool(env.get("METASTORE_SPOOL_DIR"))
    queued = env.get("METASTORE_INGEST_MODE") == "async" or spool
    batch = max(value("METASTORE_ASYNC_BATCH_BYTES"), value("METASTORE_MAX_BODY_BYTES"))
    total = (
        constants["base_mb"]
        + value("METASTORE_MAX_CONNECTIONS") * constants["per_connection_kb"] / 1024
        + constants["k_inflight"] * value("METASTORE_MAX_INFLIGHT_BYTES") / MIB
        + send_buffers_mb(env)
        + (read_side_mb(constants, env) if read_side else 0.0)
    )
    if queued and not spool:
        total += constants["m_queue"] * value("METASTORE_ASYNC_QUEUE_BYTES") / MIB
    if queued:
        total += constants["w_writers"] * value("METASTORE_ASYNC_WRITERS") * batch / MIB
    return round(total, 1)


FORMULA = (
    "RSS <= base_mb + MAX_CONNECTIONS x per_connection_kb + k_inflight x MAX_INFLIGHT_BYTES"
    " + POOL_MAX x max(GROUP_COMMIT_BYTES, LARGE_EVENT_BYTES) + LARGE_EVENT_CALLS x MAX_BODY_BYTES"
    " (sync mode; async mode with ASYNC_QUEUE_FULL=sync: POOL_MAX x MAX_BODY_BYTES instead)"
    " + m_queue x ASYNC_QUEUE_BYTES (async mode without a spool)"
    " + w_writers x ASYNC_WRITERS x max(ASYNC_BATCH_BYTES, MAX_BODY_BYTES) (async mode, or a spool)"
    " + k_feed x FEED_BUFFER_BYTES + READ_POOL_MAX x read_connection_mb (the read side)"
)

# Floods of request bodies in sync mode without a spool: k_inflight is fitted to them.
BODY_FLOODS = ("slow_uploads", "gzip_bombs", "gzip_bombs_4", "large_bodies", "mixed")


def per_connection_kb(runs: dict[str, dict[str, Any]], max_connections: int) -> dict[str, float]:
    """KiB per connection as each flood of connections measured it."""
    uncapped = runs["idle_tls_3000_uncapped"]
    conns = max(1, int(uncapped["settings"]["METASTORE_MAX_CONNECTIONS"]))
    per_connection_kb = max(0.0, (_peak(uncapped) - uncapped["baseline_mb"]) * 1024 / conns)
    raw = runs["raw_tcp_3000"]
    # Counted while their handshake waits: at most the cap of them hold TLS buffers.
    pending = min(raw["params"]["raw_tcp"], max_connections)
    per_handshake_kb = max(0.0, (_peak(raw) - raw["baseline_mb"]) * 1024 / pending)
    busy = runs["busy_connections"]
    # Settled: the answers are in and the bodies freed; what stays is per connection (and what the
    # allocator kept of the bodies, counted here too).
    per_busy_connection_kb = max(0.0, (busy["settled_mb"] - busy["baseline_mb"]) * 1024 / max(1, busy["held"]))
    loris = runs["slowloris"]
    per_slow_header_kb = max(0.0, (_peak(loris) - loris["baseline_mb"]) * 1024 / loris["params"]["n"])
    return {
        "per_connection_kb": per_connection_kb,
        "per_pending_handshake_kb": per_handshake_kb,
        "per_slow_header_connection_kb": per_slow_header_kb,
        "per_connection_after_a_body_kb": per_busy_connection_kb,
    }


def fit(
    runs: dict[str, dict[str, Any]], max_connections: int, inflight: int, queue_bytes: int, defaults: dict[str, Any]
) -> dict[str, Any]:
    """Constants of the bound (see FORMULA), each from its own flood, rounded up; then every measured
    peak checked against the bound at its settings."""
    base = max(_peak(runs["idle"]), *(r["baseline_mb"] for r in runs.values()))
    per = per_connection_kb(runs, max_connections)
    # What the bodies held beyond libpq's send buffers (their own term), per byte of the budget.
    body_peaks = [
        _peak(runs[n]) - runs[n]["baseline_mb"] - send_buffers_mb(runs[n]["settings"]) for n in BODY_FLOODS if n in runs
    ]
    k = max(0.0, *body_peaks) * MIB / inflight
    q = runs["async_queue_full"]
    m = max(0.0, (_peak(q) - q["baseline_mb"]) * MIB / max(1, queue_bytes))
    # A writer's batch is at least one event: up to the largest body, whatever ASYNC_BATCH_BYTES says.
    writers = int(defaults["METASTORE_ASYNC_WRITERS"] or 0)
    batch = max(int(defaults["METASTORE_ASYNC_BATCH_BYTES"] or 0), int(defaults["METASTORE_MAX_BODY_BYTES"] or 0))
    # Less what receiving each body took (the k term, already in the bound).
    wl = runs["async_spool_writers_large"]
    receiving = k * wl["params"]["size"]
    w = max(0.0, ((_peak(wl) - wl["baseline_mb"]) * MIB - receiving) / (writers * batch))
    constants = {
        "base_mb": _ceil(base + 10, 10),
        "per_connection_kb": _ceil(max(per.values()) * 1.25, 5),
        "k_inflight": round(_ceil(k * 1.1, 0.1), 1),
        "m_queue": round(_ceil(m * 1.1, 0.1), 1),
        "w_writers": round(_ceil(w * 1.1, 0.1), 1),
        **READ_SIDE,
    }

    def bound(settings: dict[str, str], read_side: bool = True) -> float:
        return bound_mb(constants, settings, read_side)

    # A flood that reads no events is held to the bound without the read side's terms.
    peaks = {
        name: {
            "peak_mb": _peak(r),
            "baseline_mb": r.get("baseline_mb"),
            "bound_mb": bound(r.get("settings", {}), bool(r.get("params", {}).get("readers"))),
        }
        for name, r in runs.items()
    }
    return {
        "formula": FORMULA,
        "constants": constants,
        "measured": {
            **{name: round(kb, 1) for name, kb in per.items()},
            "k_inflight": round(k, 2),
            "m_queue": round(m, 2),
            "w_writers": round(w, 2),
        },
        "defaults": {
            "METASTORE_MAX_CONNECTIONS": max_connections,
            "METASTORE_MAX_INFLIGHT_BYTES": inflight,
            "METASTORE_ASYNC_QUEUE_BYTES": queue_bytes,
            "bound_sync_mb": bound({}),
            "bound_sync_spool_mb": bound({"METASTORE_SPOOL_DIR": "x"}),
            "bound_async_mb": bound({"METASTORE_INGEST_MODE": "async"}),
            "bound_async_spool_mb": bound({"METASTORE_INGEST_MODE": "async", "METASTORE_SPOOL_DIR": "x"}),
        },
        "peaks": peaks,
        "all_within_bound": all(p["peak_mb"] <= p["bound_mb"] for p in peaks.values()),
        "runs": runs,
    }


def _ceil(value: float, step: float) -> float:
    import math

    return math.ceil(value / step) * step


def main() -> int:
    parser = argparse.ArgumentParser(description="floods against the service; --measure fits the memory bound")
    parser.add_argument("--measure", action="store_true", help="every flood at default settings (minutes)")
    parser.add_argument("--quick", action="store_true", help="a quarter of each flood (harness check)")
    parser.add_argument("--refit", action="store_true", help="fit the bound again from the runs in --out")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "memory.json")
    args = parser.parse_args()
    if args.refit:
        from metastore import config as settings

        defaults = {s.env: s.default for s in settings.SETTINGS}
        report = fit(
            json.loads(args.out.read_text())["runs"],
            int(defaults["METASTORE_MAX_CONNECTIONS"] or 0),
            int(defaults["METASTORE_MAX_INFLIGHT_BYTES"] or 0),
            int(defaults["METASTORE_ASYNC_QUEUE_BYTES"] or 0),
            defaults,
        )
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    elif args.measure:
        report = measure(args.out, quick=args.quick)
    else:
        parser.print_help()
        return 2
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))
    return 0 if report["all_within_bound"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
