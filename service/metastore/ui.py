"""The datasets and jobs views: static files served by the service itself."""

from __future__ import annotations

from importlib import resources
from typing import Any

from sanic import Request, Sanic
from sanic.response import HTTPResponse, raw, redirect

from metastore import httpguard
from metastore.config import Config
from metastore.errors import ApiError

_FILES = (
    ("index.html", "text/html; charset=utf-8"),
    ("app.js", "text/javascript; charset=utf-8"),
    ("router.js", "text/javascript; charset=utf-8"),
    ("dom.js", "text/javascript; charset=utf-8"),
    ("datasets.js", "text/javascript; charset=utf-8"),
    ("jobs.js", "text/javascript; charset=utf-8"),
    ("lineage.js", "text/javascript; charset=utf-8"),
    ("queries.js", "text/javascript; charset=utf-8"),
    ("search.js", "text/javascript; charset=utf-8"),
    ("style.css", "text/css; charset=utf-8"),
    ("favicon.svg", "image/svg+xml"),
)


def _to_the_view() -> HTTPResponse:
    # Relative, so a proxy that serves the store under a path prefix keeps it (`/` and `/ui` both
    # resolve `ui/` to the view), and not marked as HTML: Cockpit's proxy rewrites the Location
    # of non-HTML responses only (into its own prefix, which comes to the same URL).
    return redirect("ui/", content_type="text/plain; charset=utf-8")


def routes(app: Sanic[Any, Any], config: Config) -> None:
    headers = {
        "Content-Security-Policy": httpguard.ui_csp(config),  # with frame-ancestors for Cockpit
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    files = {name: (resources.files("metastore").joinpath("ui", name).read_bytes(), kind) for name, kind in _FILES}
    openapi = resources.files("metastore").joinpath("openapi.json").read_bytes()

    @app.get("/")
    async def root(request: Request) -> HTTPResponse:
        return _to_the_view()

    @app.get("/ui", strict_slashes=True)
    async def ui_root(request: Request) -> HTTPResponse:
        return _to_the_view()

    @app.get("/ui/", strict_slashes=True)
    async def ui_index(request: Request) -> HTTPResponse:
        body, kind = files["index.html"]
        return raw(body, content_type=kind, headers=headers)

    @app.get("/ui/<name:str>")
    async def ui_asset(request: Request, name: str) -> HTTPResponse:
        if name not in files:
            raise ApiError(404, f"no such file: {name}")
        body, kind = files[name]
        return raw(body, content_type=kind, headers=headers)

    @app.get("/api/v1/openapi.json")
    async def openapi_document(request: Request) -> HTTPResponse:
        return raw(openapi, content_type="application/json")
