"""Live forwarding: every stored event, at least once and in the feed's order, to a downstream
OpenLineage HTTP endpoint (METASTORE_FORWARD_URL).

The outbox is PostgreSQL itself: the events table read in the feed's order (metastore.forward_page,
which never skips an event that commits late) and, per target, the cursor of the last event the
target answered (metastore.forward_targets). Nothing is held in memory between pages: a restart
of the service or of the receiver resumes after the stored cursor. The cursor moves only past an
event the target stored (2xx) or judged (400, 422: refused, kept in metastore.forward_refusals),
so an event may be sent twice (a crash between the answer and the cursor's update) but never
lost; OpenLineage receivers such as this store answer a duplicate with 200. Any other answer
(401, 403, 404, 408, 413, 429, 5xx, a redirect other than 307/308) or none says the target is
wrong or unwell: the event is sent again after a backoff, for as long as that lasts, and the
failure is shown (GET /api/v1/forwarding, metastore_forward_failures_total, a log line). One
replica at a time sends to a target, under a lease (metastore.forward_claim).

The target is named without credentials (outbound.target_key, metastore.forward_key): a new
password or token keeps its cursor, and nothing anyone may read shows them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import Counter, Gauge
from sanic import Request, Sanic
from sanic.response import HTTPResponse, raw

from metastore import config as settings
from metastore.db import Pool
from metastore.feed import Sequencer
from metastore.outbound import Answer, Poster, ingest_url, one_line, redact, target_key

log = logging.getLogger("metastore.forward")

LAG = Gauge(
    "metastore_forward_lag_seconds",
    "How long the oldest stored event not yet acknowledged by the target has waited (0: up to date)",
    ["target"],
)
EVENTS = Counter(
    "metastore_forward_events_total", "Events forwarded, by the target's answer", ["target", "result"]
)  # result: sent, refused, failed
FAILURES = Counter(
    "metastore_forward_failures_total",
    "Attempts to forward an event that ended without an answer judging it, by the answer (its HTTP status, "
    "or none): retried with backoff",
    ["target", "answer"],
)

PAGE = 100
# Rendered text of a page at most (and always one event): an event that prints to megabytes
# fills a page of its own.
PAGE_BYTES = 4 << 20
# Per send: this, plus a second per MiB of the event (outbound.MIN_RATE).
SEND_TIMEOUT_S = 10.0
LEASE_S = 30
IDLE_S = 1.0
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class ForwardConfig:
    url: str  # as configured, credentials included: used to send, shown nowhere
    ca: str | None
    post_url: str  # where events go: the ingest URL (credentials included)
    target: str  # the cursor's key in metastore.forward_targets, without credentials: metric labels too
    shown: str  # post_url without credentials: in logs and errors


def load(url: str, ca: Path | None) -> ForwardConfig | None:
    """METASTORE_FORWARD_URL (off when empty) and METASTORE_FORWARD_CA, as config.py read them."""
    if not url:
        return None
    shown = redact(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise settings.ConfigError(f"METASTORE_FORWARD_URL={shown!r} must be an http:// or https:// URL")
    post_url = ingest_url(url)
    return ForwardConfig(url, str(ca) if ca else None, post_url, target_key(url), redact(post_url))


class Forwarder:
    def __init__(self, db: Pool, config: ForwardConfig) -> None:
        self.db, self.config = db, config
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.poster = Poster(config.post_url, verify=config.ca or True, timeout=SEND_TIMEOUT_S)
        self.backoff = 0.0
        self.lease_until = 0.0  # monotonic: until when this forwarder surely holds the lease
        self.sequencer = Sequencer(db)

    async def run(self) -> None:
        while True:
            try:
                pause = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop must outlive any failure; it is logged and retried
                pause = self.next_backoff()
                message = self.poster.redactor.scrub(one_line(str(exc)))
                log.warning("forwarding to %s failed: %s; retrying in %.1f s", self.config.target, message, pause)
            await asyncio.sleep(pause)

    def next_backoff(self, at_least: float = 0.0) -> float:
        self.backoff = min(max(self.backoff * 2, 0.5), MAX_BACKOFF_S)
        return max(self.backoff, min(at_least, MAX_BACKOFF_S))

    async def claim(self, lease_s: int) -> Any:
        started = time.monotonic()
        claim = await self.db.one(
            "forward_claim", {"target": self.config.target, "owner": self.owner, "lease_s": lease_s}
        )
        if claim.claimed:
            self.lease_until = started + lease_s
        return claim

    async def keep_lease(self, size: int) -> bool:
        """Renew the lease when it could end before an event of `size` bytes is sent: a large event's
        send may take longer than the usual lease. False when another replica holds it now."""
        needed = self.poster.budget(size) + 10
        if self.lease_until - time.monotonic() >= needed:
            return True
        claim = await self.claim(min(3600, max(LEASE_S, math.ceil(needed + 10))))
        return bool(claim.claimed)

    async def step(self) -> float:
        """Send one page; return how long to wait before the next."""
        claim = await self.claim(LEASE_S)
        if not claim.claimed:
            return LEASE_S / 3  # another replica sends; take over if its lease expires
        await self.sequencer.run()
        rows = await self.db.call(
            "forward_page", {"cursor": claim.cursor, "limit": PAGE, "max_bytes": PAGE_BYTES}, fetch_all=True
        )
        if not rows:
            await self.record_lag()
            self.backoff = 0.0
            return IDLE_S
        sent = refused = 0
        last = None
        failure: tuple[int, Answer] | None = None
        for row in rows:
            if not await self.keep_lease(len(row.payload)):
                break  # another replica sends from the stored cursor
            answer = await asyncio.to_thread(self.poster.post, row.payload)
            if answer.verdict == "failed":
                failure = (row.event_id, answer)
                break
            if answer.verdict == "refused":
                if not await self.refused(row, answer):
                    break
                refused += 1
            else:
                sent += 1
            last = row.cursor
        return await self.ack(last, sent, refused, failure)

    async def refused(self, row: Any, answer: Answer) -> bool:
        """Keep the judged refusal (False when the lease was lost: nothing recorded)."""
        params = {
            "target": self.config.target,
            "owner": self.owner,
            "event_id": row.event_id,
            "cursor": row.cursor,
            "status": answer.status,
            "body": answer.body,
        }
        (kept,) = await self.db.one("forward_refused", params)
        if kept:
            log.warning(
                "%s refused event %d (it will never take it): %s", self.config.target, row.event_id, answer.describe()
            )
        return bool(kept)

    async def ack(self, last: str | None, sent: int, refused: int, failure: tuple[int, Answer] | None) -> float:
        target = self.config.target
        EVENTS.labels(target, "sent").inc(sent)
        EVENTS.labels(target, "refused").inc(refused)
        error = None
        if failure:
            event_id, answer = failure
            error = one_line(f"event {event_id}: {answer.describe()}")[:2000]
            EVENTS.labels(target, "failed").inc()
            FAILURES.labels(target, answer.label).inc()
        params = {
            "target": target,
            "owner": self.owner,
            "cursor": last,
            "sent": sent,
            "refused": refused,
            "error": error,
        }
        (acked,) = await self.db.one("forward_ack", params)
        if not acked:
            log.warning("lost the lease on %s: another replica sends from here", target)
        await self.record_lag()
        if failure:
            pause = self.next_backoff(failure[1].retry_after or 0.0)
            log.warning("forwarding to %s: %s; sending it again in %.1f s", target, error, pause)
            return pause
        self.backoff = 0.0
        return 0.0

    async def record_lag(self) -> None:
        for row in await self.db.call("forward_lag", {"target": self.config.target}):
            LAG.labels(self.config.target).set(row.lag_seconds)


def register(app: Sanic[Any, Any], db: Pool, settings_: settings.Config) -> None:
    """GET /api/v1/forwarding, and the forwarder when METASTORE_FORWARD_URL is set."""
    config = load(settings_.forward_url, settings_.forward_ca)
    tasks: set[asyncio.Task[None]] = set()
    forwarders: list[Forwarder] = []

    @app.get("/api/v1/forwarding")
    async def forwarding(request: Request) -> HTTPResponse:
        (status,) = await db.one("forward_status", {})
        return raw(status.encode(), content_type="application/json")

    if config is None:
        return

    @app.after_server_start
    async def start_forwarding(app: Sanic[Any, Any]) -> None:
        forwarder = Forwarder(db, config)
        forwarders.append(forwarder)
        tasks.add(asyncio.create_task(forwarder.run()))
        log.info("forwarding every stored event to %s", config.shown)

    @app.before_server_stop
    async def stop_forwarding(app: Sanic[Any, Any]) -> None:
        for task in tasks:
            task.cancel()
        for forwarder in forwarders:
            forwarder.poster.session.sockets.shut()  # a send in its thread ends now, not at its budget
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
