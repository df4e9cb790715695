"""`metastore export | import | replay`: stored events out of a running store, and back in.

The commands talk to stores over their HTTP API, never to PostgreSQL: an operator needs a URL
(and the CA that signs its certificate), not database credentials; reads go through the feed
(GET /api/v1/events, NDJSON, resumable at any event's cursor) with the store's own deadlines; and
imports go through the same ingest path as any producer (POST /api/v1/lineage/batch), so events
are validated and de-duplicated exactly as when they first arrived.

Payloads travel as the bytes PostgreSQL rendered: an event is cut out of its feed line by a scan
that only matches brackets (no parser, so no recursion however deep the event nests), never
parsed and re-serialised, so a number keeps its digits and a null stays a null.

Bounded: a line is read up to a length (--max-line-bytes, --max-event-bytes) and never whole
when longer; an answer's body up to outbound.ANSWER_BYTES; --deadline ends the whole command.
Only an answer that judges an event (400, 422) lets a command go past it without storing it; any
other ends the command (after retries when it may pass: no answer, 408, 429, 5xx) with one line
naming the answer and the URL. Exit codes: 0 done, 1 stopped by a failure, 2 bad usage, 3 the
deadline passed, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import logging
import os
import re
import sys
import time
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

import requests
import urllib3

from metastore.arguments import FILTERS, MIB
from metastore.outbound import (
    Answer,
    GuardedSession,
    Poster,
    Redactor,
    ingest_url,
    one_line,
    read_answer,
    reason,
    redact,
    watch_logs,
)
from metastore.settings import CLIENT, one

log = logging.getLogger("metastore.transfer")

EXIT_FAILED, EXIT_USAGE, EXIT_DEADLINE, EXIT_INTERRUPTED = 1, 2, 3, 130
# Around the event, a feed line carries its id, cursor, times and source (a principal may be long).
ENVELOPE_BYTES = 64 * 1024
_NETWORK_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)

_HEAD = re.compile(rb'\{"id": (\d+), "event": ')
_CURSOR = re.compile(rb', "cursor": "([A-Za-z0-9_=-]{1,200})"')
# A JSON string, escapes included.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TransferError(Exception):
    """A failure that ends the command, with a message that says what answered and where."""

    exit_code = EXIT_FAILED


class UsageError(TransferError):
    exit_code = EXIT_USAGE


class DeadlineError(TransferError):
    exit_code = EXIT_DEADLINE


class _StreamCut(Exception):
    """The feed's stream ended before it was complete: resumed from the last event's cursor."""


@dataclass
class FeedEvent:
    id: int
    cursor: str
    line: bytes  # the feed's line, as the store sent it
    payload: bytes  # the event, exactly as it appears in the line


def check_object(payload: bytes) -> None:
    """Raises ValueError unless payload is one JSON object whose strings are closed and whose
    brackets match: strings are blanked out by a regular expression, then the brackets left are
    matched with a stack (no recursion, however deep the object nests)."""
    if not payload.startswith(b"{") or not payload.endswith(b"}"):
        raise ValueError("the event is not a JSON object, or something follows it")
    blanked = _STRING.sub(b'""', payload)
    if blanked.count(b'"') % 2:
        raise ValueError("a string of the event is not closed")
    closers: list[int] = []
    brackets = blanked.translate(None, _NOT_BRACKETS)
    for position, byte in enumerate(brackets):
        if byte in b"{[":
            closers.append(byte + 2)  # } is { + 2, ] is [ + 2
        elif not closers or closers.pop() != byte:
            raise ValueError("a bracket of the event does not match")
        elif not closers and position != len(brackets) - 1:
            raise ValueError("the event ends before its cursor")
    if closers:
        raise ValueError("the event is not closed")


def split_line(line: bytes, check: bool = False) -> FeedEvent:
    """The payload is the `event` member, cut out of the line without parsing it. PostgreSQL renders
    the envelope with "id" then "event" first and "cursor" right after it (jsonb orders keys by
    length). The envelope's cursor is the last `, "cursor": "` of the line: those bytes cannot be
    inside a string (a quote there follows a backslash) and what follows them holds strings only.
    check: the payload's brackets must match too (a batch is assembled from payloads)."""
    head = _HEAD.match(line)
    if not head:
        raise ValueError('not a line of the event feed: it does not start with {"id": N, "event": ')
    end = line.rfind(b', "cursor": "')
    tail = _CURSOR.match(line, end) if end > head.end() else None
    if not tail or not line.rstrip().endswith(b"}"):
        raise ValueError("not a line of the event feed: no cursor after the event")
    if check:
        check_object(line[head.end() : end])
    return FeedEvent(int(head.group(1)), tail.group(1).decode("ascii"), line, line[head.end() : end])


