"""Operations: start and shutdown, health, readiness, metrics, request ids and the access log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sanic import Request, Sanic
from sanic.http import Http
from sanic.response import HTTPResponse, json, raw

from metastore import dbtls, logs, metrics
from metastore.errors import ApiError
from metastore.migrations import latest_version
from metastore.state import Service

log = logging.getLogger("metastore")
access = logging.getLogger("metastore.access")


def routes(app: Sanic[Any, Any], svc: Service) -> None:
    config, db, ingest = svc.config, svc.db, svc.ingest
    expected_version = latest_version()
    database_tls = dbtls.status(dbtls.sslmode(config.database_url))  # verify-full or unverified

    @app.before_server_start
    async def start(app: Sanic[Any, Any]) -> None:
        await db.open()
        if ingest:
            await ingest.start()
        if svc.tls and config.tls_reload_s:
            svc.background.add(asyncio.create_task(svc.tls.watch(config.tls_reload_s)))
        svc.background.add(asyncio.create_task(maintain_partitions()))
        log.info(
            "serving on %s:%d (%s, ingest %s%s, schema version %d expected)",
            config.host,
            config.port,
            "https" if svc.tls else "http",
            config.ingest_mode,
            f", spool {config.spool_dir}" if config.spool_dir else "",
            expected_version,
        )

    async def maintain_partitions() -> None:
        # Daily partitions are made two weeks ahead; hourly is plenty, and a miss (database away,
        # or the function backing off from busy tables) is simply retried at the next tick.
        while True:
            try:
                (created,) = await db.writer.one("ensure_partitions", {})
                if created:
                    log.info("created %d partitions ahead", created)
            except ApiError as exc:
                log.warning("creating partitions ahead failed, will retry in an hour: %s %s", exc.code, exc.message)
            for _ in range(60):  # the gauge each minute, the partitions each hour
                with contextlib.suppress(ApiError):
                    (ahead,) = await db.writer.one("partitions_ahead", {})
                    metrics.PARTITIONS_AHEAD.set(ahead)
                await asyncio.sleep(60)

    @app.before_server_stop
    async def begin_drain(app: Sanic[Any, Any]) -> None:
        # From here /readyz answers 503 so that the platform stops routing new requests here.
        svc.draining, svc.stop_started = True, time.monotonic()
        log.info("shutting down: finishing requests in flight")

    @app.after_server_stop
    async def finish(app: Sanic[Any, Any]) -> None:
        # Requests are done; the pools are still open for the queue's last batches.
        if ingest:
            elapsed = time.monotonic() - (svc.stop_started or time.monotonic())
            await ingest.drain(max(config.shutdown_grace_s - elapsed, 1.0))
        for task in svc.background:
            task.cancel()
        await db.close()
        log.info("stopped")

    @app.on_request
    async def begin_request(request: Request) -> None:
        request.ctx.started = time.perf_counter()
        logs.request_id.set(str(request.id))

    @app.on_response  # type: ignore[untyped-decorator,unused-ignore]
    async def end_request(request: Request, response: HTTPResponse) -> None:
        route = "/" + request.route.path.lstrip("/") if request.route else "unmatched"
        started = getattr(request.ctx, "started", None)
        method = metrics.method_label(request.method)
        if started is not None:
            seconds = time.perf_counter() - started
            metrics.REQUESTS.labels(method, route, str(response.status)).observe(seconds)
            if config.access_log:
                access.info(
                    "%s %s %d %.1f ms",
                    method,
                    route,
                    response.status,
                    seconds * 1000,
                    extra={"fields": {"method": method, "route": route, "status": response.status}},
                )
        response.headers["X-Request-ID"] = str(request.id)
        if svc.draining and isinstance(request.stream, Http):
            # Sanic keeps serving busy keep-alive connections until its timeout; a client told
            # to close reconnects, to a replica that is not shutting down.
            request.stream.keep_alive = False

    @app.get("/healthz")
    async def healthz(request: Request) -> HTTPResponse:
        return json({"status": "ok"})

    @app.get("/readyz")
    async def readyz(request: Request) -> HTTPResponse:
        ready, body = await readiness()
        metrics.READY.set(1 if ready else 0)
        return json(body, status=200 if ready else 503)

    async def readiness() -> tuple[bool, dict[str, Any]]:
        if svc.draining:
            return False, {"status": "draining", "reason": "the service is shutting down"}
        try:
            # A connection of its own: busy ingest or reads cannot make the canary fail.
            (version,) = await db.health.one("schema_version", {})
        except ApiError as exc:
            return False, await _unready(exc)
        metrics.SCHEMA_VERSION.set(version)
        if version < expected_version:
            return False, {
                "status": "schema behind",
                "reason": f"the database schema is at version {version}; "
                f"this release needs {expected_version}: run metastore db deploy",
                "schema_version": version,
            }
        stuck = ingest.stuck_for() if ingest else 0.0
        if stuck > config.writer_stuck_s:
            return False, {
                "status": "writers stuck",
                "reason": f"{len(ingest.queue) if ingest else 0} accepted events wait and nothing was stored "
                f"for {stuck:.0f} s (METASTORE_WRITER_STUCK_S={config.writer_stuck_s})",
                "schema_version": version,
            }
        spool_failure = await ingest.spool.unwritable() if ingest and ingest.spool else None
        if spool_failure:
            return False, {"status": "spool unwritable", "reason": spool_failure, "schema_version": version}
        return True, {
            "status": "ready",
            "schema_version": version,
            "ingest_mode": config.ingest_mode,
            "database_tls": database_tls,
        }

    async def _unready(exc: ApiError) -> dict[str, Any]:
        if exc.code in ("3F000", "42883", "42P01"):
            return {
                "status": "schema not deployed",
                "reason": "metastore.schema_version() is missing: run metastore db deploy",
            }
        if exc.code == "42501":
            return {
                "status": "not permitted",
                "reason": "the service role may not call metastore.schema_version(): grant it metastore_app",
            }
        if exc.code is None:
            return {"status": "database unavailable", "reason": await _diagnose() or exc.message}
        return {"status": "database unavailable", "reason": exc.message}

    async def _diagnose() -> str | None:
        # The pool only says it has no connection; one direct attempt says why (wrong password, ...).
        try:
            conn = await asyncio.wait_for(
                psycopg.AsyncConnection.connect(config.database_url, connect_timeout=config.db_connect_timeout_s),
                config.ready_timeout_ms / 1000,
            )
        except TimeoutError:
            return f"the database did not answer within {config.ready_timeout_ms} ms"
        except psycopg.Error as exc:
            return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        await conn.close()
        return None

    @app.get("/metrics")
    async def metrics_endpoint(request: Request) -> HTTPResponse:
        db.record_pool_stats()
        metrics.QUEUE_AGE.set(ingest.queue.oldest_age() if ingest else 0.0)
        # Rendering runs in a thread: a scrape never holds the event loop.
        text = await asyncio.get_running_loop().run_in_executor(None, generate_latest)
        return raw(text, content_type=CONTENT_TYPE_LATEST)
