"""The HTTP service: a thin proxy from requests to metastore.* SQL functions.

create_app wires the parts: api.py (lineage in, datasets out), ui.py (the view), ops.py
(health, readiness, metrics, start and shutdown)."""

from __future__ import annotations

import logging
from typing import Any

from sanic import Request, Sanic
from sanic.exceptions import SanicException
from sanic.response import HTTPResponse, json

from metastore import api, feed, forward, httpguard, ingest, ops, ui
from metastore.config import Config
from metastore.db import Database
from metastore.errors import ApiError
from metastore.ingest import outcome
from metastore.limits import ByteBudget, reserve_for_small, tune_allocator
from metastore.state import Service, error_body
from metastore.tlsctx import ReloadingContext

log = logging.getLogger("metastore")

App = Sanic[Any, Any]


def create_app(config: Config, tls: ReloadingContext | None = None, name: str = "metastore") -> App:
    tune_allocator()  # freed request bodies leave the process (limits.py; docs/operations.md, "Sizing")
    # Strict request heads (httpguard.Request); JSON media type, query NULs, security headers.
    app: App = Sanic(name, configure_logging=False, request_class=httpguard.Request)
    httpguard.install(app, config)
    app.config.REQUEST_MAX_SIZE = config.max_body_bytes
    app.config.FALLBACK_ERROR_FORMAT = "json"
    app.config.KEEP_ALIVE_TIMEOUT = 75  # longer than typical client pools keep idle connections
    # Half the grace period for requests in flight, the rest for draining the async queue.
    app.config.GRACEFUL_SHUTDOWN_TIMEOUT = config.shutdown_grace_s / 2
    app.config.REQUEST_TIMEOUT = config.request_deadline_s
    app.config.RESPONSE_TIMEOUT = 30
    db = Database(config, writers=config.writers)
    budget = ByteBudget(config.max_inflight_bytes, reserve_for_small(config.max_inflight_bytes, config.max_body_bytes))
    mode = ingest.build(config, db, budget)  # sync or async, spooled or not: decided here, once
    service = Service(config=config, db=db, ingest=mode.queue, budget=budget, tls=tls)
    api.routes(app, service, mode)
    feed.register(app, db.read, config)  # GET /api/v1/events
    forward.register(app, db.writer, config)  # GET /api/v1/forwarding, and live forwarding when configured
    ui.routes(app, config)
    ops.routes(app, service)

    @app.exception(ApiError)
    async def api_error(request: Request, exc: ApiError) -> HTTPResponse:
        outcome.refused(request, exc.status, exc.code)
        return api.error_response(request, exc)

    @app.exception(SanicException)
    async def sanic_error(request: Request, exc: SanicException) -> HTTPResponse:
        status = getattr(exc, "status_code", 500)
        if status == 413:  # a body over the size limit; Sanic's other refusals are not of an event
            outcome.refused(request, status, None)
        return json(error_body(status, str(exc) or "request refused", None, request), status=status)

    @app.exception(Exception)
    async def unexpected(request: Request, exc: Exception) -> HTTPResponse:
        # The trace goes to the log, never to the client.
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json(error_body(500, "internal error", None, request), status=500)

    return app