def since(value: str) -> str:
    """--since: a duration back from now (90s, 15m, 6h, 7d) or a time, into a received_from."""
    match = _DURATION.match(value.strip())
    if match:
        seconds = int(match.group(1)) * _UNITS[match.group(2)]
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))
    return value


def _verify(args: argparse.Namespace) -> bool | str:
    if args.insecure:
        return False
    return str(args.ca) if args.ca else True


def filters_of(args: argparse.Namespace) -> dict[str, str]:
    chosen = {name: getattr(args, name) for name in FILTERS if getattr(args, name) is not None}
    if args.since is not None:
        if "received_from" in chosen:
            raise UsageError("give --since or --received-from, not both")
        chosen["received_from"] = since(args.since)
    return chosen


class Deadline:
    """--deadline: the whole command ends within it (None: no deadline)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self.at is None else max(self.at - time.monotonic(), 0.0)

    def cap(self, seconds: float) -> float:
        left = self.remaining()
        return seconds if left is None else min(seconds, left)

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def check(self, what: str) -> None:
        if self.passed():
            raise DeadlineError(f"the deadline of {self.seconds:g} s (--deadline) passed; {what}")

    def sleep(self, seconds: float) -> None:
        time.sleep(self.cap(seconds))


def feed_url(source: str) -> str:
    """The feed under a store's base URL (or the feed's URL itself), with the query string kept."""
    return ingest_url(source, "api/v1/events")


def _feed_lines(response: requests.Response, max_line: int, shown: str) -> Iterator[bytes]:
    """The lines of a streamed answer, each at most max_line bytes: a longer one is an error, read
    no further than max_line. The feed ends every line with a newline: a stream that stops in the
    middle of one was cut."""
    buffer = bytearray()
    while True:
        chunk = response.raw.read1(1 << 16, decode_content=False)
        if not chunk:
            break
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            buffer += chunk[start:newline]
            if len(buffer) > max_line:
                break
            yield bytes(buffer)
            buffer.clear()
            start = newline + 1
        else:
            buffer += chunk[start:]
        if len(buffer) > max_line:
            raise TransferError(
                f"{shown} sent a line longer than {max_line} bytes (--max-line-bytes); nothing after it was read"
            )
    if buffer:
        raise _StreamCut("the stream ended in the middle of a line")


def _open_feed(session: GuardedSession, url: str, params: dict[str, str], timeout: float) -> requests.Response:
    return session.get(
        url,
        params=params,
        headers={"Accept": "application/x-ndjson", "Accept-Encoding": "identity"},
        stream=True,
        timeout=timeout,
        verify=session.verify,
    )


def _check_feed_answer(response: requests.Response, shown: str, redactor: Redactor) -> None:
    """Raises unless the answer is the feed's NDJSON: a transient answer is retried (_StreamCut)."""
    if response.status_code != 200:
        answer = read_answer(response, shown, redactor)
        if answer.transient:
            raise _StreamCut(answer.describe())
        raise TransferError(f"{answer.describe()}: is it the base URL of a Metadata Store?")
    kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if kind != "application/x-ndjson":
        raise TransferError(f"{shown} answered 200 with {kind or 'no Content-Type'}, not the event feed's NDJSON")
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise TransferError(f"{shown} answered in {encoding} encoding, not the identity it was asked for")


def _error_line(line: bytes) -> str:
    """The message of the feed's last line when the store cut its stream short."""
    try:
        error = json.loads(line[:4096]).get("error", {})
        return str(error.get("message", "no message"))
    except (ValueError, AttributeError, RecursionError):
        return "an error line"


