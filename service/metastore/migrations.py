"""`metastore db deploy|revert|verify|status`: Sqitch-style changes, applied with psycopg 3.

Each change is a triple db/deploy|revert|verify/VNNNN__name.sql. A deploy applies the pending
changes and then re-applies db/functions, all in one transaction under one advisory lock, so
concurrent runs queue instead of colliding and a failed deploy leaves nothing behind. The ledger
is metastore_migrations.schema_version, in the layout yandex-pgmigrate made (databases deployed
by earlier releases keep working). Connections are made like the service's own (psycopg 3, the
same libpq), so any connection string `serve` accepts works here too.

Every command has a connect timeout and a statement deadline; the deadline is also enforced on
the client, so a server that stops answering cannot hang a command (or a Helm hook) forever.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import psycopg

from metastore import sql
from metastore.config import check_conninfo
from metastore.ledger import changes, db_dir, describe_versions, latest_version
from metastore.pgconn import read_credentials

log = logging.getLogger("metastore.migrations")

# Exit status when the database cannot be reached in time; the CLI documents it.
EXIT_UNREACHABLE = 3
# Group role names: no quoting needed anywhere; metastore.use_group_roles checks the same.
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# The change that records the installation's group roles (metastore.group_roles).
ROLES_CHANGE = 3


class MigrationError(Exception):
    """An expected failure with a message for the operator (no traceback), and the exit status
    of the command: 1 (the database refused or failed it), or 2 (a wrong argument)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Limits:
    """How a db command connects: its deadlines, its application_name (the component, in
    pg_stat_activity), and the files holding the role's name and password, if any."""

    connect_timeout_s: int = 5
    statement_timeout_s: float = 600.0
    application_name: str = "metastore-migrate"
    user_file: Path | None = None
    password_file: Path | None = None


def _file_sql(path: Path) -> LiteralString:
    # Files of the release itself, never user input.
    text: LiteralString = path.read_text("utf-8")  # type: ignore[assignment,unused-ignore]
    return text


@contextmanager
def _deadline(seconds: float, what: str) -> Iterator[None]:
    """Exit the process when `what` takes longer than `seconds`. A paused or blackholed server
    answers neither the statement nor a cancel request; only the client can end the wait."""

    def expire() -> None:
        print(
            f"metastore: the database did not answer within {seconds:g} s ({what}); nothing was committed",
            file=sys.stderr,
            flush=True,
        )
        os._exit(EXIT_UNREACHABLE)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _connect_kwargs(dsn: str, limits: Limits) -> dict[str, Any]:
    """Defaults the connection string and the PG* variables leave open (theirs win), then what
    always holds: the command's application_name, and the credentials from files."""
    given = check_conninfo(dsn, "METASTORE_ADMIN_DATABASE_URL (or --database-url)")
    defaults: dict[str, Any] = {
        "connect_timeout": limits.connect_timeout_s,
        # Notice a peer that vanished (dropped packets) within seconds, not hours.
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
    }
    env = {"connect_timeout": "PGCONNECT_TIMEOUT"}
    kwargs = {k: v for k, v in defaults.items() if k not in given and not os.environ.get(env.get(k, ""), "")}
    kwargs["application_name"] = limits.application_name
    return kwargs | read_credentials(
        (
            ("user", "METASTORE_ADMIN_DATABASE_USER_FILE", limits.user_file),
            ("password", "METASTORE_ADMIN_DATABASE_PASSWORD_FILE", limits.password_file),
        )
    )


@contextmanager
def connect(dsn: str, limits: Limits, autocommit: bool = False) -> Iterator[psycopg.Connection[Any]]:
    """A connection with the command's deadlines: connect_timeout, and statement_timeout both
    in the server and as a client-side deadline a few seconds later."""
    kwargs = _connect_kwargs(dsn, limits)
    # libpq's connect_timeout applies per address tried; the client-side bound caps the total.
    with _deadline(limits.connect_timeout_s * 2 + 5, "connecting"):
        conn = psycopg.connect(dsn, autocommit=autocommit, **kwargs)
    try:
        ms = str(int(limits.statement_timeout_s * 1000))
        with _deadline(limits.statement_timeout_s + 5, "setting up the session"):
            conn.execute(sql.query("session_limits", "admin"), {"statement_timeout": ms})
        yield conn
    finally:
        conn.close()


