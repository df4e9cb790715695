"""A durable local spool: events answered 202 are on disk, fsynced, before the answer leaves.

Append-only segment files (`<number>.spool`) of records. Appends that arrive together share one
write and one fsync (group commit). A record is counted (given its place, acknowledged) only once
its write and fsync succeeded; a failed or short write is undone (the segment cut back to its last
good length, or, when even that fails, the segment is left and the next append starts a new one),
its events are refused, and the spool reports itself unwritable until a write succeeds again.

A record is `magic, header in hex (sequence number, payload length, payload crc32, crc32 of the
header), payload`; the payload is a JSON line (request id, source) and the body as received, in
which every 0xFF byte is written as 0xFF 0x00. So the magic (0xFF then 'M') can stand only at the
start of a record, whatever clients send: at start, a torn or corrupt record is skipped up to the
next record that checks, and costs that record alone. Its bytes are copied into `quarantine/`
beside the segments, counted in a metric and logged. A record damaged after it was written and
found when read back is set aside the same way.

A record is released once the database committed its event; a segment whose records are all
released is deleted. At start, every record still on disk is replayed (storing is idempotent: a
replayed event that had been stored answers duplicate).

What it guarantees is what fsync guarantees on the volume it lives on: a SIGKILL or an OOM kill
of the process loses nothing acknowledged; losing the volume loses what it held.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from typing import Any, NamedTuple

from metastore import metrics

log = logging.getLogger("metastore.spool")

_MAGIC = b"\xffMS2"
_HEAD = 4 + 16 + 8 + 8  # magic, sequence number, payload length, payload crc32 (hex)
_HEADER_SIZE = _HEAD + 8  # and the crc32 of those (hex)
# Segments written by earlier releases: magic, payload length, crc32; replayed, never written.
_V1_MAGIC = b"MSp1"
_V1_HEADER = struct.Struct("<4sII")
_V1_META = struct.Struct("<H")
_PROBE_MAX = 1 << 20


class SpoolFull(Exception):
    """The spool holds its maximum; the caller refuses the event (503)."""


class SpoolDamaged(Exception):
    """A record read back does not check (its bytes changed on disk after they were written)."""


@dataclass(frozen=True)
class Ticket:
    segment: int
    offset: int  # of the record
    length: int  # of the whole record


@dataclass(frozen=True)
class Record:
    ticket: Ticket
    request_id: str
    source_kind: str
    source_principal: str | None


class _Span(NamedTuple):
    """Where a record that checks lies in its segment."""

    end: int
    seq: int | None  # None in a segment of an earlier release
    meta: tuple[int, int]
    body: int  # start; the body runs to the record's end
    escaped: bool


def _escape(body: bytes) -> bytes:
    return body.replace(b"\xff", b"\xff\x00")  # returns body itself when it has no 0xFF


def _header(payload: bytes, seq: int) -> bytes:
    head = b"%b%016x%08x%08x" % (_MAGIC, seq, len(payload), zlib.crc32(payload))
    return head + b"%08x" % zlib.crc32(head)


def _check(data: bytes, pos: int, earlier_release: bool = True) -> _Span | None:
    """The whole record starting at pos, if it checks; else None. earlier_release: a record of
    the previous format may stand there (never in a segment of this one)."""
    if earlier_release and data.startswith(_V1_MAGIC, pos):
        return _check_v1(data, pos)
    head = data[pos : pos + _HEADER_SIZE]
    if len(head) < _HEADER_SIZE or not head.startswith(_MAGIC):
        return None
    try:
        fields = int(head[4:], 16)  # sequence number, length, crc32 of the payload, of the header
    except ValueError:
        return None
    length, crc = (fields >> 64) & 0xFFFFFFFF, (fields >> 32) & 0xFFFFFFFF
    start, end = pos + _HEADER_SIZE, pos + _HEADER_SIZE + length
    if zlib.crc32(head[:_HEAD]) != fields & 0xFFFFFFFF or end > len(data):
        return None
    if zlib.crc32(memoryview(data)[start:end]) != crc:
        return None
    newline = data.find(b"\n", start, end)
    return None if newline < 0 else _Span(end, fields >> 96, (start, newline), newline + 1, True)


def _check_v1(data: bytes, pos: int) -> _Span | None:
    if pos + _V1_HEADER.size + _V1_META.size > len(data):
        return None
    _, length, crc = _V1_HEADER.unpack_from(data, pos)
    start, end = pos + _V1_HEADER.size, pos + _V1_HEADER.size + length
    if end > len(data) or length < _V1_META.size or zlib.crc32(memoryview(data)[start:end]) != crc:
        return None
    meta_end = start + _V1_META.size + _V1_META.unpack_from(data, start)[0]
    return None if meta_end > end else _Span(end, None, (start + _V1_META.size, meta_end), meta_end, False)


def _meta(data: bytes, span: _Span) -> dict[str, Any] | None:
    try:
        meta = json.loads(data[span.meta[0] : span.meta[1]])
    except ValueError:
        return None
    return meta if isinstance(meta, dict) else None


def _body(data: bytes, span: _Span) -> bytes:
    body = data[span.body : span.end]
    return body.replace(b"\xff\x00", b"\xff") if span.escaped and b"\xff" in body else body


def _cut_short(tail: bytes) -> bool:
    """Is tail the beginning of a record (or space allocated and never written)?"""
    if not tail.strip(b"\0"):
        return True
    if len(tail) < _HEADER_SIZE:
        return tail.startswith(_MAGIC) or _MAGIC.startswith(tail)
    try:
        length, head_crc = int(tail[20:28], 16), int(tail[36:44], 16)
    except ValueError:
        return False
    return tail.startswith(_MAGIC) and zlib.crc32(tail[:_HEAD]) == head_crc and _HEADER_SIZE + length > len(tail)


class Spool:
    def __init__(self, directory: Path, max_bytes: int, segment_bytes: int | None = None) -> None:
        # The segment being written counts whole against max_bytes until it is closed, even when
        # its records are stored: a sixteenth of the bound, so that a small spool still rotates.
        segment_bytes = segment_bytes or min(64 << 20, max(max_bytes // 16, 64 << 10))
        self.directory, self.max_bytes, self.segment_bytes = directory, max_bytes, segment_bytes
        self.quarantine_dir = directory / "quarantine"
        self._lock = threading.Lock()  # segment state, shared by the loop and the writing thread
        self._outstanding: dict[int, int] = {}  # segment -> records not yet released
        self._sizes: dict[int, int] = {}  # segment -> bytes on disk
        self._disk_bytes = 0
        self._current: int | None = None
        self._fd: int | None = None
        self._next = 1
        self._seq = 1
        self._pending: list[tuple[bytes, asyncio.Future[Ticket]]] = []
        self._pending_bytes = 0
        self._flusher: asyncio.Task[None] | None = None
        # Why the last write failed (None: writable), since when, and how much it needed.
        self._failure: str | None = None
        self._failing_since = 0.0
        self._failed_bytes = 0
        self._refused = 0
        self._probed_at = 0.0
        # One thread: appends are ordered, and at most one fsync runs at a time.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spool")
        metrics.SPOOL_WRITABLE.set(1)

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:012d}.spool"

    @property
    def bytes_on_disk(self) -> int:
        return self._disk_bytes

    def recover(self) -> list[Record]:
        """Every record left by an earlier process, oldest first. Call once, before appending."""
        records: list[Record] = []
        segments = sorted(int(p.stem) for p in self.directory.glob("*.spool") if p.stem.isdigit())
        for position, segment in enumerate(segments):
            data = self._path(segment).read_bytes()
            found, size = self._scan(segment, data, records, newest=position == len(segments) - 1)
            if found:
                self._outstanding[segment] = found
                self._sizes[segment] = size
                self._disk_bytes += size
            else:
                self._path(segment).unlink()
            self._next = max(self._next, segment + 1)
        self._quarantine_gauge()
        metrics.SPOOL_BYTES.set(self._disk_bytes)
        if records:
            log.info("spool: %d accepted events from before the restart will be stored", len(records))
        return records

    def _scan(self, segment: int, data: bytes, records: list[Record], newest: bool) -> tuple[int, int]:
        """Appends the segment's intact records to records; sets its damaged stretches aside.
        Returns how many records it holds and its size (a torn end is cut off, once kept)."""
        pos, found, last_seq = 0, 0, None
        damaged: tuple[int, int | None] | None = None  # (offset, sequence number before it)
        earlier_release = data.startswith(_V1_MAGIC)
        while pos < len(data):
            parsed = _check(data, pos, earlier_release)
            meta = _meta(data, parsed) if parsed else None
            if parsed is None or meta is None:
                if damaged is None:
                    damaged = (pos, last_seq)
                # An earlier release's records cannot be told from their bodies: the rest is lost.
                following = -1 if earlier_release else data.find(_MAGIC, pos + 1)
                pos = len(data) if following < 0 else following
                continue
            if damaged is not None:
                self._set_aside(segment, data, damaged[0], pos, damaged[1], parsed.seq, torn=False)
                damaged = None
            ticket = Ticket(segment, pos, parsed.end - pos)
            records.append(Record(ticket, str(meta.get("r")), str(meta.get("k")), meta.get("p")))
            found += 1
            pos, last_seq = parsed.end, parsed.seq
            self._seq = max(self._seq, (parsed.seq or 0) + 1)
        if damaged is not None:
            # A record cut short at the end of the newest segment: a write a crash interrupted,
            # never acknowledged. Anything else there (a record whole in length that does not
            # check) is damage.
            torn = newest and _cut_short(data[damaged[0] :])
            kept = self._set_aside(segment, data, damaged[0], len(data), damaged[1], None, torn=torn)
            if torn and kept:
                # So that it is not taken for damage once a newer segment exists.
                with self._path(segment).open("r+b") as f:
                    f.truncate(damaged[0])
                    os.fsync(f.fileno())
                return found, damaged[0]
        return found, len(data)

    def _set_aside(
        self, segment: int, data: bytes, start: int, end: int, before: int | None, after: int | None, torn: bool
    ) -> bool:
        """Keeps the stretch in quarantine, logs and counts it (once: a segment read again at the
        next start holds it still). True if it is in quarantine."""
        name = f"{segment:012d}-{start:012d}.bad"
        if (self.quarantine_dir / name).is_file():
            log.warning(
                "spool segment %s: %d damaged bytes at offset %d skipped, as at an earlier start (kept in %s)",
                self._path(segment).name,
                end - start,
                start,
                self.quarantine_dir / name,
            )
            return True
        where = self._keep(name, data[start:end])
        if torn:
            log.warning(
                "spool segment %s: a record cut short at its end (%d bytes at offset %d; a write the crash "
                "interrupted, never acknowledged) %s",
                self._path(segment).name,
                end - start,
                start,
                where,
            )
        else:
            lost = ""
            if before is not None and after is not None:
                count = after - before - 1
                numbers = f"{before + 1}" if count == 1 else f"{before + 1} to {after - 1}"
                lost = f"; records lost: {count} (numbers {numbers})" if count else "; no record lost"
            log.error(
                "spool segment %s: %d damaged bytes at offset %d skipped, the records after them kept%s; %s",
                self._path(segment).name,
                end - start,
                start,
                lost,
                where,
            )
        metrics.SPOOL_QUARANTINED.labels("torn" if torn else "corrupt").inc()
        return where.startswith("kept")

    def _keep(self, name: str, data: bytes) -> str:
        """Copies damaged bytes into the quarantine directory; says where (or why not)."""
        path = self.quarantine_dir / name
        try:
            self.quarantine_dir.mkdir(mode=0o700, exist_ok=True)
            with path.open("wb") as f:
                f.write(data)
                os.fsync(f.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)
            return f"not kept ({exc.strerror})"
        return f"kept in {path}"

    def _quarantine_gauge(self) -> None:
        try:
            total = sum(p.stat().st_size for p in self.quarantine_dir.glob("*.bad"))
        except OSError:
            return
        metrics.SPOOL_QUARANTINE_BYTES.set(total)

    async def append(self, body: bytes, request_id: str, source_kind: str, source_principal: str | None) -> Ticket:
        """Returns once the record is on disk (fsynced); raises OSError if it could not be written."""
        return await self.submit(body, request_id, source_kind, source_principal)

    def submit(
        self, body: bytes, request_id: str, source_kind: str, source_principal: str | None
    ) -> asyncio.Future[Ticket]:
        """A future of the record's ticket, set once it is on disk (fsynced), or OSError; raises
        SpoolFull at once. Cancelling the future does not stop the write."""
        meta = json.dumps({"r": request_id, "k": source_kind, "p": source_principal}).encode()
        payload = meta + b"\n" + _escape(body)
        size = _HEADER_SIZE + len(payload)
        if self._disk_bytes + self._pending_bytes + size > self.max_bytes:
            raise SpoolFull(f"the spool holds its maximum of {self.max_bytes} bytes")
        future: asyncio.Future[Ticket] = asyncio.get_running_loop().create_future()
        self._pending.append((payload, future))
        self._pending_bytes += size
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            group, self._pending, self._pending_bytes = self._pending, [], 0
            started = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self._write, [p for p, _ in group])
            except Exception as exc:  # not the disk's answer, a bug: fail the group, do not hang it
                log.exception("spool write failed")
                results = [OSError(f"spool write failed: {exc!r}")] * len(group)
            failed = next((r for r in results if isinstance(r, OSError)), None)
            if failed is None:
                metrics.SPOOL_SYNC.observe(time.perf_counter() - started)
                self._writable()
            else:
                self._unwritable(failed, sum(len(p) + _HEADER_SIZE for p, _ in group))
            metrics.SPOOL_BYTES.set(self._disk_bytes)
            for (_, future), result in zip(group, results, strict=True):
                if future.done():
                    continue
                if isinstance(result, Ticket):
                    future.set_result(result)
                else:
                    future.set_exception(result)

    def _write(self, payloads: list[bytes]) -> list[Ticket | OSError]:
        """Writes and fsyncs the records; a record gets its ticket only once it is durable."""
        results: list[Ticket | OSError] = []
        with self._lock:
            i = 0
            while i < len(payloads):
                try:
                    if self._current is None or not self._fits(self._sizes[self._current], payloads[i]):
                        self._rotate()
                    assert self._current is not None
                    segment, offset, first_seq = self._current, self._sizes[self._current], self._seq
                    pieces: list[bytes] = []  # header, payload, header, payload, ...
                    size = offset
                    for payload in payloads[i:]:
                        if not self._fits(size, payload):
                            break
                        pieces += (_header(payload, first_seq + len(pieces) // 2), payload)
                        size += _HEADER_SIZE + len(payload)
                    self._append_durably(b"".join(pieces), offset)
                except OSError as exc:
                    results.extend([exc] * (len(payloads) - i))
                    break
                count = len(pieces) // 2
                for payload in pieces[1::2]:
                    results.append(Ticket(segment, offset, _HEADER_SIZE + len(payload)))
                    offset += _HEADER_SIZE + len(payload)
                self._seq = first_seq + count
                self._disk_bytes += offset - self._sizes[segment]
                self._sizes[segment] = offset
                self._outstanding[segment] = self._outstanding.get(segment, 0) + count
                i += count
        return results

    def _fits(self, size: int, payload: bytes) -> bool:
        # A record larger than a segment gets one of its own.
        return not size or size + _HEADER_SIZE + len(payload) <= self.segment_bytes

    def _append_durably(self, data: bytes, good: int) -> None:
        """Writes data at the end of the current segment and fsyncs it; on failure the segment is
        cut back to `good` (its last fsynced length) or, if that fails too, left for a new one."""
        assert self._fd is not None
        fd = self._fd
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(28, os.strerror(28))
                view = view[written:]
        except OSError:
            try:
                os.ftruncate(fd, good)
                os.fdatasync(fd)
            except OSError:
                self._abandon()
            raise
        try:
            os.fdatasync(fd)
        except OSError:
            # After a failed fsync the file's state is unknown (the kernel may have dropped the
            # pages): write no more to it. Its whole records stay readable where they are.
            self._abandon()
            raise

    def _abandon(self) -> None:
        # Called with the lock held.
        if self._fd is None or self._current is None:
            return
        segment = self._current
        with contextlib.suppress(OSError):  # what is past the last good record is skipped at the next start
            os.ftruncate(self._fd, self._sizes[segment])
        os.close(self._fd)
        self._fd, self._current = None, None
        if not self._outstanding.get(segment):
            self._drop(segment)

    def _close_current(self) -> None:
        # Called with the lock held: close the segment being written (already fsynced), dropping it
        # when none of its events is still waiting to be stored.
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self._current is not None and not self._outstanding.get(self._current):
                self._drop(self._current)
            self._current = None

    def _rotate(self) -> None:
        # Called with the lock held: close the segment (already fsynced), start the next one.
        self._close_current()
        segment = self._next
        self._next += 1
        path = self._path(segment)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            # The new file's directory entry must be durable too.
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self._fd, self._current = fd, segment
        self._sizes[segment] = 0

    def _drop(self, segment: int) -> None:
        self._path(segment).unlink(missing_ok=True)
        self._disk_bytes -= self._sizes.pop(segment, 0)
        self._outstanding.pop(segment, None)

    def _unwritable(self, exc: OSError, needed: int) -> None:
        self._refused += 1
        self._failed_bytes = needed
        metrics.SPOOL_WRITE_FAILURES.inc()
        reason = exc.strerror or str(exc)
        if self._failure is None:
            self._failing_since = time.monotonic()
            metrics.SPOOL_WRITABLE.set(0)
            log.error("the spool cannot write (%s): events it cannot take are refused until it can", reason)
        self._failure = reason

    def _writable(self) -> None:
        if self._failure is None:
            return
        log.warning(
            "the spool writes again, after %.0f s in which %d writes failed",
            time.monotonic() - self._failing_since,
            self._refused,
        )
        self._failure, self._refused = None, 0
        metrics.SPOOL_WRITABLE.set(1)

    async def unwritable(self) -> str | None:
        """Why the spool cannot write, or None. While it cannot, each call (at most one a second)
        tries a write of the size that failed, so that it recovers without an event to append."""
        if self._failure is None:
            return None
        if time.monotonic() - self._probed_at >= 1.0:
            self._probed_at = time.monotonic()
            size = min(max(self._failed_bytes, 1), _PROBE_MAX)
            probe = asyncio.get_running_loop().run_in_executor(self._executor, self._probe, size)
            try:
                # Bounded: a volume that hangs must not hang the readiness check with it.
                await asyncio.wait_for(probe, 1.0)
            except TimeoutError:
                self._failure = "a write did not finish within 1 s"
            except OSError as exc:
                self._failure = exc.strerror or str(exc)
            else:
                self._writable()
                return None
        return (
            f"the spool ({self.directory}) cannot write: {self._failure}, for "
            f"{time.monotonic() - self._failing_since:.0f} s; events it cannot take are refused"
        )

    def _probe(self, size: int) -> None:
        # Where appends go: the end of the segment grows by size bytes, is fsynced, and is cut
        # back (a crash in between leaves zeros at the end, which the next start cuts off).
        with self._lock:
            if self._current is None:
                self._rotate()
            assert self._current is not None and self._fd is not None
            good = self._sizes[self._current]
            self._append_durably(bytes(size), good)
            try:
                os.ftruncate(self._fd, good)
                os.fdatasync(self._fd)
            except OSError:
                self._abandon()
                raise

    def read(self, ticket: Ticket) -> bytes:
        """The body of a record (blocking: call it from a thread); SpoolDamaged if it does not check."""
        try:
            with self._path(ticket.segment).open("rb") as f:
                f.seek(ticket.offset)
                data = f.read(ticket.length)
        except FileNotFoundError as exc:
            raise SpoolDamaged(f"segment {ticket.segment} is gone") from exc
        span = _check(data, 0)
        if span is None or span.end != ticket.length:
            raise SpoolDamaged(f"the record at offset {ticket.offset} of segment {ticket.segment} does not check")
        return _body(data, span)

    def set_aside(self, ticket: Ticket, request_id: str, why: str) -> None:
        """A record that did not check when read back: its bytes into quarantine, then released
        (blocking: call it from a thread)."""
        try:
            with self._path(ticket.segment).open("rb") as f:
                f.seek(ticket.offset)
                data = f.read(ticket.length)
        except OSError:
            data = b""
        where = self._keep(f"{ticket.segment:012d}-{ticket.offset:012d}.bad", data)
        log.error(
            "accepted event of request %s is damaged in the spool (%s) and cannot be stored; %s", request_id, why, where
        )
        metrics.SPOOL_QUARANTINED.labels("corrupt").inc()
        self._quarantine_gauge()
        self.release([ticket])

    def release(self, tickets: list[Ticket]) -> None:
        """These records' events are committed: forget them (the segment goes when all of it is)."""
        with self._lock:
            for ticket in tickets:
                left = self._outstanding.get(ticket.segment, 0) - 1
                self._outstanding[ticket.segment] = max(left, 0)
                if left <= 0 and ticket.segment != self._current:
                    self._drop(ticket.segment)
        metrics.SPOOL_BYTES.set(self._disk_bytes)

    def close(self) -> None:
        with self._lock:
            self._close_current()
        self._executor.shutdown(wait=True)
