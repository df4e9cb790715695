"""Operations: start and shutdown, health, readiness, metrics, request ids and the access log."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from typing import Any, ClassVar

import psycopg
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sanic import Request, Sanic
from sanic.http import Http
from sanic.response import HTTPResponse, json, raw

from metastore import dbtls, ledger, logs, metrics, pgconn
from metastore.config import Config
from metastore.db import credentials
from metastore.errors import SCHEMA_MISMATCH, ApiError
from metastore.limits import ConnectionLimits, GuardedProtocol
from metastore.state import Service, error_body

log = logging.getLogger("metastore")
access = logging.getLogger("metastore.access")


def routes(app: Sanic[Any, Any], svc: Service) -> None:
    Operations(svc).register(app)


class Operations:
    """Start and shutdown, the request hooks, /healthz, /readyz and /metrics of one service."""

    def __init__(self, svc: Service) -> None:
        self.svc, self.config, self.db, self.ingest = svc, svc.config, svc.db, svc.ingest
        self.expected_version = ledger.latest_version()
        self.database_tls = dbtls.status(dbtls.sslmode(svc.config.database_url))  # verify-full or unverified
        # The plain-HTTP metrics port, when METASTORE_METRICS_PORT is set: its server and connections.
        self.metrics_server: asyncio.Server | None = None
        self.metrics_connections: set[Any] = set()

    def register(self, app: Sanic[Any, Any]) -> None:
        app.before_server_start(self.start)
        app.before_server_stop(self.begin_drain)
        app.after_server_stop(self.finish)
        app.on_request(self.begin_request)
        app.on_response(self.end_request)  # type: ignore[no-untyped-call,unused-ignore]

        # Functions, not the bound methods: Sanic names a route after its handler.
        @app.get("/healthz")
        async def healthz(request: Request) -> HTTPResponse:
            return json({"status": "ok"})

        @app.get("/readyz")
        async def readyz(request: Request) -> HTTPResponse:
            ready, body = await self.readiness()
            metrics.READY.set(1 if ready else 0)
            return json(body, status=200 if ready else 503)

        @app.get("/metrics")
        async def metrics_endpoint(request: Request) -> HTTPResponse:
            self.db.record_pool_stats()
            metrics.QUEUE_AGE.set(self.ingest.queue.oldest_age() if self.ingest else 0.0)
            # Rendering runs in a thread: a scrape never holds the event loop.
            text = await asyncio.get_running_loop().run_in_executor(None, generate_latest)
            return raw(text, content_type=CONTENT_TYPE_LATEST)

    async def start(self, app: Sanic[Any, Any]) -> None:
        svc, config = self.svc, self.config
        await self.db.open()
        if self.ingest:
            await self.ingest.start()
        if svc.tls and config.tls_reload_s:
            svc.background.add(asyncio.create_task(svc.tls.watch(config.tls_reload_s)))
        svc.background.add(asyncio.create_task(self.maintain_partitions()))
        if self.db.replica is not None:
            svc.background.add(asyncio.create_task(self.db.replica.watch()))
        if getattr(app.ctx, "metrics_socket", None) is not None:
            self.metrics_server = await serve_metrics(app, app.ctx.metrics_socket, self.metrics_connections)
        log.info(
            "serving on %s:%d (%s, ingest %s%s, schema version %d expected)",
            config.host,
            config.port,
            "https" if svc.tls else "http",
            config.ingest_mode,
            f", spool {config.spool_dir}" if config.spool_dir else "",
            self.expected_version,
        )

    async def maintain_partitions(self) -> None:
        # Daily partitions are made two weeks ahead; hourly is plenty, and a miss (database away,
        # or the function backing off from busy tables) is simply retried at the next tick.
        while True:
            try:
                (created,) = await self.db.writer.one("ensure_partitions", {})
                if created:
                    log.info("created %d partitions ahead", created)
            except ApiError as exc:
                log.warning("creating partitions ahead failed, will retry in an hour: %s %s", exc.code, exc.message)
            for _ in range(60):  # the gauge each minute, the partitions each hour
                with contextlib.suppress(ApiError):
                    (ahead,) = await self.db.writer.one("partitions_ahead", {})
                    metrics.PARTITIONS_AHEAD.set(ahead)
                await asyncio.sleep(60)

    async def begin_drain(self, app: Sanic[Any, Any]) -> None:
        # From here /readyz answers 503 so that the platform stops routing new requests here.
        self.svc.draining, self.svc.stop_started = True, time.monotonic()
        log.info("shutting down: finishing requests in flight")

    async def finish(self, app: Sanic[Any, Any]) -> None:
        # Requests are done; the pools are still open for the queue's last batches.
        if self.ingest:
            elapsed = time.monotonic() - (self.svc.stop_started or time.monotonic())
            await self.ingest.drain(max(self.config.shutdown_grace_s - elapsed, 1.0))
        for task in self.svc.background:
            task.cancel()
        if self.metrics_server is not None:
            self.metrics_server.close()
            for connection in list(self.metrics_connections):
                connection.abort()
        await self.db.close()
        log.info("stopped")

    async def begin_request(self, request: Request) -> HTTPResponse | None:
        request.ctx.started = time.perf_counter()
        logs.request_id.set(str(request.id))
        # The plain-HTTP metrics port serves the metrics, and nothing else.
        port = request.conn_info.server_port if request.conn_info else None
        scrape = request.path == "/metrics" and request.method in ("GET", "HEAD")
        if self.config.metrics_port and port == self.config.metrics_port and not scrape:
            return json(error_body(404, "this port serves GET /metrics only", None, request), status=404)
        return None

    async def end_request(self, request: Request, response: HTTPResponse) -> None:
        route = "/" + request.route.path.lstrip("/") if request.route else "unmatched"
        started = getattr(request.ctx, "started", None)
        method = metrics.method_label(request.method)
        if started is not None:
            seconds = time.perf_counter() - started
            metrics.REQUESTS.labels(method, route, str(response.status)).observe(seconds)
            if self.config.access_log:
                access.info(
                    "%s %s %d %.1f ms",
                    method,
                    route,
                    response.status,
                    seconds * 1000,
                    extra={"fields": {"method": method, "route": route, "status": response.status}},
                )
        response.headers["X-Request-ID"] = str(request.id)
        if self.svc.draining and isinstance(request.stream, Http):
            # Sanic keeps serving busy keep-alive connections until its timeout; a client told
            # to close reconnects, to a replica that is not shutting down.
            request.stream.keep_alive = False

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        config, ingest = self.config, self.ingest
        if self.svc.draining:
            return False, {"status": "draining", "reason": "the service is shutting down"}
        try:
            version = await self.canary()
        except ApiError as exc:
            return False, _unready(exc)
        metrics.SCHEMA_VERSION.set(version)
        verdict = ledger.schema_verdict(version, self.expected_version)
        if verdict is not None:
            return False, {"status": verdict[0], "reason": verdict[1], "schema_version": version}
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
        ready: dict[str, Any] = {
            "status": "ready",
            "schema_version": version,
            "ingest_mode": config.ingest_mode,
            "database_tls": self.database_tls,
        }
        if self.db.replica is not None:
            # Reported, never a reason to be unready: the primary answers the reads meanwhile,
            # and an unready pod would stop taking events too.
            ready["read_replica"] = self.db.replica.report()
        return True, ready

    async def canary(self) -> int:
        """metastore.schema_version() on the canary's own connection. While that pool holds no
        connection (it cannot log in, or the server is away) the call could only time out, so one
        direct attempt runs alongside and says why."""
        call = asyncio.ensure_future(self.db.health.one("schema_version", {}))
        attempt = None
        if self.db.health.pool.get_stats().get("pool_available", 0) == 0:
            attempt = asyncio.ensure_future(diagnose_connection(self.config))
        try:
            if attempt is not None:
                await asyncio.wait({call, attempt}, return_when=asyncio.FIRST_COMPLETED)
                found = attempt.result() if attempt.done() else None
                if found is not None:
                    raise found  # e.g. a wrong password: no need to wait for the pool
            try:
                (version,) = await call
            except ApiError as exc:
                if attempt is not None and exc.code in (None, "57014"):
                    found = await attempt  # bounded like the call; says why the pool had nothing
                    if found is not None:
                        raise found from None
                raise
            return int(version)
        finally:
            for task in (call, attempt):
                if task is not None and not task.done():
                    task.cancel()


def _unready(exc: ApiError) -> dict[str, Any]:
    if isinstance(exc, Unready):
        return {"status": exc.readiness, "reason": exc.message}
    if exc.code in SCHEMA_MISMATCH:
        status, reason = ledger.schema_verdict(None) or ("", "")
        return {"status": status, "reason": reason}
    if exc.code == "42501":
        return {
            "status": "not permitted",
            "reason": "the service role may not call metastore.schema_version(): grant it the installation's "
            "app role (<database>_app)",
        }
    return {"status": "database unavailable", "reason": exc.message}


class Unready(ApiError):
    """Why the service cannot reach its database, with the readiness status that says so."""

    def __init__(self, readiness: str, reason: str) -> None:
        super().__init__(503, reason)
        self.readiness = readiness


async def diagnose_connection(config: Config) -> Unready | None:
    """One direct connection, made as the pools make theirs: None when it works, else why not (a
    wrong password, no CONNECT privilege, a database or host that does not exist, a refused
    connection, no answer in time)."""
    limit = config.ready_timeout_ms / 1000
    try:
        settings: dict[str, Any] = {"connect_timeout": config.db_connect_timeout_s}
        settings.update(application_name="metastore-server-health", **credentials(config))
        conn = await asyncio.wait_for(psycopg.AsyncConnection.connect(config.database_url, **settings), limit)
    except TimeoutError:
        return Unready("database unavailable", f"the database did not answer a new connection within {limit:g} s")
    except psycopg.Error as exc:
        return Unready(*pgconn.connection_failure(exc, "METASTORE_DATABASE_URL"))
    await conn.close()
    return None


def listen(host: str, port: int) -> socket.socket:
    """The listening socket. `::` takes IPv6 and IPv4 connections alike (IPV6_V6ONLY off, whatever
    the host's net.ipv6.bindv6only); where the host has no IPv6 at all, every IPv4 address."""
    if host != "::":
        from sanic.server.socket import bind_socket

        return bind_socket(host, port)
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError as exc:
        if exc.errno not in (errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT):
            raise
        log.warning("this host has no IPv6 (%s): listening on IPv4 only, 0.0.0.0:%d", exc.strerror, port)
        return listen("0.0.0.0", port)
    try:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("::", port))
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRNOTAVAIL:
            raise
        log.warning("IPv6 is disabled on this host: listening on IPv4 only, 0.0.0.0:%d", port)
        return listen("0.0.0.0", port)
    sock.listen(100)
    sock.set_inheritable(True)
    return sock


async def serve_metrics(app: Sanic[Any, Any], sock: socket.socket, connections: set[Any]) -> asyncio.Server:
    """The metrics port's server, made as Sanic makes its own (sanic.server.runners), open until
    the service has drained (its metrics are still scraped meanwhile)."""
    from functools import partial

    from sanic.models.server_types import Signal

    loop = asyncio.get_running_loop()
    protocol = partial(
        MetricsProtocol,
        loop=loop,
        connections=connections,
        signal=Signal(),
        app=app,
        state={"requests_count": 0},
        unix=None,
    )
    return await loop.create_server(protocol, sock=sock)


class MetricsProtocol(GuardedProtocol):
    """The plain-HTTP metrics port (METASTORE_METRICS_PORT): the headers' deadline of the main
    port, and a connection cap of its own (a scraper needs one or two), not counted with the
    clients' in metastore_http_connections."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits(8, 10)

    def connection_made(self, transport: Any) -> None:
        if self.limits.open >= self.limits.max_connections:
            transport.abort()
            return
        self.limits.open += 1
        self._counted = True
        self._start(transport)

    def _release(self) -> None:
        if self._counted:
            self._counted = False
            self.limits.open -= 1
