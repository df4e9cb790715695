"""`metastore db retention --archive DIR`: each expiring day's events written to a file before
retention removes them, in one transaction with the removal.

Files are what `metastore export` writes (NDJSON lines of the event feed, gzip) and `metastore
import` reads back; each has a manifest beside it (`<name>.manifest.json`: the day, the count, the
first and last event id, the file's size and sha256). The transaction locks the expiring
partitions against writes (metastore.expiring_days), writes and syncs every day's file, then calls
metastore.apply_retention and compares the events it removed with those archived: any difference
(an event stored into the default partition for an old day meanwhile) rolls everything back, and
the files of the run are deleted. So a day is gone from the store only once its file is on disk.

The admin side (the owner's connection) does it, not the service: only the owner may remove
events, and only a read in the removing transaction can prove that the file holds every event
removed; the feed, read over HTTP beforehand, could not.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from metastore import sql

log = logging.getLogger("metastore.archive")

FORMAT = "metastore-archive/1"
MANIFEST_SUFFIX = ".manifest.json"
PAGE = 1000

Run = Callable[..., Any]  # migrations.run bound to a connection's limits


class ArchiveError(Exception):
    """The archive could not be made; nothing was removed."""


@dataclass
class DayFile:
    day: date
    path: Path
    manifest: Path
    events: int
    first_id: int | None
    last_id: int | None


def _query(name: str) -> LiteralString:
    return sql.query(name, "admin")


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_day(run: Run, directory: Path, stamp: str, day: date, time_from: datetime, time_to: datetime) -> DayFile:
    name = f"events-{day.isoformat()}-{stamp}.ndjson.gz"
    path, manifest = directory / name, directory / (name + MANIFEST_SUFFIX)
    digest, size, count, first, last, after = hashlib.sha256(), 0, 0, None, None, 0

    class Hashing:
        """The gzip stream's bytes, hashed and counted as they are written."""

        def __init__(self, raw: Any) -> None:
            self.raw = raw

        def write(self, data: bytes) -> int:
            nonlocal size
            digest.update(data)
            size += len(data)
            return int(self.raw.write(data))

        def flush(self) -> None:
            self.raw.flush()

    with open(path, "xb") as raw:
        # mtime 0 and no name in the header: the same events give the same bytes.
        with gzip.GzipFile(filename="", fileobj=Hashing(raw), mode="wb", compresslevel=6, mtime=0) as out:
            while True:
                rows = run(
                    _query("archive_page"),
                    f"archiving {day}",
                    time_from=time_from,
                    time_to=time_to,
                    after=after,
                    limit=PAGE,
                ).fetchall()
                for event_id, line in rows:
                    out.write(line.encode("utf-8") + b"\n")
                    first = event_id if first is None else first
                    last = after = event_id
                count += len(rows)
                if len(rows) < PAGE:
                    break
        raw.flush()
        os.fsync(raw.fileno())
    if count == 0:
        # A day made ahead that no event reached: nothing to keep.
        path.unlink()
        return DayFile(day, path, manifest, 0, None, None)
    record = {
        "format": FORMAT,
        "day": day.isoformat(),
        "event_time_from": time_from.isoformat(),
        "event_time_to": time_to.isoformat(),
        "events": count,
        "first_id": first,
        "last_id": last,
        "file": name,
        "bytes": size,
        "sha256": digest.hexdigest(),
    }
    with open(manifest, "x", encoding="utf-8") as f:
        f.write(json.dumps(record, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    log.info("archived %s: %d events in %s", day, count, path)
    return DayFile(day, path, manifest, count, first, last)


def retention(conn: psycopg.Connection[Any], run: Run, keep: str, directory: Path) -> dict[str, Any]:
    """In the connection's transaction (not autocommit): archive, remove, compare, commit."""
    if not directory.is_dir():
        raise ArchiveError(f"--archive {directory}: not a directory")
    written: list[DayFile] = []
    try:
        run(_query("archive_session"), "starting the archive")
        stamp = run(_query("archive_stamp"), "starting the archive").fetchone()[0]
        days = run(_query("expiring_days"), "locking the expiring days", keep=keep).fetchall()
        for day, time_from, time_to in days:
            written.append(_write_day(run, directory, stamp, day, time_from, time_to))
        _sync_dir(directory)
        result: dict[str, Any] = run(_query("apply_retention"), "applying retention", keep=keep).fetchone()[0]
        archived = sum(f.events for f in written)
        if result["events_removed"] != archived:
            raise ArchiveError(
                f"retention would remove {result['events_removed']} events but {archived} were archived "
                "(events were stored for an expiring day meanwhile): nothing was removed; run it again"
            )
        conn.commit()
    except BaseException:
        conn.rollback()
        for f in written:
            for p in (f.manifest, f.path):
                p.unlink(missing_ok=True)
        raise
    result["archived"] = [
        {"day": f.day.isoformat(), "events": f.events, "file": str(f.path), "manifest": str(f.manifest)}
        for f in written
        if f.events
    ]
    return result


def verify(manifest_path: Path) -> tuple[Path, int]:
    """The archive file a manifest describes, checked against it (size, sha256, then the number of
    lines); its path and event count. Raises ArchiveError naming what differs."""
    try:
        record = json.loads(manifest_path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ArchiveError(f"{manifest_path}: not a readable archive manifest: {exc}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ArchiveError(f"{manifest_path}: not a manifest of {FORMAT}")
    data = manifest_path.parent / str(record.get("file", ""))
    if Path(str(record.get("file", ""))).name != record.get("file") or not data.is_file():
        raise ArchiveError(f"{manifest_path}: its file {record.get('file')!r} is not beside it")
    digest, size = hashlib.sha256(), 0
    with open(data, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    if size != record.get("bytes") or digest.hexdigest() != record.get("sha256"):
        raise ArchiveError(
            f"{data}: sha256 {digest.hexdigest()} ({size} bytes) is not the manifest's {record.get('sha256')} "
            f"({record.get('bytes')} bytes): the file is damaged or not the one archived"
        )
    with gzip.open(data, "rb") as f:
        lines = sum(1 for line in f if line.strip())
    if lines != record.get("events"):
        raise ArchiveError(f"{data}: {lines} events, the manifest says {record.get('events')}")
    return data, lines


def manifest_of(path: Path) -> Path | None:
    """The manifest of an archive file, when it has one beside it."""
    candidate = path.with_name(path.name + MANIFEST_SUFFIX)
    return candidate if candidate.is_file() else None