def read_feed(
    source: str,
    filters: dict[str, str],
    cursor: str | None,
    verify: bool | str,
    limit: int | None = None,
    *,
    max_line: int = 64 * MIB,
    deadline: Deadline | None = None,
    timeout: float = 30.0,
    retries: int = 5,
) -> Generator[FeedEvent, None, None]:
    """Every event of the feed after cursor, streamed as NDJSON; a stream cut short (network, the
    store's deadline, a transient answer) is resumed from the last event's cursor, up to `retries`
    times in a row. Lines are bounded (max_line); the deadline ends the reading wherever it is."""
    deadline = deadline or Deadline(None)
    url = feed_url(source)
    shown = redact(url)
    redactor = watch_logs(Redactor(source, url))
    failures, remaining = 0, limit
    with GuardedSession(verify) as session:
        while True:
            deadline.check(f"reading {shown} stopped after the event at cursor {cursor}")
            params = dict(filters)
            if cursor:
                params["cursor"] = cursor
            if remaining is not None:
                params["limit"] = str(remaining)
            got = 0
            try:
                per_read = max(deadline.cap(timeout), 0.01)
                with session.budget(deadline.remaining()), _open_feed(session, url, params, per_read) as response:
                    _check_feed_answer(response, shown, redactor)
                    for number, line in enumerate(_feed_lines(response, max_line, shown), 1):
                        if not line.strip():
                            continue
                        if line.startswith(b'{"error"'):
                            raise _StreamCut(f"the store cut the stream short: {_error_line(line)}")
                        try:
                            event = split_line(line)
                        except ValueError as exc:
                            raise TransferError(f"{shown}: line {number} of the answer: {exc}") from None
                        cursor, got, failures = event.cursor, got + 1, 0
                        yield event
            except (*_NETWORK_ERRORS, _StreamCut) as exc:
                deadline.check(f"reading {shown} stopped after the event at cursor {cursor}")
                failures += 1
                why = str(exc) if isinstance(exc, _StreamCut) else reason(exc, redactor)
                if failures > retries:
                    raise TransferError(f"reading {shown} failed {failures} times in a row: {why}") from None
                log.warning("reading the feed failed (%s); resuming after cursor %s", why, cursor)
                deadline.sleep(min(0.5 * 2**failures, 10))
                if remaining is not None:
                    remaining -= got
                continue
            if remaining is not None:
                remaining -= got
            # A stream that ends cleanly has caught up with the store's horizon, or hit the limit.
            return


class Progress:
    """One line on stderr, redrawn at most ten times a second; only on a terminal."""

    def __init__(self, label: str, total: int | None, stream: TextIO = sys.stderr) -> None:
        self.label, self.total, self.stream = label, total, stream
        self.enabled = stream.isatty()
        self.started = time.monotonic()
        self.drawn = 0.0

    def update(self, done: int, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.drawn < 0.1):
            return
        self.drawn = now
        rate = done / max(now - self.started, 1e-9)
        if self.total:
            width = 30
            filled = min(width, int(width * done / self.total))
            bar = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}"
        else:
            bar = f"{done}"
        self.stream.write(f"\r{self.label} {bar} events, {rate:.0f}/s {extra}\x1b[K")
        self.stream.flush()

    def close(self, done: int) -> None:
        if self.enabled:
            self.update(done, force=True)
            self.stream.write("\n")
            self.stream.flush()


class RateLimit:
    """At most `rate` events a second on average (None: unlimited)."""

    def __init__(self, rate: float | None) -> None:
        self.rate, self.started, self.count = rate, time.monotonic(), 0

    def wait(self) -> None:
        if self.rate:
            ahead = self.started + self.count / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        self.count += 1


