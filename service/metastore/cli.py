"""The `metastore` command."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from metastore import config as settings
from metastore import logs, migrations, transfer

if TYPE_CHECKING:
    from sanic import Sanic

    from metastore.tlsctx import ReloadingContext

log = logging.getLogger("metastore")


def _admin_dsn(args: argparse.Namespace) -> str:
    dsn = args.database_url or os.environ.get("METASTORE_ADMIN_DATABASE_URL", "")
    if not dsn:
        raise settings.ConfigError(
            "set METASTORE_ADMIN_DATABASE_URL (or --database-url) to a role that owns the metastore schema"
        )
    return str(dsn)


def serve() -> int:
    config = settings.load()
    logs.setup(config.log_level, config.log_file)
    from metastore import dbtls, tracing

    dbtls.check(config)  # issue 13: warn, or refuse (METASTORE_DATABASE_TLS), unless sslmode=verify-full

    tracing.setup()  # before the app exists: the instrumentation patches Sanic
    from metastore.app import create_app
    from metastore.tlsctx import ReloadingContext

    tls = None
    if config.tls_cert and config.tls_key:
        # issue 13: a bad pair raises ConfigError naming the settings (exit 2, no traceback)
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
        host=config.host,
        port=config.port,
        single_process=True,
        protocol=GuardedProtocol,
        access_log=False,
        motd=False,
    )
    Sanic.serve_single(primary=app)


def db(args: argparse.Namespace) -> int:
    logs.setup(os.environ.get("METASTORE_LOG_LEVEL", "INFO").upper())
    dsn = _admin_dsn(args)
    if args.db_command == "deploy":
        app_role = args.app_role or os.environ.get("METASTORE_APP_ROLE") or None
        reader_role = args.reader_role or os.environ.get("METASTORE_READER_ROLE") or None
        try:
            for name, setting in (
                (app_role, "--app-role/METASTORE_APP_ROLE"),
                (reader_role, "--reader-role/METASTORE_READER_ROLE"),
            ):
                if name is not None:
                    migrations.check_role_name(name, setting)
        except ValueError as exc:
            raise settings.ConfigError(str(exc)) from None
        migrations.deploy(dsn, args.to, app_role=app_role, reader_role=reader_role)
        # Every deploy ends with verify: grants and privileges that drifted (a stray GRANT, a
        # database that lets every role connect) fail the deploy, and so the Helm upgrade.
        failures = migrations.verify(dsn)
        for failure in failures:
            log.error("verify failed after the deploy: %s", failure)
        return 1 if failures else 0
    if args.db_command == "revert":
        migrations.revert(dsn, args.to)
        return 0
    if args.db_command == "verify":
        failures = migrations.verify(dsn)
        for failure in failures:
            log.error("verify failed: %s", failure)
        return 1 if failures else 0
    print(json.dumps(migrations.status(dsn)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="metastore", description="Metadata Store: OpenLineage into PostgreSQL.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("serve", help="run the HTTP service (settings from METASTORE_* variables)")
    commands.add_parser("settings", help="print the settings table (Markdown)")
    db_parser = commands.add_parser("db", help="database migrations (METASTORE_ADMIN_DATABASE_URL: the owner role)")
    db_parser.add_argument("--database-url", help="connection string of the owner role")
    db_commands = db_parser.add_subparsers(dest="db_command", required=True)
    deploy = db_commands.add_parser("deploy", help="apply pending changes, re-apply db/functions, then verify")
    deploy.add_argument("--to", type=int, default=None, help="stop at this change (default: the latest)")
    deploy.add_argument(
        "--app-role",
        help="this installation's NOLOGIN group role for the service (env METASTORE_APP_ROLE; "
        "default: <database>_app on a first deploy, then the recorded one)",
    )
    deploy.add_argument(
        "--reader-role",
        help="its read-only group role (env METASTORE_READER_ROLE; default: <database>_reader, then the recorded one)",
    )
    revert = db_commands.add_parser("revert", help="revert changes newer than --to, newest first")
    revert.add_argument("--to", type=int, required=True, help="the change to keep (0 removes everything)")
    db_commands.add_parser("verify", help="check that the applied changes have the expected shape and grants")
    db_commands.add_parser("status", help="print applied and pending changes as JSON")
    transfer.add_commands(commands)  # export, import, replay
    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            return serve()
        if args.command in transfer.COMMANDS:
            return transfer.run(args)
        if args.command == "settings":
            print(settings.settings_table())
            return 0
        return db(args)
    except settings.ConfigError as exc:
        print(f"metastore: configuration error: {exc}", file=sys.stderr)
        return 2
