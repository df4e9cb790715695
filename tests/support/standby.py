"""A streaming replica (hot standby) of a test's PostgreSQL server, made as an operator makes one:
`pg_basebackup -R` from the running server, then started in recovery. initdb's pg_hba.conf lets
127.0.0.1 replicate (trust), and the defaults (wal_level=replica, max_wal_senders=10) suffice."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from devtools.localpg import LocalPostgres


def start_standby(primary: LocalPostgres) -> LocalPostgres:
    standby = LocalPostgres(bin_path=primary.bin)
    # As the server's OS user (LocalPostgres._run): the data directory must be that user's.
    standby._run(
        "pg_basebackup",
        "-D",
        str(standby.data),
        "-h",
        "127.0.0.1",
        "-p",
        str(primary.port),
        "-U",
        "postgres",
        "-X",
        "stream",
        "-c",
        "fast",
        "-R",
        timeout=300,
    )
    return standby.start()


def replay_lsn(standby: LocalPostgres) -> int:
    with psycopg.connect(standby.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint").fetchone()
    assert row is not None and row[0] is not None
    return int(row[0])


def wait_for_replay(primary: LocalPostgres, standby: LocalPostgres, timeout: float = 60) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    with psycopg.connect(primary.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint").fetchone()
    assert row is not None
    # The insert position right after a page header is the end of the page's last record.
    target = int(row[0])
    target -= 40 if target % (16 << 20) == 40 else 24 if target % 8192 == 24 else 0
    deadline = time.monotonic() + timeout
    while replay_lsn(standby) < target:
        assert time.monotonic() < deadline, f"the standby did not replay up to {target} within {timeout} s"
        time.sleep(0.05)


def set_replay(standby: LocalPostgres, paused: bool) -> None:
    with psycopg.connect(standby.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()")


def one(dsn: str, query: Any, params: Any = None) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]
