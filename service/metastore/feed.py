"""GET /api/v1/events: the stored events, as sent, in the feed's order (metastore.read_events).

JSON pages for browsing; NDJSON (Accept: application/x-ndjson) for bulk reads: the stream is
fetched page by page, each page one short statement under the usual deadline, and written out
before the next is read, so memory holds one page whatever the size of the store. Events are
passed through as PostgreSQL rendered them: Python never parses them.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sanic import Request, Sanic
from sanic.response import HTTPResponse, raw

from metastore.arguments import FILTERS
from metastore.db import Pool
from metastore.errors import ApiError

log = logging.getLogger("metastore.feed")

NDJSON = "application/x-ndjson"
# Events per page of a stream: bounds memory (a page is held while it is written out).
STREAM_PAGE = 200


def _arg(request: Request, name: str) -> str | None:
    values: list[str] = request.args.getlist(name)
    if len(values) > 1:
        raise ApiError(400, f"query parameter {name!r} is given more than once")
    if values and "\x00" in values[0]:
        raise ApiError(400, f"query parameter {name!r} holds a NUL character, which text cannot", "22021")
    return values[0] if values else None


def _limit(request: Request, default: int | None) -> int | None:
    value = _arg(request, "limit")
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"query parameter 'limit' must be a whole number, not {value!r}") from None


def wants_ndjson(request: Request) -> bool:
    return any(part.split(";")[0].strip().lower() == NDJSON for part in request.headers.get("accept", "").split(","))


def register(app: Sanic[Any, Any], db: Pool) -> None:
    @app.get("/api/v1/events")
    async def list_events(request: Request) -> HTTPResponse | None:
        filters = {name: _arg(request, name) for name in FILTERS}
        cursor = _arg(request, "cursor")
        if wants_ndjson(request):
            await stream(request, cursor, filters)
            return None
        rows = await db.call(
            "read_events", {"limit": _limit(request, 100), "cursor": cursor, **filters}, fetch_all=True
        )
        next_cursor = rows[-1].cursor if rows else cursor
        more = bool(rows and rows[0].more)
        # The envelope is assembled around the events' text, which is passed through unparsed.
        body = "".join(
            (
                '{"events": [',
                ", ".join(row.event for row in rows),
                '], "next_cursor": ',
                json.dumps(next_cursor),
                ', "has_more": ',
                "true" if more else "false",
                "}",
            )
        )
        return raw(body.encode(), content_type="application/json")

    async def stream(request: Request, cursor: str | None, filters: dict[str, str | None]) -> None:
        total = _limit(request, None)
        if total is not None and total < 1:
            raise ApiError(400, f"limit must be at least 1, not {total}", "22023")
        page = STREAM_PAGE if total is None else min(STREAM_PAGE, total)
        # The first page is read before the response starts, so that a bad cursor or filter is
        # a 4xx with the usual error body rather than a broken stream.
        rows = await db.call("read_events", {"limit": page, "cursor": cursor, **filters}, fetch_all=True)
        response = await request.respond(content_type=NDJSON, headers={"Cache-Control": "no-store"})
        sent = 0
        while True:
            if rows:
                await response.send("".join(row.event + "\n" for row in rows))
                sent += len(rows)
                cursor = rows[-1].cursor
            if not rows or not rows[0].more or (total is not None and sent >= total):
                break
            size = STREAM_PAGE if total is None else min(STREAM_PAGE, total - sent)
            try:
                rows = await db.call("read_events", {"limit": size, "cursor": cursor, **filters}, fetch_all=True)
            except ApiError as exc:
                # The status is sent already: the last line says why the stream stops and where
                # to resume (the cursor of the last event sent).
                log.warning("event stream cut short after %d events: %s %s", sent, exc.code, exc.message)
                error = {"status": exc.status, "message": exc.message, "code": exc.code, "resume_cursor": cursor}
                await response.send(json.dumps({"error": error}) + "\n")
                break
        await response.eof()
