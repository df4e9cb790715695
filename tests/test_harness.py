"""The tests share code through tests/support and the conftest.py files only: no module under tests
imports a test module (a helper there ties one test file to another's internals, and a test
function imported is collected twice), nor the removed tests.server_fixtures."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path, root: Path = TESTS) -> set[str]:
    """Every module `path` imports, absolute, with the names `from x import y` brings as x.y too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing file's package
                package = path.relative_to(root.parent).with_suffix("").parts[: -node.level]
                base = ".".join([*package, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def forbidden(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "tests" and (parts[-1].startswith("test_") or "server_fixtures" in parts)


def test_no_module_under_tests_imports_a_test_module_or_the_old_shim() -> None:
    offenders = {
        str(path.relative_to(TESTS.parent)): sorted(m for m in imported_modules(path) if forbidden(m))
        for path in sorted(TESTS.rglob("*.py"))
    }
    offenders = {path: modules for path, modules in offenders.items() if modules}
    assert not offenders, f"import shared helpers from tests/support instead: {offenders}"


def test_the_check_sees_each_way_of_importing_a_test_module(tmp_path: Path) -> None:
    path = tmp_path / "tests" / "db" / "functions" / "test_sample.py"
    path.parent.mkdir(parents=True)
    for way in [
        "from tests.db.functions.test_backfill import snapshot",
        "import tests.db.functions.test_backfill",
        "from tests.db.functions import test_backfill",
        "from .test_backfill import snapshot",
        "from . import test_backfill",
        "from ..test_migrations import schema_exists",
        "from tests.server_fixtures import Server",
        "from tests import server_fixtures",
    ]:
        path.write_text(way + "\n")
        modules = imported_modules(path, tmp_path / "tests")
        assert any(forbidden(m) for m in modules), (way, modules)
    for allowed in [
        "from tests.support.derived import snapshot",
        "from tests.conftest import ingest",
        "import metastore",
    ]:
        path.write_text(allowed + "\n")
        assert not any(forbidden(m) for m in imported_modules(path, tmp_path / "tests")), allowed
