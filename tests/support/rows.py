"""Reading one value back from PostgreSQL in a test."""

from __future__ import annotations

from typing import Any

import psycopg


def value(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> Any:
    """The first column of the first row `query` returns (a function's one result); that there is
    such a row is asserted."""
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def document(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> dict[str, Any]:
    """The one jsonb object `query` returns (a read function's answer), as a dict."""
    return dict(value(conn, query, params))