@dataclass
class Checkpoint:
    """Where a replay got to: the cursor of the last event the target stored or judged. It names
    the target by its URL without credentials, and holds none."""

    path: Path | None
    filters: dict[str, str]
    target: str
    cursor: str | None = None
    sent: int = 0
    refused: int = 0
    saved_at: float = field(default=0.0)

    @classmethod
    def load(
        cls, path: Path | None, filters: dict[str, str], target: str, restart: bool, also: tuple[str, ...] = ()
    ) -> Checkpoint:
        """The saved position, when it is a replay of the same filters to the same target (`also`:
        other names the target had in files of earlier releases). A file without a position
        belongs to no replay yet."""
        point = cls(path, filters, target)
        if path is None or restart or not path.exists():
            return point
        try:
            saved = json.loads(path.read_text("utf-8")[: 1 << 20])
            if not isinstance(saved, dict):
                raise ValueError("not an object")
        except (OSError, ValueError, RecursionError) as exc:
            raise UsageError(f"{path} is not a checkpoint of replay ({exc}): use another file, or --restart") from None
        if saved.get("cursor") is None:
            return point
        if saved.get("filters") != filters or saved.get("target") not in (target, *also):
            raise UsageError(
                f"{path} is the checkpoint of another replay (filters {saved.get('filters')}, target "
                f"{redact(str(saved.get('target')))}): use another file, or --restart"
            )
        point.cursor, point.sent, point.refused = saved.get("cursor"), saved.get("sent", 0), saved.get("refused", 0)
        return point

    def save(self, every_s: float = 1.0, force: bool = False) -> None:
        now = time.monotonic()
        if self.path is None or (not force and now - self.saved_at < every_s):
            return
        self.saved_at = now
        tmp = self.path.with_name(self.path.name + ".tmp")
        state = {
            "cursor": self.cursor,
            "sent": self.sent,
            "refused": self.refused,
            "filters": self.filters,
            "target": self.target,
        }
        tmp.write_text(json.dumps(state), "utf-8")
        os.replace(tmp, self.path)  # whole or not at all, even if the process dies here


def send(poster: Poster, payload: str, deadline: Deadline, attempts: int = 5) -> Answer:
    """Post one event; an answer that may pass (no answer, 408, 429, 5xx) is tried again, with
    backoff (or the Retry-After asked, up to 30 s), up to `attempts` times within the deadline."""
    for attempt in range(1, attempts + 1):
        answer = poster.post(payload, cap=deadline.remaining())
        if answer.verdict != "failed" or not answer.transient or attempt == attempts:
            return answer
        deadline.check(f"the last answer was: {answer.describe()}")
        pause = min(answer.retry_after or 0.5 * 2**attempt, 30.0)
        log.warning("%s; trying again in %.1f s", answer.describe(), pause)
        deadline.sleep(pause)
    raise AssertionError("unreachable")


def replay(args: argparse.Namespace) -> dict[str, Any]:
    filters = filters_of(args)
    deadline = Deadline(args.deadline)
    poster = Poster(ingest_url(args.to, args.endpoint), _to_verify(args), args.timeout, args.gzip)
    target = poster.shown
    point = Checkpoint.load(args.checkpoint, filters, target, args.restart, also=(args.to, redact(args.to)))
    print(f"metastore replay: posting to {target}", file=sys.stderr)
    limiter = RateLimit(args.rate)
    progress = Progress("replay", args.limit)
    started = time.monotonic()
    resumed_from, sent_before, refused_before = point.cursor, point.sent, point.refused
    last_refusal = None
    try:
        feed = read_feed(
            args.source, filters, point.cursor, _verify(args), args.limit,
            max_line=args.max_line_bytes, deadline=deadline, retries=args.retries,
        )  # fmt: skip
        with contextlib.closing(feed) as events:
            for event in events:
                limiter.wait()
                try:
                    payload = event.payload.decode("utf-8")
                except UnicodeDecodeError:
                    raise TransferError(f"event {event.id} of the feed is not UTF-8") from None
                answer = send(poster, payload, deadline, attempts=args.retries + 1)
                if answer.verdict == "failed":
                    deadline.check(f"event {event.id} was not sent ({answer.describe()})")
                    raise TransferError(
                        f"{answer.describe()} (event {event.id}): an answer that says nothing about the event; "
                        f"stopped before it, run again to resume (--checkpoint)"
                    )
                if answer.verdict == "refused":
                    point.refused += 1  # judged: the target will never take it
                    last_refusal = f"event {event.id}: {answer.describe()}"
                    log.warning("the target refused %s", last_refusal)
                else:
                    point.sent += 1
                point.cursor = event.cursor
                point.save()
                progress.update(point.sent - sent_before + point.refused - refused_before, f"last id {event.id}")
    finally:
        point.save(force=True)
        progress.close(point.sent - sent_before + point.refused - refused_before)
        poster.close()
    elapsed = time.monotonic() - started
    done = point.sent - sent_before + point.refused - refused_before
    return {
        "command": "replay",
        "target": target,
        "resumed_from": resumed_from,
        "sent": point.sent - sent_before,
        "refused": point.refused - refused_before,
        "sent_total": point.sent,
        "refused_total": point.refused,
        "last_refusal": last_refusal,
        "cursor": point.cursor,
        "seconds": round(elapsed, 3),
        "events_per_second": round(done / elapsed, 1) if elapsed > 0 else None,
    }


