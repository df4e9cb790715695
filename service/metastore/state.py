"""What the routes of api.py, ops.py and ui.py share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sanic import Request

from metastore.config import Config
from metastore.db import Database
from metastore.ingest import Ingest
from metastore.limits import ByteBudget
from metastore.tlsctx import ReloadingContext


@dataclass
class Service:
    """What the routes share."""

    config: Config
    db: Database
    ingest: Ingest | None  # queue and writers: async mode, or sync mode with a spool
    budget: ByteBudget
    tls: ReloadingContext | None
    draining: bool = False
    stop_started: float | None = None
    background: set[Any] = field(default_factory=set)


def error_body(status: int, message: str, code: str | None, request: Request | None) -> dict[str, Any]:
    error: dict[str, Any] = {"status": status, "message": message}
    if code:
        error["code"] = code
    if request is not None:
        error["request_id"] = str(request.id)
    return {"error": error}
