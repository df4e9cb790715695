"""Fixtures of the database tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Database, create_database, create_group_roles, drop_database


@pytest.fixture
def empty_db(pg_server: Any) -> Iterator[Database]:
    """A database with nothing deployed, and the group roles a DBA creates before the first deploy."""
    db = create_database(pg_server, template="template0")
    create_group_roles(pg_server, db.name)
    yield db
    drop_database(db)