def _to_verify(args: argparse.Namespace) -> bool | str:
    return False if args.to_insecure else (str(args.to_ca) if args.to_ca else True)


def _open_out(path: str, compress: bool) -> IO[bytes]:
    try:
        if path == "-":
            out: IO[bytes] = sys.stdout.buffer
            return gzip.GzipFile(fileobj=out, mode="wb", mtime=0) if compress else out  # type: ignore[return-value]
        if compress:
            return gzip.open(path, "wb", compresslevel=6)  # type: ignore[return-value]
        return open(path, "wb")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def export(args: argparse.Namespace) -> dict[str, Any]:
    filters = filters_of(args)
    deadline = Deadline(args.deadline)
    compress = args.gzip if args.gzip is not None else args.output.endswith(".gz")
    progress = Progress("export", args.limit)
    started = time.monotonic()
    count, cursor = 0, args.cursor
    out = _open_out(args.output, compress)
    try:
        feed = read_feed(
            args.source, filters, args.cursor, _verify(args), args.limit,
            max_line=args.max_line_bytes, deadline=deadline, timeout=args.timeout, retries=args.retries,
        )  # fmt: skip
        with contextlib.closing(feed) as events:
            for event in events:
                out.write(event.line + b"\n")
                count, cursor = count + 1, event.cursor
                progress.update(count)
    except TransferError as exc:
        resume = f"--cursor {cursor}" if cursor else "from the start"
        raise type(exc)(f"{exc} ({count} events written to {args.output}; resume with {resume})") from None
    except OSError as exc:
        raise TransferError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            if args.output != "-" or compress:
                out.close()
        progress.close(count)
    elapsed = time.monotonic() - started
    return {
        "command": "export",
        "file": args.output,
        "gzip": compress,
        "events": count,
        "cursor": cursor,
        "seconds": round(elapsed, 3),
        "events_per_second": round(count / elapsed, 1) if elapsed > 0 else None,
    }


def file_lines(path: str, max_line: int) -> Iterator[tuple[str, bytes]]:
    """(file:line, line) for each line of an export file, gzip or not: a line is read up to
    max_line bytes, and a longer one is an error that names it, read no further."""
    with contextlib.ExitStack() as stack:
        try:
            raw: IO[bytes] = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
            head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
        stream: IO[bytes] = raw
        if head == b"\x1f\x8b":
            stream = stack.enter_context(gzip.GzipFile(fileobj=raw))  # type: ignore[arg-type]
        number = 0
        while True:
            try:
                line = stream.readline(max_line + 1)
            except (OSError, EOFError, zlib.error) as exc:
                raise TransferError(f"{path}:{number + 1}: the file cannot be read: {exc}") from None
            if not line:
                return
            number += 1
            content = line.rstrip(b"\r\n")
            if len(content) > max_line:
                raise TransferError(
                    f"{path}:{number}: the line is longer than {max_line} bytes, more than the target takes "
                    f"(--max-event-bytes); it was not read further"
                )
            if content.strip():
                yield f"{path}:{number}", content


