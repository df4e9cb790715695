"""Counters of the current transaction's table reads: a test's bound on how much a call reads,
where timing it would only measure the machine."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql


def xact_stat(conn: psycopg.Connection[Any], table: str, counter: str) -> int:
    """A counter of pg_stat_xact_user_tables (seq_scan, idx_tup_fetch, ...) for a metastore table,
    in the current transaction."""
    row = conn.execute(
        sql.SQL(
            "SELECT coalesce(sum({}), 0) FROM pg_stat_xact_user_tables WHERE schemaname = 'metastore' AND relname = %s"
        ).format(sql.Identifier(counter)),
        (table,),
    ).fetchone()
    assert row is not None
    return int(row[0])
