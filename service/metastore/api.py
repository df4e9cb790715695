"""The API: lineage in (POST, on Trino's clock), datasets, jobs and runs out (reads, on their own pool)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from psycopg.types.json import Jsonb
from sanic import Request, Sanic
from sanic.http import Http
from sanic.request import RequestParameters
from sanic.response import HTTPResponse, json, raw

from metastore.errors import ApiError, whole_number
from metastore.ingest import Mode, outcome, pinned
from metastore.limits import Reservation, inflate, receive_body
from metastore.provenance import source_of
from metastore.state import Service, error_body

log = logging.getLogger("metastore")

JSON = "application/json"


def json_text(text: str, status: int = 200) -> HTTPResponse:
    # Passed through as PostgreSQL rendered it: Python does not re-parse results.
    return raw(text.encode(), status=status, content_type=JSON)


def _param(args: RequestParameters, name: str) -> str | None:
    values: list[str] = args.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise ApiError(400, f"query parameter {name!r} is given more than once")
    return values[0]


def _texts(args: RequestParameters, *names: str) -> dict[str, str | None]:
    """The text query parameters named, each None when it is not given."""
    return {name: _param(args, name) for name in names}


def _int_param(args: RequestParameters, name: str, default: int) -> int:
    value = _param(args, name)
    return default if value is None else whole_number(name, value)


def _opt_int_param(args: RequestParameters, name: str) -> int | None:
    value = _param(args, name)
    return None if value is None else _int_param(args, name, 0)


def _path_text(raw: str, what: str) -> str:
    """A percent-encoded path segment as text: UTF-8, no NUL (PostgreSQL text holds none)."""
    try:
        text = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise ApiError(400, f"the {what} in the path is not percent-encoded UTF-8", "22021") from None
    if "\x00" in text:
        raise ApiError(400, f"the {what} in the path contains a NUL character", "22021")
    return text


def error_response(request: Request, exc: ApiError) -> HTTPResponse:
    """A refusal, in the error shape every refusal has."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
    if exc.status == 503 and not exc.retry_after:
        headers["Retry-After"] = "1"
    if exc.close and isinstance(request.stream, Http):
        request.stream.keep_alive = False  # the connection cannot be reused
    return json(error_body(exc.status, exc.message, exc.code, request), status=exc.status, headers=headers)


def _answered(error: ApiError) -> ApiError:
    """The refusal without its traceback and context: they hold the frames it came through, and
    with them the body, for as long as the error lives, which after a reference cycle is until
    the collector runs. The body is counted as given back when the request ends; so it must be."""
    error.__context__ = None
    return error.with_traceback(None)


class Intake:
    """POST /api/v1/lineage and /batch: bodies received within the budget and the deadline, then
    handed to the ingest mode (metastore.ingest.modes), which stores, spools or queues them."""

    def __init__(self, svc: Service, ingest: Mode) -> None:
        self.svc, self.config, self.db, self.ingest = svc, svc.config, svc.db, ingest

    def register(self, app: Sanic[Any, Any]) -> None:
        # Functions, not the bound methods: Sanic marks a streaming handler with an attribute.
        # ctx_events: the routes whose refusals are events' outcomes (metastore.ingest.outcome).
        @app.post("/api/v1/lineage", stream=True, ctx_events=True)
        async def post_lineage(request: Request) -> HTTPResponse:
            return await self.post_lineage(request)

        @app.post("/api/v1/lineage/batch", stream=True, ctx_events=True)
        async def post_lineage_batch(request: Request) -> HTTPResponse:
            return await self.post_lineage_batch(request)

    def reservation(self) -> Reservation:
        return Reservation(self.svc.budget, self.config.large_event_bytes)

    async def body_of(self, request: Request, reservation: Reservation) -> bytes:
        """The body, inflated; refused before it is read (and before a 100 Continue) when it could
        not be taken anyway."""
        config = self.config
        await self.ingest.admit(request)
        body = await receive_body(request, reservation, config.max_body_bytes, config.request_deadline_s)
        encoding = request.headers.get("content-encoding", "")
        return await inflate(body, encoding, config.max_body_bytes, reservation)

    async def post_lineage(self, request: Request) -> HTTPResponse:
        # Authorization, if sent, is ignored: the store has no authentication.
        reservation = self.reservation()
        body = b""
        try:
            body = await self.body_of(request, reservation)
            result = await self.ingest.accept(body, str(request.id), source_of(request), reservation)
        except ApiError as exc:
            raise _answered(exc) from None
        finally:
            body = b""
            reservation.release()
        if result is None:
            return json({"status": "accepted"}, status=202)
        outcome.record(result)
        if result.status == "rejected":
            # The reason, never the body: events can be large and hold SQL text.
            log.info("event rejected: %s %s", result.error_code, result.error_message)
            # Answered here, not raised: a refusal raised is counted again (app.py).
            return error_response(
                request, ApiError.from_sqlstate(result.error_code, result.error_message or "event rejected")
            )
        return json(
            {"status": result.status, "event_id": result.event_id}, status=201 if result.status == "stored" else 200
        )

    async def post_lineage_batch(self, request: Request) -> HTTPResponse:
        reservation = self.reservation()
        body = b""
        try:
            body = await self.body_of(request, reservation)
            kind, principal = source_of(request)
            # Nothing accepted: a client error, in the error shape every 4xx has, with the per-event reasons.
            failure = error_body(400, "no event of the batch was accepted; see failed_events", None, request)
            params = {"body": body, "source_kind": kind, "source_principal": principal, "on_failure": Jsonb(failure)}
            if len(body) > self.config.large_event_bytes:
                # A large batch waits for its turn on the large events' connections, as a large event does.
                batch = await self.ingest.large_lane.call("ingest_batch", params, self.db.large.deadline_s, reservation)
            else:
                batch = await self.db.ingest.one("ingest_batch", params, on_done=pinned([reservation]))
        except ApiError as exc:
            raise _answered(exc) from None
        finally:
            body = params = b""  # type: ignore[assignment]
            reservation.release()
        return json_text(batch.result, status=400 if batch.status == "failure" else 200)