@dataclass
class _Import:
    """One import: where it posts, what it counted, and the events it holds for the next batch."""

    url: str
    shown: str
    session: GuardedSession
    redactor: Redactor
    deadline: Deadline
    timeout: float
    retries: int
    totals: dict[str, int] = field(default_factory=lambda: {"read": 0, "stored": 0, "duplicates": 0, "failed": 0})
    failures: list[dict[str, Any]] = field(default_factory=list)
    batch: list[tuple[str, FeedEvent]] = field(default_factory=list)
    size: int = 0

    def add(self, where: str, event: FeedEvent, batch_size: int, batch_bytes: int) -> None:
        self.batch.append((where, event))
        self.size += len(event.payload)
        self.totals["read"] += 1
        if len(self.batch) >= batch_size or self.size >= batch_bytes:
            self.flush()

    def flush(self) -> None:
        batch, self.batch, self.size = self.batch, [], 0
        if batch:
            self.post(batch)

    def post(self, batch: list[tuple[str, FeedEvent]]) -> None:
        """Store a batch; when the target refuses it whole as bad (400, 422: one event spoils the
        array), each of its events is posted alone, so that the target judges each. A summary is
        read only from an answer that judges: a 5xx with one says nothing about the events."""
        answer, result = self.answer(b"[" + b",".join(e.payload for _, e in batch) + b"]")
        summary = result.get("summary") if isinstance(result, dict) else None
        if answer.verdict != "failed" and isinstance(summary, dict):
            self.count(batch, answer, result)
        elif answer.verdict == "refused" and len(batch) > 1:
            for item in batch:
                self.post([item])
        elif answer.verdict == "refused":
            where, event = batch[0]
            self.totals["failed"] += 1
            self.failures.append({"line": where, "id": event.id, "status": answer.status, "reason": answer.body})
        else:
            raise TransferError(
                f"{answer.describe()}: an answer that says nothing about the events; stopped at {batch[0][0]} "
                f"(the lines before it were stored)"
            )

    def count(self, batch: list[tuple[str, FeedEvent]], answer: Answer, result: dict[str, Any]) -> None:
        """A batch's summary. Only an event the summary judges (an index of the batch, not
        retriable) is passed over: a retriable failure, or a failure the summary counts but does
        not name, says nothing about the event, and ends the import there."""
        summary = result["summary"]
        judged: list[tuple[int, dict[str, Any]]] = []
        unjudged: dict[str, Any] | None = None
        failed_events = result.get("failed_events")
        for failed in failed_events if isinstance(failed_events, list) else []:
            index = _index_in(failed, len(batch))
            if index is not None and failed.get("retriable") is not True:
                judged.append((index, failed))
            elif unjudged is None:
                unjudged = failed if isinstance(failed, dict) else {"entry": failed}
        counted = summary.get("failed", 0)
        if unjudged is not None or not isinstance(counted, int) or counted != len(judged):
            where = batch[_index_in(unjudged, len(batch)) or 0][0]
            what = (
                one_line(json.dumps(unjudged)[:300])
                if unjudged is not None
                else f"{counted} failed, {len(judged)} named"
            )
            raise TransferError(
                f"{answer.url} answered {answer.status} without storing an event it did not judge ({what}): "
                f"stopped at {where}; run again to resume (what was stored is a duplicate then)"
            )
        for key in ("stored", "duplicates", "failed"):
            value = summary.get(key, 0)
            self.totals[key] += value if isinstance(value, int) else 0
        for index, failed in judged:
            where, event = batch[index]
            self.failures.append({"line": where, "id": event.id, "code": failed.get("code"), **failed})

    def answer(self, body: bytes) -> tuple[Answer, Any]:
        """The target's answer to a batch and its JSON (None unless it is JSON); answers that may
        pass (no answer, 408, 429, 5xx) are tried again, `retries` times at most."""
        for attempt in range(self.retries + 1):
            budget = self.deadline.cap(self.timeout + len(body) / MIB)
            with self.session.budget(budget) as watch:
                answer, result = self._post(body, budget)
            if answer.verdict != "failed" or not answer.transient or attempt == self.retries:
                break
            if watch.expired:
                self.deadline.check(f"posting a batch to {self.shown} got no answer")
            log.warning("posting a batch failed (%s), attempt %d", answer.describe(), attempt + 1)
            self.deadline.sleep(min(answer.retry_after or 0.3 * 2**attempt, 30.0))
        self.deadline.check(f"the last answer was: {answer.describe()}")
        return answer, result

    def _post(self, body: bytes, budget: float) -> tuple[Answer, Any]:
        try:
            response = self.session.post(
                self.url,
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=budget,
                allow_redirects=False,
                stream=True,
                verify=self.session.verify,
            )
            with response:
                if not response.headers.get("Content-Type", "").startswith("application/json"):
                    return read_answer(response, self.shown, self.redactor), None
                # A batch's summary names each failed event: larger than an error, still bounded.
                data = response.raw.read(8 * MIB, decode_content=True) or b""
                answer = read_answer(response, self.shown, self.redactor, data)
        except _NETWORK_ERRORS as exc:
            return Answer(self.shown, None, problem=reason(exc, self.redactor)), None
        try:
            return answer, json.loads(data)
        except (ValueError, RecursionError):
            return answer, None


def _index_in(failed: Any, size: int) -> int | None:
    """The index a failed event of a batch's summary names, when it is one of the batch's."""
    index = failed.get("index") if isinstance(failed, dict) else None
    return index if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < size else None


