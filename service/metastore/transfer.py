"""`metastore export | import | replay`: stored events out of a running store, and back in.

The commands talk to stores over their HTTP API, never to PostgreSQL: an operator needs a URL
(and the CA that signs its certificate), not database credentials; reads go through the feed
(GET /api/v1/events, NDJSON, resumable at any event's cursor) with the store's own deadlines; and
imports go through the same ingest path as any producer (POST /api/v1/lineage/batch), so events
are validated and de-duplicated exactly as when they first arrived.

Payloads travel as the text PostgreSQL rendered: an event is cut out of its feed line, never
parsed and re-serialised, so a number keeps its digits and a null stays a null.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO
from urllib.parse import urljoin

from metastore.feed import FILTERS  # the filters of GET /api/v1/events, which these commands pass on

log = logging.getLogger("metastore.transfer")

COMMANDS = ("export", "import", "replay")
_LINE_HEAD = re.compile(r'\{"id": (\d+), "event": ')
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TransferError(Exception):
    """A failure that ends the command (exit 1), with the place to resume from when known."""


@dataclass
class FeedEvent:
    id: int
    cursor: str
    line: str  # the feed's line, as the store sent it
    payload: str  # the event, exactly as it appears in the line


def split_line(line: str) -> FeedEvent:
    """The payload's text is the `event` member, cut out of the line without re-serialising it.
    PostgreSQL renders the envelope with "id" then "event" first (jsonb orders keys by length)."""
    head = _LINE_HEAD.match(line)
    if not head:
        raise TransferError(f"not a line of the event feed: {line[:200]!r}")
    _, end = json.JSONDecoder().raw_decode(line, head.end())
    envelope = json.loads(line)
    return FeedEvent(int(head.group(1)), envelope["cursor"], line, line[head.end() : end])


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
            raise TransferError("give --since or --received-from, not both")
        chosen["received_from"] = since(args.since)
    return chosen


def read_feed(
    base_url: str,
    filters: dict[str, str],
    cursor: str | None,
    verify: bool | str,
    limit: int | None = None,
    retries: int = 5,
) -> Iterator[FeedEvent]:
    """Every event of the feed after cursor, streamed as NDJSON; a stream cut short (network, the
    store's deadline) is resumed from the last event's cursor, up to `retries` times in a row."""
    import requests

    url = urljoin(base_url.rstrip("/") + "/", "api/v1/events")
    failures = 0
    remaining = limit
    with requests.Session() as session:
        while True:
            params = dict(filters)
            if cursor:
                params["cursor"] = cursor
            if remaining is not None:
                params["limit"] = str(remaining)
            got = 0
            try:
                with session.get(
                    url,
                    params=params,
                    headers={"Accept": "application/x-ndjson"},
                    stream=True,
                    verify=verify,
                    timeout=30,
                ) as response:
                    if response.status_code != 200:
                        raise TransferError(f"GET {url}: {response.status_code} {response.text[:500]}")
                    for raw in response.iter_lines(chunk_size=1 << 16):  # the default, 512 bytes, is slow
                        if not raw:
                            continue
                        line = raw.decode("utf-8")
                        if line.startswith('{"error"'):
                            error = json.loads(line)["error"]
                            raise requests.ConnectionError(f"the store cut the stream short: {error.get('message')}")
                        event = split_line(line)
                        cursor = event.cursor
                        got += 1
                        failures = 0
                        yield event
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                failures += 1
                if failures > retries:
                    raise TransferError(f"reading {url} failed {failures} times in a row: {exc}") from exc
                log.warning("reading the feed failed (%s); resuming after %s", exc, cursor)
                time.sleep(min(0.5 * 2**failures, 10))
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
    """Where a replay got to: the cursor of the last event the target accepted."""

    path: Path | None
    filters: dict[str, str]
    target: str
    cursor: str | None = None
    sent: int = 0
    refused: int = 0
    saved_at: float = field(default=0.0)

    @classmethod
    def load(cls, path: Path | None, filters: dict[str, str], target: str, restart: bool) -> Checkpoint:
        point = cls(path, filters, target)
        if path is None or restart or not path.exists():
            return point
        saved = json.loads(path.read_text("utf-8"))
        if saved.get("filters") != filters or saved.get("target") != target:
            raise TransferError(
                f"{path} is the checkpoint of another replay (filters {saved.get('filters')}, target "
                f"{saved.get('target')}): use another file, or --restart"
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


def make_transport(
    url: str, endpoint: str = "api/v1/lineage", timeout: float = 10.0, verify: bool | str = True, gzip: bool = False
) -> Any:
    """openlineage-python's HTTP transport (its retries, TLS, auth and compression settings),
    sending the stored text as it is: its emit() would pass events through Serde, which drops
    nulls and empty objects in lists, and the replayed event would no longer be the stored one."""
    from openlineage.client.transport.http import HttpCompression, HttpConfig, HttpTransport

    class RawHttpTransport(HttpTransport):
        def emit_text(self, text: str) -> Any:
            body, headers = self._prepare_request(text)
            response = self.session.post(
                url=urljoin(self.url, self.endpoint),
                data=body.encode() if isinstance(body, str) else body,
                headers=headers,
                timeout=self.timeout,
                verify=self.verify,
            )
            response.close()
            return response

    config = HttpConfig(
        url=url,
        endpoint=endpoint,
        timeout=timeout,
        verify=verify is not False,
        compression=HttpCompression.GZIP if gzip else None,
    )
    transport = RawHttpTransport(config)
    if isinstance(verify, str):
        transport.verify = verify  # a CA bundle
    return transport


def _transport(args: argparse.Namespace) -> Any:
    verify: bool | str = False if args.to_insecure else (str(args.to_ca) if args.to_ca else True)
    return make_transport(args.to, args.endpoint, args.timeout, verify, args.gzip)


def replay(args: argparse.Namespace) -> dict[str, Any]:
    import requests

    filters = filters_of(args)
    point = Checkpoint.load(args.checkpoint, filters, args.to, args.restart)
    transport = _transport(args)
    limiter = RateLimit(args.rate)
    progress = Progress("replay", args.limit)
    started = time.monotonic()
    resumed_from, sent_before, refused_before = point.cursor, point.sent, point.refused
    last_error = None
    try:
        for event in read_feed(args.source, filters, point.cursor, _verify(args), args.limit):
            limiter.wait()
            try:
                response = transport.emit_text(event.payload)
            except requests.RequestException as exc:  # retried by the transport already
                raise TransferError(f"sending event {event.id} to {args.to} failed: {exc}") from exc
            if response.status_code >= 500 or response.status_code in (408, 429):
                # Retried by the transport already: stop here, resumable at this event.
                raise TransferError(
                    f"{args.to} answered {response.status_code} for event {event.id} after retries: "
                    f"{response.text[:300]}"
                )
            if response.status_code >= 400:
                point.refused += 1  # the target refuses this event; retrying would not change that
                last_error = f"event {event.id}: {response.status_code} {response.text[:300]}"
                log.warning("the target refused %s", last_error)
            else:
                point.sent += 1
            point.cursor = event.cursor
            point.save()
            progress.update(point.sent - sent_before + point.refused - refused_before, f"last id {event.id}")
    finally:
        point.save(force=True)
        progress.close(point.sent - sent_before + point.refused - refused_before)
        transport.close()
    elapsed = time.monotonic() - started
    done = point.sent - sent_before + point.refused - refused_before
    return {
        "command": "replay",
        "target": args.to,
        "resumed_from": resumed_from,
        "sent": point.sent - sent_before,
        "refused": point.refused - refused_before,
        "sent_total": point.sent,
        "refused_total": point.refused,
        "last_refusal": last_error,
        "cursor": point.cursor,
        "seconds": round(elapsed, 3),
        "events_per_second": round(done / elapsed, 1) if elapsed > 0 else None,
    }


def _open_out(path: str, compress: bool) -> IO[bytes]:
    if path == "-":
        out: IO[bytes] = sys.stdout.buffer
        return gzip.GzipFile(fileobj=out, mode="wb", mtime=0) if compress else out  # type: ignore[return-value]
    if compress:
        return gzip.open(path, "wb", compresslevel=6)  # type: ignore[return-value]
    return open(path, "wb")


def export(args: argparse.Namespace) -> dict[str, Any]:
    filters = filters_of(args)
    compress = args.gzip if args.gzip is not None else args.output.endswith(".gz")
    progress = Progress("export", args.limit)
    started = time.monotonic()
    count, cursor = 0, args.cursor
    out = _open_out(args.output, compress)
    try:
        for event in read_feed(args.source, filters, args.cursor, _verify(args), args.limit):
            out.write(event.line.encode() + b"\n")
            count, cursor = count + 1, event.cursor
            progress.update(count)
    finally:
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


def _lines_of(path: str) -> Iterator[str]:
    with contextlib.ExitStack() as stack:
        raw: IO[bytes] = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
        head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        stream: IO[bytes] = raw
        if head == b"\x1f\x8b":
            stream = stack.enter_context(gzip.GzipFile(fileobj=raw))  # type: ignore[arg-type]
        for line in stream:
            text = line.decode("utf-8").strip()
            if text:
                yield text


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
    import requests

    url = urljoin(args.to.rstrip("/") + "/", "api/v1/lineage/batch")
    verify: bool | str = False if args.insecure else (str(args.ca) if args.ca else True)
    totals = {"read": 0, "stored": 0, "duplicates": 0, "failed": 0}
    failures: list[dict[str, Any]] = []
    progress = Progress("import", None)
    started = time.monotonic()

    def post(batch: list[FeedEvent]) -> None:
        body = ("[" + ",".join(e.payload for e in batch) + "]").encode()
        for attempt in range(6):
            try:
                response = session.post(
                    url, data=body, headers={"Content-Type": "application/json"}, verify=verify, timeout=60
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                error: str = str(exc)
            else:
                if response.status_code in (200, 400) and response.headers.get("content-type", "").startswith(
                    "application/json"
                ):
                    result = response.json()
                    if "summary" in result:
                        summary = result["summary"]
                        totals["stored"] += summary["stored"]
                        totals["duplicates"] += summary["duplicates"]
                        totals["failed"] += summary["failed"]
                        for failed in result.get("failed_events", []):
                            failures.append({"id": batch[failed["index"]].id, "code": failed["code"], **failed})
                        return
                if response.status_code < 500:
                    raise TransferError(f"POST {url}: {response.status_code} {response.text[:500]}")
                error = f"{response.status_code} {response.text[:200]}"
            log.warning("posting a batch failed (%s), attempt %d", error, attempt + 1)
            time.sleep(min(0.3 * 2**attempt, 10))
        raise TransferError(f"POST {url} kept failing: {error}")

    files = checked_files(args.files)
    with requests.Session() as session:
        batch: list[FeedEvent] = []
        size = 0
        for path in files:
            for line in _lines_of(path):
                event = split_line(line)
                batch.append(event)
                size += len(event.payload)
                totals["read"] += 1
                if len(batch) >= args.batch_size or size >= args.batch_bytes:
                    post(batch)
                    batch, size = [], 0
                    progress.update(totals["read"])
        if batch:
            post(batch)
    progress.close(totals["read"])
    elapsed = time.monotonic() - started
    return {
        "command": "import",
        "target": args.to,
        **totals,
        "failed_events": failures[:100],
        "seconds": round(elapsed, 3),
        "events_per_second": round(totals["read"] / elapsed, 1) if elapsed > 0 else None,
    }


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="source",
        default=os.environ.get("METASTORE_URL"),
        help="base URL of the store to read, e.g. https://metastore:8443 (default: $METASTORE_URL)",
    )
    parser.add_argument("--ca", type=Path, help="CA certificate(s) that sign the store's certificate (PEM)")
    parser.add_argument("--insecure", action="store_true", help="do not verify the store's certificate")
    for name in FILTERS:
        parser.add_argument(
            f"--{name.replace('_', '-')}", dest=name, help=f"feed filter {name} (see GET /api/v1/events)"
        )
    parser.add_argument("--since", help="received since: a duration back from now (30m, 6h, 7d) or a time")
    parser.add_argument("--limit", type=int, help="stop after this many events")


def add_commands(commands: Any) -> None:
    exp = commands.add_parser("export", help="write stored events to NDJSON (gzip when the name ends in .gz)")
    _add_source(exp)
    exp.add_argument("-o", "--output", required=True, help="file to write, or - for stdout")
    exp.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=None, help="compress (default: by name)")
    exp.add_argument("--cursor", help="start after this event's cursor")

    imp = commands.add_parser("import", help="store the events of export files into a store (de-duplicated)")
    imp.add_argument(
        "files",
        nargs="+",
        help="NDJSON files written by export, gzip or not, or by `db retention --archive` (checked against their "
        "manifests, which may be named instead); - for stdin",
    )
    imp.add_argument("--to", required=True, help="base URL of the receiving store")
    imp.add_argument("--ca", type=Path, help="CA certificate(s) that sign its certificate (PEM)")
    imp.add_argument("--insecure", action="store_true", help="do not verify its certificate")
    # 100 is the store's default max_batch_events: a larger batch is refused whole (413).
    imp.add_argument("--batch-size", type=int, default=100, help="events per POST (default 100)")
    imp.add_argument("--batch-bytes", type=int, default=4 << 20, help="bytes of events per POST (default 4 MiB)")

    rep = commands.add_parser("replay", help="re-emit stored events to an OpenLineage HTTP endpoint")
    _add_source(rep)
    rep.add_argument("--to", required=True, help="OpenLineage endpoint's base URL (Marquez, another store, ...)")
    rep.add_argument("--endpoint", default="api/v1/lineage", help="path under --to (default api/v1/lineage)")
    rep.add_argument("--to-ca", type=Path, help="CA certificate(s) of the target (PEM)")
    rep.add_argument("--to-insecure", action="store_true", help="do not verify the target's certificate")
    rep.add_argument("--rate", type=float, help="at most this many events a second")
    rep.add_argument("--checkpoint", type=Path, help="file to resume from and to save progress in")
    rep.add_argument("--restart", action="store_true", help="ignore the checkpoint file's position")
    rep.add_argument("--timeout", type=float, default=10.0, help="seconds per POST (default 10)")
    rep.add_argument("--gzip", action="store_true", help="send the events gzip-compressed")


def run(args: argparse.Namespace) -> int:
    from metastore import logs

    logs.setup(os.environ.get("METASTORE_LOG_LEVEL", "WARNING").upper())
    if args.command in ("export", "replay") and not args.source:
        print(f"metastore {args.command}: give --from URL (or set METASTORE_URL)", file=sys.stderr)
        return 2
    started = {"export": export, "import": import_, "replay": replay}[args.command]
    try:
        summary = started(args)
    except TransferError as exc:
        print(f"metastore {args.command}: {exc}", file=sys.stderr)
        return 1
    # The summary is the command's result: on stdout, or on stderr when the events go to stdout.
    out = sys.stderr if getattr(args, "output", None) == "-" else sys.stdout
    print(json.dumps(summary), file=out)
    return 0
