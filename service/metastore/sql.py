"""Named SQL statements loaded from queries.sql (no SQL is built in Python)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import LiteralString

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` sections into {name: statement}."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        statement = body.strip()
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        if not statement:
            raise ValueError(f"query {name!r} is empty")
        queries[name] = statement.rstrip(";")
    return queries


@cache
def _queries(file: str) -> dict[str, str]:
    return parse(resources.files("metastore").joinpath(f"{file}.sql").read_text("utf-8"))


def query(name: str, file: str = "queries") -> LiteralString:
    # LiteralString: the text comes from a file in the package, never from a request.
    statement: LiteralString = _queries(file)[name]  # type: ignore[assignment,unused-ignore]
    return statement
