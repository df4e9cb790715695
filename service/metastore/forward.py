"""Live forwarding: every stored event, at least once and in the feed's order, to a downstream
OpenLineage HTTP endpoint (METASTORE_FORWARD_URL).

The outbox is PostgreSQL itself: the events table read through the feed (metastore.read_events,
which never skips an event that commits late) and, per target, the cursor of the last event the
target answered (metastore.forward_targets). Nothing is held in memory between pages: a restart
of the service or of the receiver resumes after the stored cursor. The cursor moves only after
the target answered, so an event may be sent twice (a crash between the answer and the
cursor's update) but never lost; OpenLineage receivers such as this store answer a duplicate
with 200. One replica at a time sends to a target, under a lease (metastore.forward_claim).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client import Counter, Gauge
from sanic import Request, Sanic
from sanic.response import HTTPResponse, raw

from metastore import config as settings
from metastore.db import Pool

log = logging.getLogger("metastore.forward")

LAG = Gauge(
    "metastore_forward_lag_seconds",
    "How long the oldest stored event not yet acknowledged by the target has waited (0: up to date)",
    ["target"],
)
EVENTS = Counter(
    "metastore_forward_events_total", "Events forwarded, by the target's answer", ["target", "result"]
)  # result: sent, refused, failed

PAGE = 100
LEASE_S = 30
IDLE_S = 1.0
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class ForwardConfig:
    url: str
    ca: str | None
    target: str  # the cursor's key in metastore.forward_targets: the whole URL, credentials included
    shown: str  # the URL without its credentials: in logs, metric labels and forward_ack's errors

    def scrub(self, text: str) -> str:
        """text with the URL's password (basic auth) replaced: error messages may quote the URL."""
        password = urlsplit(self.url).password
        return text.replace(password, "***") if password else text


def without_credentials(url: str) -> str:
    """The URL without user:password@: GET /api/v1/forwarding and /metrics answer anyone."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def load(env: Any = None) -> ForwardConfig | None:
    """METASTORE_FORWARD_URL (off when unset) and METASTORE_FORWARD_CA."""
    env = os.environ if env is None else env
    url = settings._get(env, "METASTORE_FORWARD_URL")
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise settings.ConfigError(f"METASTORE_FORWARD_URL={url!r} must be an http:// or https:// URL")
    ca = settings._get(env, "METASTORE_FORWARD_CA") or None
    if ca and not os.path.isfile(ca):
        raise settings.ConfigError(f"METASTORE_FORWARD_CA={ca} is not a readable file")
    # The target's name is its URL: another URL is another downstream, with its own cursor. Its
    # credentials stay in the key (a key without them would restart forwarding from the first event).
    target = url.rstrip("/")
    return ForwardConfig(url, ca, target, without_credentials(target))


class Forwarder:
    def __init__(self, db: Pool, config: ForwardConfig) -> None:
        from metastore.transfer import make_transport

        self.db, self.config = db, config
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.transport = make_transport(config.url, verify=config.ca or True)
        self.backoff = 0.0

    async def run(self) -> None:
        while True:
            try:
                pause = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the loop must outlive any failure; it is logged and retried
                log.warning("forwarding to %s failed: %s", self.config.shown, self.config.scrub(str(exc)))
                pause = self.next_backoff()
            await asyncio.sleep(pause)

    def next_backoff(self) -> float:
        self.backoff = min(max(self.backoff * 2, 0.5), MAX_BACKOFF_S)
        return self.backoff

    async def step(self) -> float:
        """Send one page; return how long to wait before the next."""
        target, shown = self.config.target, self.config.shown
        claim = await self.db.one("forward_claim", {"target": target, "owner": self.owner, "lease_s": LEASE_S})
        if not claim.claimed:
            return LEASE_S / 3  # another replica sends; take over if its lease expires
        rows = await self.db.call("forward_page", {"limit": PAGE, "cursor": claim.cursor}, fetch_all=True)
        if not rows:
            await self.record_lag()
            self.backoff = 0.0
            return IDLE_S
        sent = refused = 0
        error = None
        last = None
        for row in rows:
            try:
                response = await asyncio.to_thread(self.transport.emit_text, row.payload)
            except Exception as exc:  # retried by the transport already
                error = self.config.scrub(f"event {row.event_id}: {exc}")
                break
            if response.status_code >= 500 or response.status_code in (408, 429):
                error = f"event {row.event_id}: {response.status_code} {response.text[:200]}"
                break
            if response.status_code >= 400:
                refused += 1  # the target will never take it: skip, do not block every event after it
                log.warning("%s refused event %d: %s", shown, row.event_id, response.text[:200])
            else:
                sent += 1
            last = row.cursor
        EVENTS.labels(shown, "sent").inc(sent)
        EVENTS.labels(shown, "refused").inc(refused)
        if error:
            EVENTS.labels(shown, "failed").inc()
            log.warning("forwarding to %s stopped: %s", shown, error)
        (acked,) = await self.db.one(
            "forward_ack",
            {"target": target, "owner": self.owner, "cursor": last, "sent": sent, "refused": refused, "error": error},
        )
        if not acked:
            log.warning("lost the lease on %s: another replica sends from here", shown)
        await self.record_lag()
        if error:
            return self.next_backoff()
        self.backoff = 0.0
        return 0.0

    async def record_lag(self) -> None:
        for row in await self.db.call("forward_lag", {"target": self.config.target}):
            LAG.labels(self.config.shown).set(row.lag_seconds)


def register(app: Sanic[Any, Any], db: Pool) -> None:
    """GET /api/v1/forwarding, and the forwarder when METASTORE_FORWARD_URL is set."""
    config = load()
    tasks: set[asyncio.Task[None]] = set()

    @app.get("/api/v1/forwarding")
    async def forwarding(request: Request) -> HTTPResponse:
        (status,) = await db.one("forward_status", {})
        return raw(status.encode(), content_type="application/json")

    if config is None:
        return

    @app.after_server_start
    async def start_forwarding(app: Sanic[Any, Any]) -> None:
        forwarder = Forwarder(db, config)
        tasks.add(asyncio.create_task(forwarder.run()))
        log.info("forwarding every stored event to %s", config.shown)

    @app.before_server_stop
    async def stop_forwarding(app: Sanic[Any, Any]) -> None:
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
