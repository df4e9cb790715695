"""Whether a database has the metastore schema: what deploy makes and a revert to zero removes."""

from __future__ import annotations

import psycopg

from tests.conftest import Database


def schema_exists(db: Database) -> bool:
    with psycopg.connect(db.owner_dsn) as conn:
        row = conn.execute("SELECT to_regnamespace('metastore') IS NOT NULL").fetchone()
        return bool(row and row[0])
