"""This release's schema: its changes (db/deploy/VNNNN__name.sql), the version it expects, and
why a database at another version cannot serve it. Read by the server (readiness, schema skew)
and by the admin commands (deploy, revert, status); it connects to nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_VERSION = re.compile(r"^V(\d+)__(.+)\.sql$")


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

    @property
    def description(self) -> str:
        # As pgmigrate wrote it into the ledger: the name's words, without the extension.
        match = _VERSION.match(self.name)
        return match.group(2).replace("_", " ") if match else self.name


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


def schema_verdict(version: int | None, expected: int | None = None) -> tuple[str, str] | None:
    """Why a database whose schema is at `version` (None: it has no metastore.schema_version())
    cannot serve this release, as (status, reason); None when it can. The words of /readyz, and
    of every request that meets an undefined table or function."""
    expected = latest_version() if expected is None else expected
    if version is None:
        return (
            "schema not deployed",
            "the database has no metastore schema (metastore.schema_version() is missing): run metastore db deploy",
        )
    if version < expected:
        return (
            "schema behind",
            f"the database schema is at version {version}; this release needs {expected}: run metastore db deploy",
        )
    return None


def describe_versions() -> str:
    """This release's change numbers as runs, e.g. "1 to 7, 9" (a number may be left unused)."""
    runs: list[list[int]] = []
    for version in sorted(c.version for c in changes()):
        if runs and version == runs[-1][-1] + 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]} to {r[-1]}" for r in runs)
