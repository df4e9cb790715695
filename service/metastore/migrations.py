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


def deploy(dsn: str, target: int | None = None) -> list[int]:
    """Apply pending changes up to target (default: all), then re-apply db/functions."""
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
