"""The README's map from route to named query to SQL function to file is the code's: every route
the service registers is in it, and each named query, function and file it names exists and calls
the next."""

from __future__ import annotations

import re
from pathlib import Path

from metastore import sql

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "service" / "metastore"
# Routes that call no SQL function: the README says so under the table.
NO_FUNCTION = {"/healthz", "/metrics", "/", "/ui", "/ui/", "/ui/{}", "/api/v1/openapi.json"}


def rows() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| Route | Named query | Function | File |") :].split("\n\n", 1)[0]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in table.splitlines()[2:]]


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def shape(route: str) -> str:
    """`GET /api/v1/datasets/<dataset_id:int>` and `GET /api/v1/datasets/{id}` alike."""
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", route)


def registered() -> set[str]:
    found = set()
    for source in SERVICE.rglob("*.py"):
        for method, path in re.findall(r'@app\.(get|post)\("([^"]+)"', source.read_text()):
            found.add(f"{method.upper()} {shape(path)}")
    return found


def test_every_route_is_in_the_map() -> None:
    mapped = {shape(ticked(row[0])[0]) for row in rows()}
    missing = {r for r in registered() if r.split(" ", 1)[1] not in NO_FUNCTION} - mapped
    assert not missing, f"routes the README's map lacks: {sorted(missing)}"
    assert mapped <= registered(), f"routes in the map the service does not have: {sorted(mapped - registered())}"


def test_each_query_calls_its_function_defined_in_its_file() -> None:
    queries = sql._queries("queries")
    for route, query_cell, function_cell, file_cell in rows():
        names, functions, files = ticked(query_cell), ticked(function_cell), ticked(file_cell)
        assert names and len(functions) == len(files), route
        for name in names:
            assert name in queries, f"{route}: no named query {name!r} in queries.sql"
        for function, file in zip(functions, files, strict=True):
            assert any(f"{function}(" in queries[n] for n in names), f"{route}: no query calls {function}"
            text = (ROOT / "db" / "functions" / file).read_text()
            assert re.search(rf"CREATE OR REPLACE (FUNCTION|PROCEDURE) {re.escape(function)}\(", text), (route, file)
