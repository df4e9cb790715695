"""The HTTP service: a thin proxy from requests to metastore.* SQL functions."""

from __future__ import annotations

import logging
import zlib
from importlib import resources
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout
from sanic import Request, Sanic
from sanic.exceptions import SanicException
from sanic.request import RequestParameters
from sanic.response import HTTPResponse, json, raw

from metastore import sql
from metastore.config import Config
from metastore.errors import ApiError, http_status

log = logging.getLogger("metastore")

App = Sanic[Any, Any]
JSON = "application/json"
# Where an event comes from; only "unauthenticated" exists until authentication does.
SOURCE_KIND = "unauthenticated"


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
    return values[0]


def _int_param(args: RequestParameters, name: str, default: int) -> int:
    value = _param(args, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"query parameter {name!r} must be a whole number, not {value!r}") from None


def create_app(config: Config, name: str = "metastore") -> App:
    app = Sanic(name)
    app.config.REQUEST_MAX_SIZE = config.max_body_bytes
    app.config.FALLBACK_ERROR_FORMAT = "json"
    app.config.KEEP_ALIVE_TIMEOUT = 75  # longer than typical client pools keep idle connections
    app.ctx.config = config

    @app.before_server_start
    async def open_pool(app: App) -> None:
        pool: AsyncConnectionPool = AsyncConnectionPool(
            config.database_url,
            min_size=config.pool_min,
            max_size=config.pool_max,
            timeout=config.pool_timeout_s,
            open=False,
            name="metastore",
            check=AsyncConnectionPool.check_connection,
            kwargs={
                "autocommit": True,  # each call is one function call, committed when it returns
                "connect_timeout": config.db_connect_timeout_s,
                "application_name": "metastore",
                "options": f"-c statement_timeout={config.db_timeout_ms}",
            },
        )
        # Start without waiting for the database: the service comes up and /readyz says when it can work.
        await pool.open(wait=False)
        app.ctx.pool = pool

    @app.after_server_stop
    async def close_pool(app: App) -> None:
        await app.ctx.pool.close()

    async def call(query: str, params: dict[str, Any]) -> tuple[Any, ...]:
        pool: AsyncConnectionPool = app.ctx.pool
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(sql.query(query), params)
                row = await cur.fetchone()
        except PoolTimeout:
            raise ApiError(503, "the database is not available; retry later") from None
        except psycopg.Error as exc:
            status = http_status(exc.sqlstate)
            if status >= 500:
                log.warning("database call %s failed: %s (%s)", query, exc.sqlstate, str(exc).strip())
                raise ApiError(
                    status, "the database could not complete the request; retry later", exc.sqlstate
                ) from None
            diag = exc.diag.message_primary or str(exc)
            raise ApiError(status, diag, exc.sqlstate) from None
        assert row is not None
        return tuple(row)

    def body_of(request: Request) -> bytes:
        return _inflate(request.body or b"", request.headers.get("content-encoding", ""), config.max_body_bytes)

    @app.post("/api/v1/lineage")
    async def post_lineage(request: Request) -> HTTPResponse:
        # Authorization, if sent, is ignored: the store has no authentication yet.
        status, event_id, error_code, error_message = await call(
            "ingest_event", {"body": body_of(request), "source_kind": SOURCE_KIND, "source_principal": None}
        )
        if status == "rejected":
            raise ApiError.from_sqlstate(error_code, error_message)
        return json({"status": status, "event_id": event_id}, status=201 if status == "stored" else 200)

    @app.post("/api/v1/lineage/batch")
    async def post_lineage_batch(request: Request) -> HTTPResponse:
        status, result = await call(
            "ingest_batch", {"body": body_of(request), "source_kind": SOURCE_KIND, "source_principal": None}
        )
        return _json_text(result, status=400 if status == "failure" else 200)

    @app.get("/api/v1/datasets")
    async def list_datasets(request: Request) -> HTTPResponse:
        args = request.args
        (page,) = await call(
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
        (dataset,) = await call(
            "get_dataset", {"id": dataset_id, "events_limit": _int_param(request.args, "events_limit", 50)}
        )
        return _json_text(dataset)

    @app.get("/api/v1/openapi.json")
    async def openapi(request: Request) -> HTTPResponse:
        return _json_text(resources.files("metastore").joinpath("openapi.json").read_text("utf-8"))

    @app.get("/healthz")
    async def healthz(request: Request) -> HTTPResponse:
        return json({"status": "ok"})

    @app.get("/readyz")
    async def readyz(request: Request) -> HTTPResponse:
        (version,) = await call("schema_version", {})
        return json({"status": "ready", "schema_version": version})

    @app.exception(ApiError)
    async def api_error(request: Request, exc: ApiError) -> HTTPResponse:
        return json(_error_body(exc.status, exc.message, exc.code, request), status=exc.status)

    @app.exception(SanicException)
    async def sanic_error(request: Request, exc: SanicException) -> HTTPResponse:
        status = getattr(exc, "status_code", 500)
        return json(_error_body(status, str(exc) or "request refused", None, request), status=status)

    @app.exception(Exception)
    async def unexpected(request: Request, exc: Exception) -> HTTPResponse:
        # The trace goes to the log, never to the client.
        log.exception("unhandled error on %s %s", request.method, request.path)
        return json(_error_body(500, "internal error", None, request), status=500)

    return app