def _event_of(where: str, line: bytes, max_event_bytes: int) -> FeedEvent:
    try:
        event = split_line(line, check=True)
    except ValueError as exc:
        raise TransferError(f"{where}: {exc}") from None
    if len(event.payload) > max_event_bytes:
        raise TransferError(
            f"{where}: the event is {len(event.payload)} bytes, more than {max_event_bytes} "
            f"(--max-event-bytes, the target's METASTORE_MAX_BODY_BYTES)"
        )
    return event


def batch_url(to: str) -> str:
    """The batch route under a store's base URL, or its ingest or batch URL given instead."""
    base, question, query = to.partition("#")[0].partition("?")
    base = base.rstrip("/")
    for suffix in ("/api/v1/lineage/batch", "/api/v1/lineage"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return f"{base}/api/v1/lineage/batch{question}{query}"


def checked_files(given: list[str]) -> list[str]:
    """The files to import, every archive among them checked first against its manifest (named, or
    beside the file: `metastore db retention --archive`), so that a damaged one imports nothing."""
    from metastore import archive

    files = []
    for name in given:
        path = Path(name)
        manifest = path if name.endswith(archive.MANIFEST_SUFFIX) else None
        if manifest is None and name != "-":
            manifest = archive.manifest_of(path)
        if manifest is not None:
            try:
                data, events = archive.verify(manifest)
            except archive.ArchiveError as exc:
                raise TransferError(f"{exc}; nothing was imported") from None
            log.info("%s: %d events, checksum verified against %s", data, events, manifest)
            name = str(data)
        files.append(name)
    return files


def import_(args: argparse.Namespace) -> dict[str, Any]:
    """Posts the events of export files to a store's batch route: each batch is stored through the
    ingest functions, so an event the store has already is a duplicate, not a second copy."""
    verify: bool | str = False if args.insecure else (str(args.ca) if args.ca else True)
    url = batch_url(args.to)
    job = _Import(
        url, redact(url), GuardedSession(verify), watch_logs(Redactor(args.to, url)), Deadline(args.deadline),
        args.timeout, args.retries,
    )  # fmt: skip
    print(f"metastore import: posting to {job.shown}", file=sys.stderr)
    progress = Progress("import", None)
    started = time.monotonic()
    files = checked_files(args.files)
    try:
        try:
            for path in files:
                for where, line in file_lines(path, args.max_event_bytes + ENVELOPE_BYTES):
                    job.add(where, _event_of(where, line, args.max_event_bytes), args.batch_size, args.batch_bytes)
                    progress.update(job.totals["read"])
        except TransferError:
            job.flush()  # what came before the line at fault is stored
            raise
        job.flush()
    finally:
        job.session.close()
        progress.close(job.totals["read"])
    elapsed = time.monotonic() - started
    return {
        "command": "import",
        "target": job.shown,
        **job.totals,
        "failed_events": job.failures[:100],
        "seconds": round(elapsed, 3),
        "events_per_second": round(job.totals["read"] / elapsed, 1) if elapsed > 0 else None,
    }


def _scrub(text: str, args: argparse.Namespace) -> str:
    """The message without the credentials of any URL the command was given."""
    urls = [u for u in (getattr(args, "source", None), getattr(args, "to", None)) if u]
    return Redactor(*urls).scrub(text) if urls else text


def run(args: argparse.Namespace) -> int:
    from metastore import logs

    logs.setup(one(CLIENT, "METASTORE_LOG_LEVEL"))
    # Log records go to stderr: stdout carries the summary, or the events themselves (export -o -).
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)
    if args.command in ("export", "replay") and not args.source:
        print(f"metastore {args.command}: give --from URL (or set METASTORE_URL)", file=sys.stderr)
        return EXIT_USAGE
    started = {"export": export, "import": import_, "replay": replay}[args.command]
    try:
        summary = started(args)
        # The summary is the command's result: on stdout, or on stderr when the events go to stdout.
        out = sys.stderr if getattr(args, "output", None) == "-" else sys.stdout
        print(json.dumps(summary), file=out)
        return 0
    except TransferError as exc:
        print(f"metastore {args.command}: {_scrub(one_line(str(exc)), args)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"metastore {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # one line, never a traceback; the trace at debug level
        log.debug("unexpected failure", exc_info=True)
        print(f"metastore {args.command}: {_scrub(one_line(f'{type(exc).__name__}: {exc}'), args)}", file=sys.stderr)
        return EXIT_FAILED
