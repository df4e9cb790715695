"""db/schema.sql: the schema a fresh deploy produces, as pg_dump prints it, normalised.

`make schema` rewrites it; tests/db/test_migrations.py fails when a change to db/ is not
reflected in it, so a reviewer sees every schema change as a diff of one file.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg

from devtools.localpg import LocalPostgres
from metastore import migrations

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "db" / "schema.sql"
# Comments, session settings, pg_dump 17+'s \restrict lines, and the lz4 compression V0001
# sets only where the server was built with lz4 (Debian's is, the embedded one is not).
_NOISE = re.compile(
    r"^(--.*|SET .*|SELECT pg_catalog\.set_config.*|\\(un)?restrict .*"
    r"|ALTER TABLE ONLY metastore\.\w+ ALTER COLUMN payload SET COMPRESSION lz4;)$"
)


_VIEW_COLUMN = re.compile(r"^( SELECT |    )[a-z]\.(\w+,?)$")


# pg_dump 18 names the NOT NULL constraints of partitioned tables (their default names).
_NOT_NULL_NAME = re.compile(r" CONSTRAINT \w+_not_null NOT NULL")


def _unqualify(line: str) -> str:
    # PostgreSQL 16+ prints a one-table view's columns unqualified; 15 prefixes the alias.
    return _NOT_NULL_NAME.sub(" NOT NULL", _VIEW_COLUMN.sub(r"\1\2", line))


def dump(server: LocalPostgres, dbname: str) -> str:
    out = subprocess.run(
        [
            str(server.bin / "pg_dump"),
            "--schema-only",
            "--no-owner",
            "--schema=metastore",
            "--schema=metastore_migrations",
            # The daily partitions depend on the day of the deploy; the default ones are kept.
            "--exclude-table=metastore.events_p[0-9]*",
            "--exclude-table=metastore.event_datasets_p[0-9]*",
            server.dsn_for("postgres", dbname),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    lines = [_unqualify(line) for line in out.splitlines() if not _NOISE.match(line)]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"
    # The group roles are named after the database: shown as a database named metastore has them.
    with psycopg.connect(server.dsn_for("postgres", dbname)) as conn:
        row = conn.execute("SELECT app_role, reader_role FROM metastore.group_roles").fetchone()
    if row:
        for recorded, shown in zip(row, migrations.default_group_roles("metastore"), strict=True):
            text = re.sub(rf"\b{recorded}\b", shown, text)
    return text


def fresh_dump() -> str:
    with LocalPostgres() as server:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE ROLE metastore_owner LOGIN CREATEROLE")
            conn.execute("CREATE DATABASE schema_dump OWNER metastore_owner")
        migrations.deploy(server.dsn_for("metastore_owner", "schema_dump"))
        return dump(server, "schema_dump")


if __name__ == "__main__":
    SCHEMA_FILE.write_text(fresh_dump())
    print(f"wrote {SCHEMA_FILE}", file=sys.stderr)
