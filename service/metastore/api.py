"""The API: lineage in (POST, on Trino's clock), datasets, jobs and runs out (reads, on their own pool)."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote

from psycopg.types.json import Jsonb
from sanic import Request, Sanic
from sanic.request import RequestParameters
from sanic.response import HTTPResponse, json, raw

from metastore import metrics
from metastore.errors import ApiError
from metastore.ingest import Breaker, GroupCommit, Source, Stored
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


def _int_param(args: RequestParameters, name: str, default: int) -> int:
    value = _param(args, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"query parameter {name!r} must be a whole number, not {value!r}") from None


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


def routes(app: Sanic[Any, Any], svc: Service) -> None:
    config, db, ingest = svc.config, svc.db, svc.ingest
    breaker = Breaker()
    handoff_s = min(config.spool_handoff_ms, config.ingest_timeout_ms) / 1000
    group = GroupCommit(db.ingest, config.group_events, config.group_bytes, config.group_calls)

    async def read_json(query: str, params: dict[str, Any]) -> HTTPResponse:
        """A read function's one jsonb result, as PostgreSQL rendered it."""
        (document,) = await db.read.one(query, params)
        return json_text(document)

    async def body_of(request: Request, reservation: Reservation) -> bytes:
        body = await receive_body(request, reservation, config.max_body_bytes, config.request_deadline_s)
        encoding = request.headers.get("content-encoding", "")
        return await inflate(body, encoding, config.max_body_bytes, reservation)

    async def accept(request: Request, body: bytes, source: Source) -> Stored | None:
        """Store the event, or queue it (None: answered 202)."""
        if ingest is not None and config.ingest_mode == "async":
            return await ingest.submit(body, str(request.id), source)
        spooled = ingest is not None and ingest.spool is not None
        failure: ApiError
        if breaker.allow():
            try:
                # With a spool, a commit that is not there quickly is not waited for: the event waits
                # on disk for the writers, and Trino gets its 202 now instead of a 503 and a retry.
                result = await group.store(body, source, handoff_s if spooled else db.ingest.deadline_s)
            except ApiError as exc:
                breaker.done(ok=exc.status < 500)
                if exc.status < 500:
                    raise
                failure = exc
            except BaseException:
                breaker.abandon()  # cancelled (the client hung up): no outcome
                raise
            else:
                breaker.done(ok=True)
                return result
        else:
            metrics.REFUSED.labels("database_failing").inc()
            failure = ApiError(503, "the database keeps failing; retry in a second")
        if ingest is not None and spooled and await ingest.enqueue(body, str(request.id), source):
            log.warning("the database did not commit in time (%s): event spooled for the writers", failure.code)
            return None
        raise failure

    @app.post("/api/v1/lineage", stream=True)
    async def post_lineage(request: Request) -> HTTPResponse:
        # Authorization, if sent, is ignored: the store has no authentication.
        reservation = Reservation(svc.budget)
        try:
            body = await body_of(request, reservation)
            result = await accept(request, body, source_of(request))
        finally:
            reservation.release()
        if result is None:
            return json({"status": "accepted"}, status=202)
        if result.status == "rejected":
            # The reason, never the body: events can be large and hold SQL text.
            log.info("event rejected: %s %s", result.error_code, result.error_message)
            raise ApiError.from_sqlstate(result.error_code, result.error_message or "event rejected", counted=True)
        return json(
            {"status": result.status, "event_id": result.event_id}, status=201 if result.status == "stored" else 200
        )

    @app.post("/api/v1/lineage/batch", stream=True)
    async def post_lineage_batch(request: Request) -> HTTPResponse:
        reservation = Reservation(svc.budget)
        try:
            body = await body_of(request, reservation)
            kind, principal = source_of(request)
            # Nothing accepted: a client error, in the error shape every 4xx has, with the per-event reasons.
            failure = error_body(400, "no event of the batch was accepted; see failed_events", None, request)
            batch = await db.ingest.one(
                "ingest_batch",
                {"body": body, "source_kind": kind, "source_principal": principal, "on_failure": Jsonb(failure)},
            )
        finally:
            reservation.release()
        return json_text(batch.result, status=400 if batch.status == "failure" else 200)

    @app.get("/api/v1/datasets")
    async def list_datasets(request: Request) -> HTTPResponse:
        args = request.args
        return await read_json(
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

    @app.get("/api/v1/jobs")
    async def list_jobs(request: Request) -> HTTPResponse:
        args = request.args
        return await read_json(
            "list_jobs",
            {
                "limit": _int_param(args, "limit", 100),
                "cursor": _param(args, "cursor"),
                "namespace": _param(args, "namespace"),
                "q": _param(args, "q"),
                "sort": _param(args, "sort"),
                "state": _param(args, "state"),
                "user": _param(args, "user"),
            },
        )

    @app.get("/api/v1/jobs/<job_id:int>")
    async def get_job(request: Request, job_id: int) -> HTTPResponse:
        return await read_json("get_job", {"id": job_id, "runs_limit": _int_param(request.args, "runs_limit", 50)})

    @app.get("/api/v1/runs/<run_id:int>")
    async def get_run(request: Request, run_id: int) -> HTTPResponse:
        return await read_json("get_run", {"id": run_id})

    # The runs timeline, search, namespaces and field lineage: reads, each one function call.
    @app.get("/api/v1/runs")
    async def list_runs(request: Request) -> HTTPResponse:
        args = request.args
        return await read_json(
            "list_runs",
            {
                "limit": _int_param(args, "limit", 50),
                "cursor": _param(args, "cursor"),
                "state": _param(args, "state"),
                "user": _param(args, "user"),
                "source": _param(args, "source"),
                "job_namespace": _param(args, "job_namespace"),
                "dataset_id": _opt_int_param(args, "dataset_id"),
                "from": _param(args, "from"),
                "to": _param(args, "to"),
            },
        )

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
