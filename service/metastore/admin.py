"""`metastore db ...`: the owner's commands (deploy, verify, revert, status, retention, backfill,
hide, unhide), each bounded by the admin settings, failures told in words with an exit status."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

from metastore import config as settings
from metastore import ledger

if TYPE_CHECKING:
    import psycopg

    from metastore import migrations

log = logging.getLogger("metastore")


def _admin_dsn(args: argparse.Namespace, admin: settings.Admin) -> str:
    dsn = args.database_url or admin.database_url
    if not dsn:
        raise settings.ConfigError(
            "set METASTORE_ADMIN_DATABASE_URL (or --database-url) to a role that owns the metastore schema"
        )
    return str(dsn)


# pg_stat_activity's application_name of each db command: which component a session is.
_APPLICATION = {
    "retention": "metastore-retention",
    "backfill": "metastore-backfill",
    "hide": "metastore-hide",
    "unhide": "metastore-hide",
}


def _limits(args: argparse.Namespace, admin: settings.Admin) -> migrations.Limits:
    from metastore import migrations

    # Reads and checks are quick; a deploy may rewrite big tables. Both settings bound a
    # server that stops answering, on the client too.
    default_statement = 600 if args.db_command in ("deploy", "revert", "retention") else 10
    return migrations.Limits(
        connect_timeout_s=admin.connect_timeout_s,
        statement_timeout_s=admin.statement_timeout_s or default_statement,
        application_name=_APPLICATION.get(args.db_command, "metastore-migrate"),
        user_file=admin.user_file,
        password_file=admin.password_file,
    )


def _confirm_revert(dsn: str, args: argparse.Namespace, limits: migrations.Limits) -> list[int] | None:
    """What the operator agreed to revert, or None when they did not agree."""
    from metastore import migrations

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
    from metastore import logs, maintenance, migrations

    text = logs.text_wanted(args.log_format)
    admin = settings.load_admin()
    logs.setup(admin.log_level, text=text)
    dsn = _admin_dsn(args, admin)
    limits = _limits(args, admin)
    allowed = admin.allowed_connect if args.db_command in ("deploy", "verify") else ()
    if args.db_command == "deploy":
        return _deploy(dsn, args, limits, allowed, admin)
    if args.db_command == "revert":
        return _revert(dsn, args, limits)
    if args.db_command == "verify":
        failures = migrations.verify(dsn, limits, allowed)
        for failure in failures:
            log.error("verify failed: %s", failure)
        if not failures:
            log.info("verified: the database is at this release's version %s", ledger.latest_version())
        return 1 if failures else 0
    if args.db_command == "backfill":
        if args.sessions < 1 or args.batch_size < 1:
            raise settings.ConfigError("--sessions and --batch-size must be at least 1")
        maintenance.backfill(dsn, args.sessions, args.batch_size, limits)
        return 0
    if args.db_command == "retention":
        removed = maintenance.retention(dsn, args.keep, limits, args.archive)
        print(_described(removed) if text else json.dumps(removed))
        return 0
    if args.db_command in ("hide", "unhide"):
        from metastore import hiding

        answer = hiding.run(dsn, args, limits)
        print(_described(answer) if text and isinstance(answer, dict) else json.dumps(answer))
        return 0
    status = migrations.status(dsn, limits)
    print(_described(status) if text else json.dumps(status))
    return 0


def _described(result: dict[str, Any]) -> str:
    """A command's JSON result as lines for a person: `key: value`, lists as ranges or `none`."""
    lines = []
    for key, value in result.items():
        if isinstance(value, list):
            value = ", ".join(map(str, value)) if value else "none"
        lines.append(f"{key.replace('_', ' ')}: {value}")
    return "\n".join(lines)


def _deploy(
    dsn: str, args: argparse.Namespace, limits: migrations.Limits, allowed: tuple[str, ...], admin: settings.Admin
) -> int:
    from metastore import migrations

    app_role = args.app_role or admin.app_role or None
    reader_role = args.reader_role or admin.reader_role or None
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
    # Every deploy ends with verify: grants and privileges that drifted (a stray GRANT, a
    # database that lets every role connect) fail the deploy, and so the Helm upgrade.
    failures = migrations.verify(dsn, limits, allowed)
    for failure in failures:
        log.error("verify failed after the deploy: %s", failure)
    return 1 if failures else 0


def _revert(dsn: str, args: argparse.Namespace, limits: migrations.Limits) -> int:
    from metastore import migrations

    latest = ledger.latest_version()
    if args.to != 0 and args.to not in {c.version for c in ledger.changes()}:
        raise migrations.MigrationError(
            f"--to {args.to}: this release has no change {args.to} (its changes are {ledger.describe_versions()}; "
            "--to 0 reverts them all); nothing was changed",
            exit_code=2,
        )
    confirmed = _confirm_revert(dsn, args, limits)
    if confirmed is None:
        return 2
    if not confirmed:
        applied = migrations.status(dsn, limits)["applied"]
        assert isinstance(applied, list)
        log.info(
            "nothing to revert: the schema is at version %s, which --to %d keeps", max(applied, default=0), args.to
        )
        return 0
    migrations.revert(dsn, args.to, limits, expected=confirmed)
    log.info("reverted %s; the schema is at version %d", ", ".join(f"V{v:04d}" for v in confirmed), args.to)
    if args.to:
        log.warning(
            "the functions in the database are still this release's, written for version %d: deploy the release "
            "whose latest change is %d (metastore db deploy with its image) to put its own back; until then calls "
            "that need what was reverted answer 503",
            latest,
            args.to,
        )
    return 0


def database_failure(exc: psycopg.Error) -> tuple[str, int]:
    """The message and exit status of an expected database failure: no traceback."""
    import psycopg

    from metastore import migrations, pgconn

    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.errors.ConnectionTimeout):
        return (
            f"the database did not answer in time: {text} (METASTORE_ADMIN_CONNECT_TIMEOUT_S)",
            migrations.EXIT_UNREACHABLE,
        )
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None:
        if text.startswith("connection is bad:"):
            # libpq refused the connection string before any network (an invalid sslmode, ...).
            return f"the connection string is not valid: {text.removeprefix('connection is bad:').strip()}", 2
        # libpq's own words: refused, unknown host, password authentication failed,
        # role does not exist, certificate verify failed, ...
        _, reason = pgconn.connection_failure(exc, "METASTORE_ADMIN_DATABASE_URL")
        return f"cannot connect to the database: {reason}", migrations.EXIT_UNREACHABLE
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