ReadJson = Callable[[str, dict[str, Any]], Awaitable[HTTPResponse]]


def routes(app: Sanic[Any, Any], svc: Service, ingest: Mode) -> None:
    db = svc.db
    Intake(svc, ingest).register(app)

    async def read_json(query: str, params: dict[str, Any]) -> HTTPResponse:
        """A read function's one jsonb result, as PostgreSQL rendered it (from the read replica
        while it is within its bound)."""
        (document,) = await db.read_one(query, params)
        return json_text(document)

    # Every read route is one named query's one call: route -> query -> function.
    _dataset_reads(app, read_json)
    _job_reads(app, read_json)
    _search_reads(app, read_json)


def _dataset_reads(app: Sanic[Any, Any], read_json: ReadJson) -> None:
    @app.get("/api/v1/datasets")
    async def list_datasets(request: Request) -> HTTPResponse:
        args = request.args
        return await read_json(
            "list_datasets",
            {
                "limit": _int_param(args, "limit", 100),
                **_texts(args, "cursor", "namespace", "scheme", "kind", "q"),
            },
        )

    @app.get("/api/v1/datasets/<dataset_id:int>")
    async def get_dataset(request: Request, dataset_id: int) -> HTTPResponse:
        return await read_json(
            "get_dataset", {"id": dataset_id, "events_limit": _int_param(request.args, "events_limit", 50)}
        )

    @app.get("/api/v1/datasets/<dataset_id:int>/lineage")
    async def dataset_lineage(request: Request, dataset_id: int) -> HTTPResponse:
        args = request.args
        return await read_json(
            "dataset_lineage",
            {
                "id": dataset_id,
                "direction": _param(args, "direction") or "both",
                "depth": _int_param(args, "depth", 3),
                "limit": _int_param(args, "limit", 200),
                "include": _param(args, "include"),
            },
        )

    @app.get("/api/v1/datasets/by-field")
    async def datasets_with_field(request: Request) -> HTTPResponse:
        return await read_json(
            "datasets_with_field",
            {"field": _param(request.args, "name"), "limit": _int_param(request.args, "limit", 100)},
        )

    @app.get("/api/v1/datasets/summary")
    async def dataset_summary(request: Request) -> HTTPResponse:
        return await read_json("dataset_summary", {})

    @app.get("/api/v1/datasets/<dataset_id:int>/runs")
    async def dataset_runs(request: Request, dataset_id: int) -> HTTPResponse:
        return await read_json("dataset_runs", {"id": dataset_id, "limit": _int_param(request.args, "limit", 20)})


def _job_reads(app: Sanic[Any, Any], read_json: ReadJson) -> None:
    @app.get("/api/v1/jobs")
    async def list_jobs(request: Request) -> HTTPResponse:
        args = request.args
        return await read_json(
            "list_jobs",
            {
                "limit": _int_param(args, "limit", 100),
                **_texts(args, "cursor", "namespace", "q", "sort", "state", "user"),
            },
        )

    @app.get("/api/v1/jobs/<job_id:int>")
    async def get_job(request: Request, job_id: int) -> HTTPResponse:
        return await read_json("get_job", {"id": job_id, "runs_limit": _int_param(request.args, "runs_limit", 50)})

    @app.get("/api/v1/runs/<run_id:int>")
    async def get_run(request: Request, run_id: int) -> HTTPResponse:
        return await read_json("get_run", {"id": run_id})

    @app.get("/api/v1/runs")
    async def list_runs(request: Request) -> HTTPResponse:
        args = request.args
        return await read_json(
            "list_runs",
            {
                "limit": _int_param(args, "limit", 50),
                **_texts(args, "cursor", "state", "user", "source", "job_namespace"),
                "dataset_id": _opt_int_param(args, "dataset_id"),
                **_texts(args, "from", "to"),
            },
        )


def _search_reads(app: Sanic[Any, Any], read_json: ReadJson) -> None:
    @app.get("/api/v1/search")
    async def search(request: Request) -> HTTPResponse:
        return await read_json(
            "search", {"q": _param(request.args, "q"), "limit": _int_param(request.args, "limit", 20)}
        )

    @app.get("/api/v1/namespaces")
    async def list_namespaces(request: Request) -> HTTPResponse:
        return await read_json("list_namespaces", {"limit": _int_param(request.args, "limit", 1000)})

    # The field name percent-encoded; "path" also takes one sent with a raw "/" in it.
    @app.get("/api/v1/datasets/<dataset_id:int>/fields/<field:path>/lineage")
    async def field_lineage(request: Request, dataset_id: int, field: str) -> HTTPResponse:
        args = request.args
        return await read_json(
            "field_lineage",
            {
                "id": dataset_id,
                "field": _path_text(field, "field name"),
                "direction": _param(args, "direction") or "both",
                "depth": _int_param(args, "depth", 3),
                "limit": _int_param(args, "limit", 200),
            },
        )