def run(conn: psycopg.Connection[Any], statement: LiteralString, limits: Limits, what: str, **params: Any) -> Any:
    with _deadline(limits.statement_timeout_s + 5, what):
        return conn.execute(statement, params or None)


def applied_versions(conn: psycopg.Connection[Any], limits: Limits | None = None) -> list[int]:
    limits = limits or Limits()
    row = run(conn, sql.query("migrations_table", "admin"), limits, "reading the ledger").fetchone()
    if not row or not row[0]:
        return []
    return [r[0] for r in run(conn, sql.query("applied_versions", "admin"), limits, "reading the ledger")]


def check_role_name(name: str, setting: str) -> str:
    if not _ROLE.match(name) or name.startswith("pg_") or name == "public":
        raise ValueError(
            f"{setting}: {name!r} is not a valid group role name "
            "(1 to 63 lower-case ASCII letters, digits and _, not starting with a digit or pg_)"
        )
    return name


def default_group_roles(dbname: str) -> tuple[str, str]:
    """<dbname>_app and <dbname>_reader, made valid role names (lower case, _ for other
    characters, shortened to fit PostgreSQL's 63 bytes). A database named metastore gets
    metastore_app and metastore_reader."""
    base = re.sub(r"[^a-z0-9_]", "_", dbname.lower())
    if not re.match(r"[a-z_]", base) or base.startswith("pg_"):
        base = "_" + base
    return base[: 63 - len("_app")] + "_app", base[: 63 - len("_reader")] + "_reader"


def check_target(target: int | None, partial: bool = False) -> None:
    """A deploy goes to this release's latest change: db/functions are this release's only, and
    over an older schema they would name tables that are not there (every call failing at run
    time). `partial` lets the tests of the changes themselves step through them."""
    latest = latest_version()
    if target is None or target == latest:
        return
    if target not in {c.version for c in changes()}:
        raise MigrationError(
            f"--to {target}: this release has no change {target} (its changes are {describe_versions()}); nothing was "
            "changed",
            exit_code=2,
        )
    if not partial:
        raise MigrationError(
            f"--to {target}: this release deploys to its latest change, {latest}, only. It carries its own "
            f"functions, which need every change up to {latest}: under a schema at {target} they would fail at run "
            "time. To run an older release's schema, deploy with that release's image; to undo changes, "
            f"metastore db revert --to {target} (docs/operations.md, Rollback). Nothing was changed",
            exit_code=2,
        )


def deploy(
    dsn: str,
    target: int | None = None,
    limits: Limits | None = None,
    app_role: str | None = None,
    reader_role: str | None = None,
    partial: bool = False,
) -> list[int]:
    """Apply pending changes up to target (default: all, the only target besides the latest that
    `partial` allows), then re-apply db/functions.

    app_role and reader_role name the installation's group roles. Left out, a new installation
    derives them from the database's name (default_group_roles) and an existing one keeps the
    recorded ones (metastore.group_roles), so an upgrade never renames them."""
    for name, setting in ((app_role, "--app-role"), (reader_role, "--reader-role")):
        if name is not None:
            check_role_name(name, setting)
    limits = limits or Limits()
    known = changes()
    check_target(target, partial)
    new: list[int] = []
    with connect(dsn, limits) as conn:
        # Concurrent deploys and reverts queue here, before anything is read.
        run(conn, sql.query("advisory_lock", "admin"), limits, "waiting for the migrations lock")
        for name in ("citus_deploy_settings", "ledger_schema", "ledger_type", "ledger_table"):
            run(conn, sql.query(name, "admin"), limits, "creating the ledger")
        applied = set(applied_versions(conn, limits))
        newer = sorted(v for v in applied if v > latest_version())
        if newer:
            raise MigrationError(
                f"the database has change(s) {newer}, newer than this release's {latest_version()}: "
                "deploy the newer release, or revert with it first"
            )
        for change in known:
            if change.version in applied or (target is not None and change.version > target):
                continue
            log.info("applying %s", change.name)
            run(conn, _file_sql(change.file("deploy")), limits, f"applying {change.name}")
            run(
                conn,
                sql.query("record_version", "admin"),
                limits,
                "recording the change",
                version=change.version,
                description=change.description,
            )
            new.append(change.version)
        for path in sorted((db_dir() / "functions").glob("*.sql")):
            log.debug("applying %s", path.name)
            run(conn, _file_sql(path), limits, f"applying functions/{path.name}")
        if ROLES_CHANGE in applied or ROLES_CHANGE in new:
            row = run(conn, sql.query("group_roles_chosen", "admin"), limits, "reading the group roles").fetchone()
            if row and not row[0]:
                # A new installation (or one whose first deploy failed after the changes).
                derived = default_group_roles(conn.info.dbname)
                app_role, reader_role = app_role or derived[0], reader_role or derived[1]
            # Last, so that it moves the grants the files above made too; in their transaction.
            row = run(
                conn,
                sql.query("use_group_roles", "admin"),
                limits,
                "granting to the group roles",
                app_role=app_role,
                reader_role=reader_role,
            ).fetchone()
            if row:
                chosen = row[0]
                log.info(
                    "group roles: %s (the service's) and %s (read-only)", chosen["app_role"], chosen["reader_role"]
                )
        conn.commit()
        after = applied_versions(conn, limits)
    if new:
        log.info("deployed changes %s; the schema is at version %s", new, max(after, default=0))
    else:
        log.info("nothing to deploy: the schema is at version %s; the functions were re-applied", max(after, default=0))
    return new


