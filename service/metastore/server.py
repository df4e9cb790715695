"""`metastore serve`: the HTTP service, from its settings, until SIGTERM."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from metastore import config as settings

# The service's modules are imported when it starts: the other commands do not load them.
if TYPE_CHECKING:
    from sanic import Sanic

    from metastore.tlsctx import ReloadingContext

log = logging.getLogger("metastore")


def serve() -> int:
    from metastore import logs

    config = settings.load()
    logs.setup(config.log_level, config.log_file, dict(config.log_levels))
    from metastore import dbtls, tracing

    dbtls.check(config)  # warn, or refuse (METASTORE_DATABASE_TLS), unless sslmode=verify-full

    try:
        tracing.setup()  # before the app exists: the instrumentation patches Sanic
    except tracing.TracingConfigError as exc:
        raise settings.ConfigError(str(exc)) from None
    from metastore.app import create_app
    from metastore.tlsctx import ReloadingContext

    tls = None
    if config.tls_cert and config.tls_key:
        # A bad pair raises ConfigError naming the settings (exit 2, no traceback).
        tls = ReloadingContext(config.tls_cert, config.tls_key, config.tls_client_ca, config.tls_expiry_warning_days)
    else:
        log.warning("TLS is off (METASTORE_TLS=off): serving plain HTTP")
    try:
        run(create_app(config, tls), config, tls)
    finally:
        tracing.shutdown()
    return 0


def run(app: Sanic[Any, Any], config: settings.Config, tls: ReloadingContext | None) -> None:
    """Serve until SIGTERM: one process (scale out with replicas), connections bounded."""
    from sanic import Sanic

    from metastore.limits import ConnectionLimits, GuardedProtocol
    from metastore.ops import MetricsProtocol, listen

    # With TLS, the server listens in plain TCP and GuardedProtocol starts TLS on each connection
    # once it is counted (see limits.py); a client that never finishes its handshake is cut off
    # after seconds, not asyncio's default minute.
    GuardedProtocol.limits = ConnectionLimits(
        config.max_connections,
        config.request_deadline_s,
        tls.context if tls else None,
        handshake_timeout_s=min(config.request_deadline_s, 10),
    )
    app.prepare(
        sock=listen(config.host, config.port),
        single_process=True,
        protocol=GuardedProtocol,
        access_log=False,
        motd=False,
    )
    if config.metrics_port:
        # Served by ops.py's start (Sanic's own second listeners hang its shutdown).
        MetricsProtocol.limits = ConnectionLimits(8, min(config.request_deadline_s, 10))
        app.ctx.metrics_socket = listen(config.host, config.metrics_port)
    Sanic.serve_single(primary=app)
