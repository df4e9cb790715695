"""metastore.ensure_partitions: the service's hourly call makes yesterday through 14 days ahead, nothing else."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import READER_ROLE
from tests.support.partitions import create, partitions, utc_today


def test_it_makes_the_fixed_window_and_nothing_else(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    today = utc_today()
    window = {today + timedelta(days=offset) for offset in range(-1, 15)}
    # Remove two days of the window (empty partitions), as if the hourly call had missed them.
    for day in (today + timedelta(days=13), today + timedelta(days=14)):
        for table in ("event_datasets", "events"):
            owner.execute(f"DROP TABLE metastore.{table}_p{day:%Y%m%d}")
    row = service.execute("SELECT metastore.ensure_partitions()").fetchone()
    assert row == (4,)
    assert service.execute("SELECT metastore.ensure_partitions()").fetchone() == (0,)
    for table in ("events", "event_datasets"):
        days = {name.rsplit("_p", 1)[1] for name in partitions(owner, table) if name != f"{table}_default"}
        assert days == {f"{day:%Y%m%d}" for day in window}


def test_the_owner_may_still_make_any_range(owner: psycopg.Connection[Any]) -> None:
    assert create(owner, utc_today() - timedelta(days=3), 14) == 2 * 2


def test_a_reader_cannot_call_it(database: Any) -> None:
    reader = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database.server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_ROLE}")
    try:
        with (
            psycopg.connect(database.server.dsn_for(reader, database.name), autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("SELECT metastore.ensure_partitions()")
    finally:
        with psycopg.connect(database.server.dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {reader}")


def test_partitions_ahead_says_how_far_ingest_is_covered(service: Any, owner: Any) -> None:
    assert service.execute("SELECT metastore.ensure_partitions()").fetchone() is not None
    assert service.execute("SELECT metastore.partitions_ahead()").fetchone() == (14,)
    # A DBA's partitions further ahead count too, as long as no day is missing.
    owner.execute("SELECT metastore.create_partitions(CURRENT_DATE, 20)")
    assert service.execute("SELECT metastore.partitions_ahead()").fetchone() == (15,)
