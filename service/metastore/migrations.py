"""`metastore db deploy|revert|verify|status`: Sqitch-style changes applied with pgmigrate.

Each change is a triple db/deploy|revert|verify/VNNNN__name.sql. pgmigrate applies
deploys (it knows no revert or verify); db/functions/*.sql is re-applied after every
deploy, whether or not a change was pending. Deploys and reverts take one advisory
lock, so concurrent runs queue instead of colliding.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import LiteralString

import psycopg

from metastore import sql

log = logging.getLogger("metastore.migrations")
_VERSION = re.compile(r"^V(\d+)__.+\.sql$")
# Group role names: no quoting needed anywhere; metastore.use_group_roles checks the same.
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# The change that records the installation's group roles (metastore.group_roles).
ROLES_CHANGE = 3


def db_dir() -> Path:
    """db/ of a source checkout, or the copy packaged inside the wheel."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "db", here.parent.parent / "db"):
        if (candidate / "deploy").is_dir():
            return candidate
    raise FileNotFoundError("no db/ directory beside the package or in the source checkout")


@dataclass(frozen=True)
class Change:
    version: int
    name: str

    def file(self, kind: str) -> Path:
        return db_dir() / kind / self.name


def changes() -> list[Change]:
    found: dict[int, Change] = {}
    for path in sorted((db_dir() / "deploy").glob("V*.sql")):
        match = _VERSION.match(path.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise ValueError(f"two changes have version {version}: {found[version].name}, {path.name}")
        found[version] = Change(version, path.name)
    return [found[v] for v in sorted(found)]


def latest_version() -> int:
    return max((c.version for c in changes()), default=0)


def _file_sql(path: Path) -> LiteralString:
    # Files of the release itself, never user input.
    text: LiteralString = path.read_text("utf-8")  # type: ignore[assignment,unused-ignore]
    return text


def applied_versions(conn: psycopg.Connection) -> list[int]:
    row = conn.execute(sql.query("migrations_table", "admin")).fetchone()
    if not row or not row[0]:
        return []
    return [r[0] for r in conn.execute(sql.query("applied_versions", "admin"))]


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


def deploy(
    dsn: str, target: int | None = None, app_role: str | None = None, reader_role: str | None = None
) -> list[int]:
    """Apply pending changes up to target (default: all), then re-apply db/functions.

    app_role and reader_role name the installation's group roles. Left out, a new installation
    derives them from the database's name (default_group_roles) and an existing one keeps the
    recorded ones (metastore.group_roles), so an upgrade never renames them."""
    for name, setting in ((app_role, "--app-role"), (reader_role, "--reader-role")):
        if name is not None:
            check_role_name(name, setting)
    import pgmigrate
    import sqlparse.engine.grouping

    # pgmigrate's own CLI lifts sqlparse's limits for long files; its API does not.
    sqlparse.engine.grouping.MAX_GROUPING_DEPTH = None  # type: ignore[assignment]
    sqlparse.engine.grouping.MAX_GROUPING_TOKENS = None  # type: ignore[assignment]
    with psycopg.connect(dsn) as conn:
        before = set(applied_versions(conn))
    with tempfile.TemporaryDirectory(prefix="metastore-migrate-") as tmp:
        # pgmigrate reads <base>/migrations.yml and <base>/migrations/: lay that out over db/.
        base = Path(tmp)
        shutil.copy(db_dir() / "migrations.yml", base / "migrations.yml")
        (base / "migrations").symlink_to(db_dir() / "deploy", target_is_directory=True)
        args = types.SimpleNamespace(target=target if target is not None else "latest", conn=dsn, base_dir=str(base))
        config = pgmigrate.get_config(str(base), args)
        try:
            pgmigrate.migrate(config)
        finally:
            if not config.conn_instance.closed:
                config.conn_instance.close()
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.query("advisory_lock", "admin"))
        for path in sorted((db_dir() / "functions").glob("*.sql")):
            log.info("applying %s", path.name)
            conn.execute(_file_sql(path))
        after = applied_versions(conn)
        if ROLES_CHANGE in after:
            row = conn.execute(sql.query("group_roles_chosen", "admin")).fetchone()
            if row and not row[0]:
                # A new installation (or one whose first deploy failed after the changes).
                derived = default_group_roles(conn.info.dbname)
                app_role, reader_role = app_role or derived[0], reader_role or derived[1]
            # Last, so that it moves the grants the files above made too; in their transaction.
            row = conn.execute(
                sql.query("use_group_roles", "admin"), {"app_role": app_role, "reader_role": reader_role}
            ).fetchone()
            log.info("group roles: %s", row[0] if row else None)
    new = [v for v in after if v not in before]
    log.info("deployed changes %s; schema at version %s", new or "none", max(after, default=0))
    return new


def revert(dsn: str, to_version: int) -> list[int]:
    """Revert applied changes above to_version, newest first, in one transaction."""
    reverted: list[int] = []
    by_version = {c.version: c for c in changes()}
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.query("advisory_lock", "admin"))
        for version in reversed(applied_versions(conn)):
            if version <= to_version:
                break
            change = by_version.get(version)
            if change is None:
                raise FileNotFoundError(f"version {version} is applied but this release has no db/revert for it")
            log.info("reverting %s", change.name)
            conn.execute(_file_sql(change.file("revert")))
            conn.execute(sql.query("forget_version", "admin"), {"version": version})
            reverted.append(version)
    return reverted


def verify(dsn: str) -> list[str]:
    """Run db/verify for every applied change, then db/verify/functions.sql; return what failed."""
    failures: list[str] = []
    by_version = {c.version: c for c in changes()}
    with psycopg.connect(dsn) as conn:
        scripts = [by_version[v].file("verify") for v in applied_versions(conn) if v in by_version]
        if scripts:
            scripts.append(db_dir() / "verify" / "functions.sql")
        for script in scripts:
            try:
                with conn.transaction(force_rollback=True):
                    conn.execute(_file_sql(script))
            except psycopg.Error as exc:
                failures.append(f"{script.name}: {exc}")
            else:
                log.info("verified %s", script.name)
    return failures


def status(dsn: str) -> dict[str, object]:
    with psycopg.connect(dsn) as conn:
        applied = applied_versions(conn)
    known = [c.version for c in changes()]
    return {
        "applied": applied,
        "pending": [v for v in known if v not in applied],
        "unknown": [v for v in applied if v not in known],
        "expected_version": latest_version(),
    }
