"""The service with one more route, POST /api/v1/noop (reads the body, answers 204, touches no
database): the HTTP floor the benchmark compares ingest against, on the same server."""

from __future__ import annotations

from sanic import Request
from sanic.response import HTTPResponse, empty

from metastore import config as settings
from metastore import logs, tracing
from metastore.app import create_app
from metastore.server import run
from metastore.tlsctx import ReloadingContext


def main() -> int:
    config = settings.load()
    logs.setup(config.log_level, config.log_file)
    tracing.setup()
    tls = ReloadingContext(config.tls_cert, config.tls_key) if config.tls_cert and config.tls_key else None
    app = create_app(config, tls)

    @app.post("/api/v1/noop")
    async def noop(request: Request) -> HTTPResponse:
        return empty(status=204)

    run(app, config, tls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
