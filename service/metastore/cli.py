"""The `metastore` command."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

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
    try:
        levels = logs.parse_levels(os.environ.get("METASTORE_LOG_LEVELS", ""))
    except ValueError as exc:
        raise settings.ConfigError(str(exc)) from None
    logs.setup(config.log_level, config.log_file, levels)
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


def _limits(args: argparse.Namespace) -> migrations.Limits:
    # Reads and checks are quick; a deploy may rewrite big tables. Both settings bound a
    # server that stops answering, on the client too.
    default_statement = 600 if args.db_command in ("deploy", "revert", "retention") else 10
    env = os.environ
    try:
        connect = int(env.get("METASTORE_ADMIN_CONNECT_TIMEOUT_S", "").strip() or 5)
        statement = float(env.get("METASTORE_ADMIN_STATEMENT_TIMEOUT_S", "").strip() or default_statement)
    except ValueError:
        raise settings.ConfigError(
            "METASTORE_ADMIN_CONNECT_TIMEOUT_S and METASTORE_ADMIN_STATEMENT_TIMEOUT_S are whole seconds"
        ) from None
    if not (2 <= connect <= 600 and 1 <= statement <= 86_400):
        raise settings.ConfigError(
            "METASTORE_ADMIN_CONNECT_TIMEOUT_S must be 2..600 and METASTORE_ADMIN_STATEMENT_TIMEOUT_S 1..86400"
        )
    return migrations.Limits(connect_timeout_s=connect, statement_timeout_s=statement)


def _confirm_revert(dsn: str, args: argparse.Namespace, limits: migrations.Limits) -> list[int] | None:
    """What the operator agreed to revert, or None when they did not agree."""
    status = migrations.status(dsn, limits)
    applied = status["applied"]
    assert isinstance(applied, list)
    doomed = migrations.to_revert(applied, args.to)
    if not doomed:
        return doomed
    what = ", ".join(f"V{v:04d}" for v in doomed)
    warning = f"reverting {what} drops what these changes hold"
    if args.to == 0:
        warning += " (--to 0 drops the schema metastore with every event and dataset)"
    if args.yes:
        log.warning("%s; confirmed with --yes", warning)
        return doomed
    if sys.stdin.isatty() and sys.stderr.isatty():
        print(f"{warning}. Take a backup first. Type 'revert' to go on: ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip() == "revert":
            return doomed
        print("metastore: not confirmed; nothing was changed", file=sys.stderr)
        return None
    print(f"metastore: {warning}; rerun with --yes to confirm (nothing was changed)", file=sys.stderr)
    return None


def db(args: argparse.Namespace) -> int:
    logs.setup(os.environ.get("METASTORE_LOG_LEVEL", "INFO").upper())
    dsn = _admin_dsn(args)
    limits = _limits(args)
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
        migrations.deploy(dsn, args.to, limits, app_role=app_role, reader_role=reader_role)
        if args.to is not None:
            return 0  # a partial deploy (a rollback's first step) is not the release's shape
        # Every deploy ends with verify: grants and privileges that drifted (a stray GRANT, a
        # database that lets every role connect) fail the deploy, and so the Helm upgrade.
        failures = migrations.verify(dsn, limits)
        for failure in failures:
            log.error("verify failed after the deploy: %s", failure)
        return 1 if failures else 0
    if args.db_command == "revert":
        confirmed = _confirm_revert(dsn, args, limits)
        if confirmed is None:
            return 2
        if confirmed:
            migrations.revert(dsn, args.to, limits, expected=confirmed)
        return 0
    if args.db_command == "verify":
        failures = migrations.verify(dsn, limits)
        for failure in failures:
            log.error("verify failed: %s", failure)
        if not failures:
            log.info("verified: the database is at this release's version %s", migrations.latest_version())
        return 1 if failures else 0
    if args.db_command == "backfill":
        if args.sessions < 1 or args.batch_size < 1:
            raise settings.ConfigError("--sessions and --batch-size must be at least 1")
        migrations.backfill(dsn, args.sessions, args.batch_size, limits)
        return 0
    if args.db_command == "retention":
        print(json.dumps(migrations.retention(dsn, args.keep, limits, args.archive)))
        return 0
    print(json.dumps(migrations.status(dsn, limits)))
    return 0


def _database_failure(exc: psycopg.Error) -> tuple[str, int]:
    """The message and exit status of an expected database failure: no traceback."""
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.errors.ConnectionTimeout):
        return (
            f"the database did not answer in time: {text} (METASTORE_ADMIN_CONNECT_TIMEOUT_S)",
            migrations.EXIT_UNREACHABLE,
        )
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        # libpq's own words: refused, unknown host, password authentication failed,
        # role does not exist, certificate verify failed, ...
        return f"cannot connect to the database: {text}", migrations.EXIT_UNREACHABLE
    if exc.sqlstate in ("28000", "28P01", "3D000"):
        return f"the database refused the login: {text}", migrations.EXIT_UNREACHABLE
    hint = ""
    if exc.sqlstate == "42501":
        hint = " (db commands run as the role that owns the metastore schema: METASTORE_ADMIN_DATABASE_URL)"
    if exc.sqlstate == "55P03":
        hint = " (the tables stayed locked by a long transaction: run it again later)"
    if exc.sqlstate == "57014":
        hint = " (METASTORE_ADMIN_STATEMENT_TIMEOUT_S)"
    return f"database error {exc.sqlstate}: {text}{hint}", 1


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
    revert.add_argument("--yes", action="store_true", help="confirm a revert without asking (no terminal, e.g. a Job)")
    db_commands.add_parser(
        "verify", help="fail unless every change of this release is deployed with the expected shape and grants"
    )
    db_commands.add_parser("status", help="print applied and pending changes as JSON")
    retention = db_commands.add_parser(
        "retention", help="forget events older than --keep (metastore.apply_retention); prints what it dropped"
    )
    retention.add_argument("--keep", default="90 days", help="a PostgreSQL interval, at least 1 day (default: 90 days)")
    retention.add_argument(
        "--archive",
        type=Path,
        help="first write each expiring day's events to a gzip NDJSON file with a manifest in this directory "
        "(what `metastore import` reads back)",
    )
    rebuild = db_commands.add_parser(
        "backfill", help="rebuild the derived tables from the stored events while ingest goes on (metastore.backfill)"
    )
    rebuild.add_argument("--sessions", type=int, default=1, help="database sessions sharing the work (default 1)")
    rebuild.add_argument("--batch-size", type=int, default=1000, help="events per transaction, at most 1000 (default)")
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
    except migrations.MigrationError as exc:
        print(f"metastore: {exc}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:
        message, code = _database_failure(exc)
        print(f"metastore: {message}", file=sys.stderr)
        return code
