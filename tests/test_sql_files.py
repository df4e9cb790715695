"""The SQL files the service and the migrations read are well-formed."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from metastore import ledger, sql

KINDS = ("deploy", "revert", "verify")


def test_every_named_query_parses_and_is_used() -> None:
    queries = sql._queries("queries")
    service = Path(sql.__file__).parent
    code = "\n".join(p.read_text() for p in service.rglob("*.py"))
    unused = {name for name in queries if f'"{name}"' not in code}
    assert not unused, f"queries.sql statements no Python code calls: {unused}"
    assert all(q.lstrip().upper().startswith(("SELECT", "--")) for q in queries.values())


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        sql.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_every_change_has_deploy_revert_and_verify() -> None:
    for change in ledger.changes():
        for kind in KINDS:
            assert change.file(kind).is_file(), f"{change.name} has no db/{kind} file"


def test_function_files_follow_the_house_rules() -> None:
    for path in sorted((ledger.db_dir() / "functions").glob("*.sql")):
        text = path.read_text()
        assert text.isascii(), f"{path.name}: pgmigrate refuses non-ASCII files"
        assert re.search(r"CREATE OR REPLACE (FUNCTION|PROCEDURE)", text), path.name
        assert "COMMENT ON" in text and "REVOKE ALL ON" in text, path.name
        for raise_stmt in re.findall(r"RAISE EXCEPTION[^;]*;", text, re.DOTALL):
            assert "ERRCODE" in raise_stmt, f"{path.name}: a RAISE without a SQLSTATE"


def test_released_changes_are_frozen() -> None:
    """db/released.sha256 pins every file of every released change (db/CONVENTIONS.md): a database
    deployed by that release has run them, so an edit would reach new installations only."""
    db = ledger.db_dir()
    pinned = {}
    for line in (db / "released.sha256").read_text().splitlines():
        digest, path = line.split(maxsplit=1)
        pinned[path] = digest
    changed = [p for p, digest in pinned.items() if hashlib.sha256((db / p).read_bytes()).hexdigest() != digest]
    assert not changed, f"released files changed (add a new change instead): {changed}"
    # Whole changes, and every change up to the newest pinned one.
    newest = max(int(re.match(r"\w+/V(\d+)__", p).group(1)) for p in pinned)  # type: ignore[union-attr]
    expected = {f"{kind}/{change.name}" for change in ledger.changes() if change.version <= newest for kind in KINDS}
    assert set(pinned) == expected


def test_no_two_function_files_share_a_number() -> None:
    """db/functions apply in file-name order: a number names one place in it."""
    numbers = [p.name.split("_", 1)[0] for p in sorted((ledger.db_dir() / "functions").glob("*.sql"))]
    assert len(numbers) == len(set(numbers)), sorted(n for n in set(numbers) if numbers.count(n) > 1)