def to_revert(applied: list[int], to_version: int) -> list[int]:
    return [v for v in reversed(applied) if v > to_version]


def revert(dsn: str, to_version: int, limits: Limits | None = None, expected: list[int] | None = None) -> list[int]:
    """Revert applied changes above to_version, newest first, in one transaction. With
    `expected`, refuse unless exactly those would be reverted (what the operator confirmed)."""
    limits = limits or Limits()
    reverted: list[int] = []
    by_version = {c.version: c for c in changes()}
    with connect(dsn, limits) as conn:
        run(conn, sql.query("advisory_lock", "admin"), limits, "waiting for the migrations lock")
        pending = to_revert(applied_versions(conn, limits), to_version)
        if expected is not None and pending != expected:
            raise MigrationError(f"the database changed meanwhile: would now revert {pending}, not {expected}")
        for version in pending:
            change = by_version.get(version)
            if change is None:
                raise MigrationError(f"version {version} is applied but this release has no db/revert for it")
            log.info("reverting %s", change.name)
            run(conn, _file_sql(change.file("revert")), limits, f"reverting {change.name}")
            run(conn, sql.query("forget_version", "admin"), limits, "recording the revert", version=version)
            reverted.append(version)
        conn.commit()
    return reverted


def verify(dsn: str, limits: Limits | None = None, allowed_connect: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with the database for this release: changes not deployed (or newer than
    the release), then a db/verify script for every applied change and db/verify/functions.sql.
    The roles in allowed_connect (backup, CDC, audit agents) may hold CONNECT on the database;
    anything else they hold is still reported."""
    limits = limits or Limits()
    failures: list[str] = []
    by_version = {c.version: c for c in changes()}
    with connect(dsn, limits) as conn:
        applied = applied_versions(conn, limits)
        pending = [c.name for c in changes() if c.version not in applied]
        unknown = [v for v in applied if v not in by_version]
        if not applied:
            failures.append(f"nothing is deployed: {len(pending)} change(s) pending ({', '.join(pending)})")
        elif pending:
            failures.append(f"change(s) not deployed: {', '.join(pending)}")
        if unknown:
            failures.append(f"change(s) {unknown} are applied but unknown to this release (a newer release's)")
        scripts = [by_version[v].file("verify") for v in applied if v in by_version]
        if scripts:
            scripts.append(db_dir() / "verify" / "functions.sql")
        for script in scripts:
            try:
                with conn.transaction(force_rollback=True):
                    if allowed_connect and ROLES_CHANGE in applied:
                        roles = ",".join(allowed_connect)
                        run(conn, sql.query("allowed_connect_roles", "admin"), limits, "verifying", roles=roles)
                        run(conn, sql.query("hide_allowed_connect", "admin"), limits, "verifying")
                    run(conn, _file_sql(script), limits, f"verifying {script.name}")
            except psycopg.OperationalError:
                raise  # the connection is gone: not a finding about the schema
            except psycopg.Error as exc:
                failures.append(f"{script.name}: {exc}")
            else:
                log.info("verified %s", script.name)
    return failures


def status(dsn: str, limits: Limits | None = None) -> dict[str, object]:
    limits = limits or Limits()
    with connect(dsn, limits) as conn:
        applied = applied_versions(conn, limits)
    known = [c.version for c in changes()]
    return {
        "applied": applied,
        "pending": [v for v in known if v not in applied],
        "unknown": [v for v in applied if v not in known],
        "expected_version": latest_version(),
    }
