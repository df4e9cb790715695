"""What an event is, who sent it, and what became of it: the one place events are counted.

Each event is counted once, at its final outcome: stored, duplicate or rejected as the database
judged it (record), rejected before the database saw it (refused), or accepted and then found
unstorable (unstorable)."""

from __future__ import annotations

from dataclasses import dataclass

from sanic import Request

from metastore import metrics

# (source_kind, source_principal): how the sender is known.
Source = tuple[str, str | None]
UNAUTHENTICATED: Source = ("unauthenticated", None)


@dataclass(frozen=True)
class Stored:
    status: str  # stored | duplicate | rejected
    event_id: int | None
    error_code: str | None
    error_message: str | None
    event_type: str | None


def record(result: Stored) -> None:
    """The database's judgement of one event."""
    if result.status == "rejected":
        metrics.count_event("rejected", result.error_code, result.event_type)
    else:
        metrics.count_event(result.status, None, result.event_type)


def refused(request: Request, status: int, code: str | None) -> None:
    """A request refused before the database judged its events: counted when its route carries
    events (registered with ctx_events=True) and the refusal is the client's (4xx). A 5xx is not
    an outcome: the client sends the event again."""
    route = request.route
    if status < 500 and route is not None and getattr(route.ctx, "events", False):
        metrics.count_event("rejected", code or str(status), None)


def unstorable(code: str | None) -> None:
    """An accepted event the database refused alone, kept in metastore.rejected_events."""
    metrics.count_event("unstorable", code or "XX000", None)
