"""The view's ES modules: app.js is the entry point and nothing imports it (the helpers every page
uses live in dom.js), the imports form no cycle, and the service serves every file the view has."""

from __future__ import annotations

import re
from pathlib import Path

from metastore import ui

UI = Path(ui.__file__).with_name("ui")
IMPORT = re.compile(r"""^\s*import\s[^;]*?from\s+["']\./([\w.-]+)["'];""", re.M | re.S)


def imports() -> dict[str, set[str]]:
    return {path.name: set(IMPORT.findall(path.read_text())) for path in UI.glob("*.js")}


def test_app_js_is_imported_by_no_module() -> None:
    graph = imports()
    assert graph["app.js"], "app.js imports the pages"
    assert [name for name, targets in graph.items() if "app.js" in targets] == []


def test_the_modules_form_no_cycle() -> None:
    graph = imports()
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " → ".join((*path, name))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, (*path, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())
    assert done == set(graph)


def test_every_file_of_the_view_is_served_and_every_import_exists() -> None:
    served = {name for name, _ in ui._FILES}
    assert served == {path.name for path in UI.iterdir() if path.is_file()}
    assert all(target in served for targets in imports().values() for target in targets)
