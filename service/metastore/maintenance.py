"""`metastore db retention` and `metastore db backfill`: the owner's housekeeping, run through the
admin connection of metastore.migrations (its deadlines, its credentials) but changing data, not
the schema."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from metastore import sql
from metastore.migrations import Limits, MigrationError, connect, run

log = logging.getLogger("metastore.maintenance")


def retention(dsn: str, keep: str, limits: Limits | None = None, archive_dir: Path | None = None) -> Any:
    """metastore.apply_retention as the owner: what it dropped, as it reports it. With archive_dir,
    each expiring day's events are written there first, in the same transaction (metastore.archive)."""
    limits = limits or Limits()
    if archive_dir is not None:
        from metastore import archive

        with connect(dsn, limits) as conn:
            try:
                return archive.retention(conn, lambda s, what, **p: run(conn, s, limits, what, **p), keep, archive_dir)
            except archive.ArchiveError as exc:
                raise MigrationError(str(exc)) from None
            except OSError as exc:
                raise MigrationError(f"writing the archive failed, nothing was removed: {exc}") from None
    with connect(dsn, limits, autocommit=True) as conn:
        row = run(conn, sql.query("apply_retention", "admin"), limits, "applying retention", keep=keep).fetchone()
    return row[0] if row else None


def backfill(dsn: str, sessions: int = 1, batch_size: int = 1000, limits: Limits | None = None) -> None:
    """CALL metastore.backfill in `sessions` connections at once: they share the rebuild's ranges of
    events, and the last one out finishes it (docs/operations.md, "Rebuilding the derived tables").
    Without a statement deadline, and without the client's: a rebuild takes as long as it takes."""
    limits = limits or Limits()
    errors: list[BaseException] = []
    # Every session connects before any calls: a session that came late, after the others had
    # finished, would find no rebuild under way and start another.
    connected = threading.Barrier(sessions)

    def one(number: int) -> None:
        try:
            with connect(dsn, limits, autocommit=True) as conn:
                conn.add_notice_handler(lambda d: log.info("session %d: %s", number, d.message_primary))
                conn.execute(sql.query("no_statement_timeout", "admin"))
                connected.wait()
                conn.execute(sql.query("backfill", "admin"), {"batch_size": batch_size})
        except threading.BrokenBarrierError:
            pass  # another session could not connect: its error is the one raised
        except BaseException as exc:  # re-raised below, in the caller's thread
            connected.abort()
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i + 1,), name=f"backfill-{i + 1}") for i in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
