"""A durable local spool: events answered 202 are on disk, fsynced, before the answer leaves.

Append-only segment files (`<sequence>.spool`) of records `magic, length, crc32, payload`;
the payload is a small JSON header (request id, source) and the body as received. Appends that
arrive together share one write and one fsync (group commit). A record is released once the
database committed its event; a segment whose records are all released is deleted. At start,
every record still on disk is replayed (storing is idempotent: a replayed event that had been
stored answers duplicate), and a torn record at the end of the last segment (a crash mid-write,
never acknowledged) is cut off.

What it guarantees is what fsync guarantees on the volume it lives on: a SIGKILL or an OOM kill
of the process loses nothing acknowledged; losing the volume loses what it held.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from metastore import metrics

log = logging.getLogger("metastore.spool")

_MAGIC = b"MSp1"
_HEADER = struct.Struct("<4sII")  # magic, payload length, crc32 of the payload
_META = struct.Struct("<H")  # length of the JSON header inside the payload


class SpoolFull(Exception):
    """The spool holds its maximum; the caller refuses the event (503)."""


@dataclass(frozen=True)
class Ticket:
    segment: int
    offset: int  # of the payload
    length: int


@dataclass(frozen=True)
class Record:
    ticket: Ticket
    request_id: str
    source_kind: str
    source_principal: str | None


class Spool:
    def __init__(self, directory: Path, max_bytes: int, segment_bytes: int = 64 << 20) -> None:
        self.directory, self.max_bytes, self.segment_bytes = directory, max_bytes, segment_bytes
        self._lock = threading.Lock()  # segment state, shared by the loop and the writing thread
        self._outstanding: dict[int, int] = {}  # segment -> records not yet released
        self._sizes: dict[int, int] = {}  # segment -> bytes on disk
        self._current: int | None = None
        self._fd: int | None = None
        self._next = 1
        self._pending: list[tuple[bytes, asyncio.Future[Ticket]]] = []
        self._pending_bytes = 0
        self._flusher: asyncio.Task[None] | None = None
        # One thread: appends are ordered, and at most one fsync runs at a time.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool")

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:012d}.spool"

    @property
    def bytes_on_disk(self) -> int:
        return sum(self._sizes.values())

    def recover(self) -> list[Record]:
        """Every record left by an earlier process, oldest first. Call once, before appending."""
        records: list[Record] = []
        segments = sorted(int(p.stem) for p in self.directory.glob("*.spool") if p.stem.isdigit())
        for position, segment in enumerate(segments):
            path = self._path(segment)
            data = path.read_bytes()
            offset, found = 0, 0
            while offset + _HEADER.size <= len(data):
                magic, length, crc = _HEADER.unpack_from(data, offset)
                start = offset + _HEADER.size
                payload = data[start : start + length]
                if magic != _MAGIC or len(payload) != length or zlib.crc32(payload) != crc:
                    break
                meta = json.loads(payload[_META.size : _META.size + _META.unpack_from(payload)[0]])
                records.append(
                    Record(Ticket(segment, start, length), meta["r"], meta["k"], meta.get("p")),
                )
                found += 1
                offset = start + length
            if offset < len(data):
                # Only the tail of the last segment can be torn by a crash; anywhere else it is damage.
                level = logging.WARNING if position == len(segments) - 1 else logging.ERROR
                log.log(
                    level,
                    "spool segment %s: %d bytes after the last whole record dropped",
                    path.name,
                    len(data) - offset,
                )
                with path.open("r+b") as f:
                    f.truncate(offset)
                    os.fsync(f.fileno())
            if found:
                self._outstanding[segment] = found
                self._sizes[segment] = offset
            else:
                path.unlink()
            self._next = max(self._next, segment + 1)
        metrics.SPOOL_BYTES.set(self.bytes_on_disk)
        if records:
            log.info("spool: %d accepted events from before the restart will be stored", len(records))
        return records

    async def append(self, body: bytes, request_id: str, source_kind: str, source_principal: str | None) -> Ticket:
        """Returns once the record is on disk (fsynced)."""
        meta = json.dumps({"r": request_id, "k": source_kind, "p": source_principal}).encode()
        payload = _META.pack(len(meta)) + meta + body
        record = _HEADER.pack(_MAGIC, len(payload), zlib.crc32(payload)) + payload
        if self.bytes_on_disk + self._pending_bytes + len(record) > self.max_bytes:
            raise SpoolFull(f"the spool holds its maximum of {self.max_bytes} bytes")
        future: asyncio.Future[Ticket] = asyncio.get_running_loop().create_future()
        self._pending.append((record, future))
        self._pending_bytes += len(record)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            group, self._pending, self._pending_bytes = self._pending, [], 0
            started = time.perf_counter()
            try:
                tickets = await loop.run_in_executor(self._executor, self._write, [r for r, _ in group])
            except OSError as exc:
                log.error("spool write failed: %s", exc)
                for _, future in group:
                    if not future.done():
                        future.set_exception(exc)
                continue
            metrics.SPOOL_SYNC.observe(time.perf_counter() - started)
            metrics.SPOOL_BYTES.set(self.bytes_on_disk)
            for (_, future), ticket in zip(group, tickets, strict=True):
                if not future.done():
                    future.set_result(ticket)

    def _write(self, records: list[bytes]) -> list[Ticket]:
        tickets: list[Ticket] = []
        with self._lock:
            chunks: list[bytes] = []
            for record in records:
                if self._fd is None or self._sizes[self._current or 0] + len(record) > self.segment_bytes:
                    self._write_all(chunks)
                    chunks = []
                    self._rotate()
                assert self._current is not None
                tickets.append(
                    Ticket(self._current, self._sizes[self._current] + _HEADER.size, len(record) - _HEADER.size)
                )
                self._sizes[self._current] += len(record)
                self._outstanding[self._current] = self._outstanding.get(self._current, 0) + 1
                chunks.append(record)
            self._write_all(chunks)
            if self._fd is not None:
                os.fdatasync(self._fd)
        return tickets

    def _write_all(self, chunks: list[bytes]) -> None:
        if not chunks or self._fd is None:
            return
        view = memoryview(b"".join(chunks))
        while view:
            view = view[os.write(self._fd, view) :]

    def _rotate(self) -> None:
        # Called with the lock held: close the full segment, start the next one.
        if self._fd is not None:
            os.fdatasync(self._fd)
            os.close(self._fd)
            if self._current is not None and not self._outstanding.get(self._current):
                self._drop(self._current)
        self._current, self._next = self._next, self._next + 1
        self._fd = os.open(self._path(self._current), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._sizes[self._current] = 0
        # The new file's directory entry must be durable too.
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _drop(self, segment: int) -> None:
        self._path(segment).unlink(missing_ok=True)
        self._sizes.pop(segment, None)
        self._outstanding.pop(segment, None)

    def read(self, ticket: Ticket) -> bytes:
        """The body of a record (blocking: call it from a thread)."""
        with self._path(ticket.segment).open("rb") as f:
            f.seek(ticket.offset)
            payload = f.read(ticket.length)
        return payload[_META.size + _META.unpack_from(payload)[0] :]

    def release(self, tickets: list[Ticket]) -> None:
        """These records' events are committed: forget them (the segment goes when all of it is)."""
        with self._lock:
            for ticket in tickets:
                left = self._outstanding.get(ticket.segment, 0) - 1
                self._outstanding[ticket.segment] = max(left, 0)
                if left <= 0 and ticket.segment != self._current:
                    self._drop(ticket.segment)
        metrics.SPOOL_BYTES.set(self.bytes_on_disk)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                if self._current is not None and not self._outstanding.get(self._current):
                    self._drop(self._current)
                self._current = None
        self._executor.shutdown(wait=True)
