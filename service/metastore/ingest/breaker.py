"""The ingest circuit breaker: sync requests stop waiting out the budget while the store is in trouble."""

from __future__ import annotations

import time

from metastore import metrics
from metastore.errors import ApiError


class Breaker:
    """Stops sync requests from each waiting out the budget while the store is in trouble, and
    only then: one event's cost never opens it.

    A failure counts when the database answered no ingest call between the request's start and
    its failure (it answers nobody: down, frozen, locked, out of connections), never when a large
    event missed its deadline (its own cost, paid in its own lane: LargeLane). After `threshold`
    such failures in a row it opens for `cooldown_s`: requests then skip the database (spooled, or
    a 503 at once) except one probe at a time. Any answer of the database (an event stored, or
    refused for its content) closes it. So a burst of queries meets a broken database in
    milliseconds, not budget after budget queued behind Trino's five connections, and two senders
    of events that can never be stored in time cannot make it refuse everyone else."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 1.0) -> None:
        self.threshold, self.cooldown_s = threshold, cooldown_s
        self._failures = 0
        self._open_until = 0.0
        self._probing = False
        self._answered_at = float("-inf")  # time.monotonic() of the database's last answer

    def allow(self) -> bool:
        """May this request try the database? (Report its outcome: answered, failed or abandon.)"""
        if self._failures < self.threshold:
            return True
        if time.monotonic() >= self._open_until and not self._probing:
            self._probing = True  # half-open: this one request finds out
            return True
        return False

    def refusing(self) -> bool:
        """Would allow() refuse now? Asks without taking the probe."""
        return self._failures >= self.threshold and (self._probing or time.monotonic() < self._open_until)

    def abandon(self) -> None:
        """The request that was let through ended without an outcome (its client left): another
        may probe. Without this, a probe cancelled mid-call kept the breaker open for good."""
        self._probing = False

    def answered(self) -> None:
        """The database answered: the event was stored, or refused for what it holds."""
        self._answered_at = time.monotonic()
        self._probing = False
        if self._failures:
            self._failures = 0
            metrics.BREAKER_OPEN.set(0)

    def answered_since(self, started: float) -> bool:
        """Did the database answer any ingest call since `started` (time.monotonic())?"""
        return self._answered_at >= started

    def failed(self, started: float, error: ApiError, large: bool = False) -> None:
        """A request that began at `started` (time.monotonic()) failed with a 5xx."""
        self._probing = False
        if large and error.code == "57014":
            return  # the event's own cost: it was alone in its lane
        if self._answered_at >= started:
            return  # others were answered meanwhile: not the store's trouble
        self._failures += 1
        if self._failures >= self.threshold:
            self._open_until = time.monotonic() + self.cooldown_s
            metrics.BREAKER_OPEN.set(1)
