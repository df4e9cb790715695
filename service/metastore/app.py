"""The HTTP service: a thin proxy from requests to metastore.* SQL functions."""

from __future__ import annotations

import asyncio
import json as jsonlib
import logging
import time
import zlib
from importlib import resources
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sanic import Request, Sanic
from sanic.exceptions import SanicException
from sanic.http import Http
from sanic.request import RequestParameters
from sanic.response import HTTPResponse, json, raw, redirect

from metastore import feed, forward, logs, metrics
from metastore.config import Config
from metastore.db import Database
from metastore.errors import ApiError
from metastore.ingest import SOURCE_KIND, AsyncIngest, store_now
from metastore.migrations import latest_version
from metastore.tlsctx import ReloadingContext

log = logging.getLogger("metastore")

App = Sanic[Any, Any]
JSON = "application/json"


def _inflate(body: bytes, encoding: str, limit: int) -> bytes:
    """Undo Content-Encoding, refusing anything that inflates past the body limit."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise ApiError(415, f"Content-Encoding {encoding!r} is not supported; send gzip or none")
    inflater = zlib.decompressobj(wbits=47 if encoding != "deflate" else 15)  # 47: gzip or zlib header
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ApiError(400, f"the body is not valid {encoding}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise ApiError(413, f"the body inflates to more than {limit} bytes")
    if not inflater.eof:
        raise ApiError(400, f"the {encoding} body is truncated")
    return out


def _error_body(status: int, message: str, code: str | None, request: Request | None) -> dict[str, Any]:
    error: dict[str, Any] = {"status": status, "message": message}
    if code:
        error["code"] = code
    if request is not None:
        error["request_id"] = str(request.id)
    return {"error": error}


def _json_text(text: str, status: int = 200) -> HTTPResponse:
    # Passed through as PostgreSQL rendered it: Python does not re-parse results.
    return raw(text.encode(), status=status, content_type=JSON)


def _param(args: RequestParameters, name: str) -> str | None:
    values: list[str] = args.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(400, f"query parameter {name!r} is given more than once")
    if "\x00" in values[0]:  # PostgreSQL text cannot hold it: a 400, not a failed database call
        raise ApiError(400, f"query parameter {name!r} holds a NUL character", "22P05")
    return values[0]


def _int_param(args: RequestParameters, name: str, default: int) -> int:
    value = _param(args, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"query parameter {name!r} must be a whole number, not {value!r}") from None


def create_app(config: Config, tls: ReloadingContext | None = None, name: str = "metastore") -> App:
    app: App = Sanic(name, configure_logging=False)
    app.config.REQUEST_MAX_SIZE = config.max_body_bytes
    app.config.FALLBACK_ERROR_FORMAT = "json"
    app.config.KEEP_ALIVE_TIMEOUT = 75  # longer than typical client pools keep idle connections
    # Half the grace period for requests in flight, the rest for draining the async queue.
    app.config.GRACEFUL_SHUTDOWN_TIMEOUT = config.shutdown_grace_s / 2
    app.config.REQUEST_TIMEOUT = 30
    app.config.RESPONSE_TIMEOUT = 30
    db = Database(config)
    ingest = AsyncIngest(db, config) if config.ingest_mode == "async" else None
    expected_version = latest_version()
    state: dict[str, Any] = {"draining": False, "stop_started": None}
    background: set[asyncio.Task[None]] = set()

    @app.before_server_start
    async def start(app: App) -> None:
        await db.open()
        if ingest:
            ingest.start()
        if tls and config.tls_reload_s:
            background.add(asyncio.create_task(tls.watch(config.tls_reload_s)))
        background.add(asyncio.create_task(maintain_partitions()))
        log.info(
            "serving on %s:%d (%s, ingest %s, schema version %d expected)",
            config.host,
            config.port,
            "https" if tls else "http",
            config.ingest_mode,
            expected_version,
        )

    async def maintain_partitions() -> None:
        # Daily partitions are made two weeks ahead; hourly is plenty, and a miss (database away,
        # or the function backing off from busy tables) is simply retried at the next tick.
        while True:
            try:
                (created,) = await db.one("create_partitions", {})
                if created:
                    log.info("created %d partitions ahead", created)
            except ApiError as exc:
                log.warning("creating partitions ahead failed, will retry in an hour: %s %s", exc.code, exc.message)
            await asyncio.sleep(3600)

    @app.before_server_stop
    async def begin_drain(app: App) -> None:
        # From here /readyz answers 503 so that the platform stops routing new requests here.
        state["draining"], state["stop_started"] = True, time.monotonic()
        log.info("shutting down: finishing requests in flight")

    @app.after_server_stop
    async def finish(app: App) -> None:
        # Requests are done; the pool is still open for the queue's last batches.
        if ingest:
            elapsed = time.monotonic() - (state["stop_started"] or time.monotonic())
            await ingest.drain(max(config.shutdown_grace_s - elapsed, 1.0))
        for task in background:
            task.cancel()
        await db.close()
        log.info("stopped")

    @app.on_request
    async def begin_request(request: Request) -> None:
        request.ctx.started = time.perf_counter()
        logs.request_id.set(str(request.id))

    @app.on_response  # type: ignore[untyped-decorator,unused-ignore]
    async def end_request(request: Request, response: HTTPResponse) -> None:
        route = request.route.path if request.route else "unmatched"
        started = getattr(request.ctx, "started", None)
        if started is not None:
            metrics.REQUESTS.labels(request.method, "/" + route.lstrip("/"), str(response.status)).observe(
                time.perf_counter() - started
            )
        response.headers["X-Request-ID"] = str(request.id)
        if state["draining"] and isinstance(request.stream, Http):
            # Sanic keeps serving busy keep-alive connections until its timeout; a client told
            # to close reconnects, to a replica that is not shutting down.
            request.stream.keep_alive = False

    def body_of(request: Request) -> bytes:
        return _inflate(request.body or b"", request.headers.get("content-encoding", ""), config.max_body_bytes)

    @app.post("/api/v1/lineage")
    async def post_lineage(request: Request) -> HTTPResponse:
        # Authorization, if sent, is ignored: the store has no authentication yet.
        body = body_of(request)
        metrics.EVENTS.labels("received", "", "").inc()
        if ingest:
            queued = await ingest.submit(body, str(request.id))
            if queued is None:
                return json({"status": "accepted"}, status=202)
            result = queued
        else:
            result = await store_now(db, body)
        if result.status == "rejected":
            # The reason, never the body: events can be large and hold SQL text.
            log.info("event rejected: %s %s", result.error_code, result.error_message)
            raise ApiError.from_sqlstate(result.error_code, result.error_message or "event rejected", counted=True)
        return json(
            {"status": result.status, "event_id": result.event_id}, status=201 if result.status == "stored" else 200
        )

    @app.post("/api/v1/lineage/batch")
    async def post_lineage_batch(request: Request) -> HTTPResponse:
        status, result = await db.one(
            "ingest_batch", {"body": body_of(request), "source_kind": SOURCE_KIND, "source_principal": None}
        )
        if status == "failure":
            # Nothing accepted: a client error, in the error shape every 4xx has, with the per-event reasons.
            body = jsonlib.loads(result)
            body.update(_error_body(400, "no event of the batch was accepted; see failed_events", None, request))
            return json(body, status=400)
        return _json_text(result)

    @app.get("/api/v1/datasets")
    async def list_datasets(request: Request) -> HTTPResponse:
        args = request.args
        (page,) = await db.one(
            "list_datasets",
            {
                "limit": _int_param(args, "limit", 100),
                "cursor": _param(args, "cursor"),
                "namespace": _param(args, "namespace"),
                "scheme": _param(args, "scheme"),
                "kind": _param(args, "kind"),
                "q": _param(args, "q"),
            },
        )
        return _json_text(page)

    @app.get("/api/v1/datasets/<dataset_id:int>")
    async def get_dataset(request: Request, dataset_id: int) -> HTTPResponse:
        (dataset,) = await db.one(
            "get_dataset", {"id": dataset_id, "events_limit": _int_param(request.args, "events_limit", 50)}
        )
        return _json_text(dataset)

    @app.get("/api/v1/datasets/summary")
    async def dataset_summary(request: Request) -> HTTPResponse:
        (summary,) = await db.one("dataset_summary", {})
        return _json_text(summary)

    feed.register(app, db)  # GET /api/v1/events
    forward.register(app, db)  # GET /api/v1/forwarding, and live forwarding when configured

    openapi_text = resources.files("metastore").joinpath("openapi.json").read_text("utf-8")
    ui_files = {
        name: (resources.files("metastore").joinpath("ui", name).read_bytes(), kind)
        for name, kind in (
            ("index.html", "text/html; charset=utf-8"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
        )
    }
    ui_headers = {
        # Everything comes from this server: no CDN, no inline script, nothing fetched elsewhere.
        "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }

    @app.get("/")
    async def root(request: Request) -> HTTPResponse:
        return redirect("/ui/")

    @app.get("/ui", strict_slashes=True)
    async def ui_root(request: Request) -> HTTPResponse:
        return redirect("/ui/")

    @app.get("/ui/", strict_slashes=True)
    async def ui_index(request: Request) -> HTTPResponse:
        body, kind = ui_files["index.html"]
        return raw(body, content_type=kind, headers=ui_headers)

    @app.get("/ui/<name:str>")
    async def ui_asset(request: Request, name: str) -> HTTPResponse:
        if name not in ui_files:
            raise ApiError(404, f"no such file: {name}")
        body, kind = ui_files[name]
        return raw(body, content_type=kind, headers=ui_headers)

    @app.get("/api/v1/openapi.json")
    async def openapi(request: Request) -> HTTPResponse:
        return _json_text(openapi_text)

    @app.get("/healthz")
    async def healthz(request: Request) -> HTTPResponse:
        return json({"status": "ok"})

    @app.get("/readyz")
    async def readyz(request: Request) -> HTTPResponse:
        ready, body = await readiness()
        metrics.READY.set(1 if ready else 0)
        return json(body, status=200 if ready else 503)

    async def readiness() -> tuple[bool, dict[str, Any]]:
        if state["draining"]:
            return False, {"status": "draining", "reason": "the service is shutting down"}
        try:
            # The same pool as ingest: a canary that proves requests can be served now.
            (version,) = await db.one("schema_version", {}, deadline_s=config.ready_timeout_ms / 1000)
        except ApiError as exc:
            return False, {"status": "database unavailable", "reason": exc.message}
        if version < expected_version:
            return False, {
                "status": "schema behind",
                "reason": f"the database schema is at version {version}; "
                f"this release needs {expected_version}: run metastore db deploy",
                "schema_version": version,
            }
        return True, {"status": "ready", "schema_version": version, "ingest_mode": config.ingest_mode}

    @app.get("/metrics")
    async def metrics_endpoint(request: Request) -> HTTPResponse:
        db.record_pool_stats()
        return raw(generate_latest(), content_type=CONTENT_TYPE_LATEST)

    @app.exception(ApiError)
    async def api_error(request: Request, exc: ApiError) -> HTTPResponse:
        if request.path.startswith("/api/v1/lineage") and exc.status < 500 and not exc.counted:
            metrics.count_event("rejected", exc.code or str(exc.status), None)
        return json(_error_body(exc.status, exc.message, exc.code, request), status=exc.status)

    @app.exception(SanicException)
    async def sanic_error(request: Request, exc: SanicException) -> HTTPResponse:
        status = getattr(exc, "status_code", 500)
        if request.path.startswith("/api/v1/lineage") and status == 413:
            metrics.count_event("rejected", "413", None)
        return json(_error_body(status, str(exc) or "request refused", None, request), status=status)

    @app.exception(Exception)
    async def unexpected(request: Request, exc: Exception) -> HTTPResponse:
        # The trace goes to the log, never to the client.
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json(_error_body(500, "internal error", None, request), status=500)

    return app
