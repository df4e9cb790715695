"""The package holds three programs: the server, the owner's admin commands and the HTTP client.
Each imports only its own modules and the shared ones, and `cli` only dispatches to them; the
README's layout section names the same wings."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "service" / "metastore"

SHARED = {
    "__init__",
    "arguments",
    "config",
    "settings",
    "errors",
    "logs",
    "sql",
    "ledger",
    "pgconn",
    "archive",
    "outbound",
}
WINGS = {
    "server": {
        "server",
        "app",
        "api",
        "ingest",
        "feed",
        "forward",
        "httpguard",
        "limits",
        "ops",
        "spool",
        "state",
        "ui",
        "db",
        "dbtls",
        "tlsctx",
        "tracing",
        "provenance",
        "metrics",
    },
    "admin": {"admin", "migrations", "maintenance", "hiding"},
    "client": {"transfer"},
}
DISPATCH = {"cli", "__main__"}


def top_module(path: Path) -> str:
    """A module's name in the package, a subpackage's modules under the subpackage's name."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported(path: Path) -> set[str]:
    """The package's modules `path` imports, wherever in the file the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] != "metastore":
                continue
            if len(parts) > 1:
                found.add(parts[1])
            else:
                # `from metastore import __version__` names the package itself.
                found.update(
                    a.name if (PACKAGE / f"{a.name}.py").exists() or (PACKAGE / a.name).is_dir() else "__init__"
                    for a in node.names
                )
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("metastore."))
    return found


def modules() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found.setdefault(top_module(path), []).append(path)
    return found


def test_every_module_belongs_to_one_wing() -> None:
    named = SHARED | DISPATCH | set().union(*WINGS.values())
    assert set(modules()) == named, "a module was added or removed: name its wing here and in the README"


def test_a_wing_imports_only_itself_and_the_shared_modules() -> None:
    wrong = []
    for wing, members in {**WINGS, "shared": SHARED}.items():
        for name in members:
            for path in modules()[name]:
                for other in imported(path) - members - SHARED:
                    wrong.append(f"{path.relative_to(PACKAGE)} ({wing}) imports {other}")
    assert wrong == []


def test_the_readme_names_every_wing_and_its_modules() -> None:
    readme = (PACKAGE.parent.parent / "README.md").read_text("utf-8")
    section = readme.split("## Where to look", 1)[1].split("\n## ", 1)[0]
    for wing, members in {**WINGS, "shared": SHARED - {"__init__"}}.items():
        line = next((x for x in section.splitlines() if x.startswith(f"- **{wing}**")), "")
        assert line, f"the README's Where to look has no line for the {wing} wing"
        for name in members:
            assert f"`{name}`" in line, f"the README's {wing} line does not name {name}"
