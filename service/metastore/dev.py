"""`make dev`: the service on http://127.0.0.1:8080 against a local embedded PostgreSQL.

For trying the store out, not for production (which brings its own PostgreSQL through
METASTORE_DATABASE_URL). Data persists in .dev/ between runs; `make clean-dev` drops it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psycopg

from metastore import cli, migrations
from metastore.localpg import LocalPostgres

ROLES = """
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_owner') THEN
    CREATE ROLE metastore_owner LOGIN CREATEROLE; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_app') THEN
    CREATE ROLE metastore_app NOLOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_reader') THEN
    CREATE ROLE metastore_reader NOLOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_service') THEN
    CREATE ROLE metastore_service LOGIN IN ROLE metastore_app; END IF;
END$$
"""


def main() -> int:
    port = int(os.environ.get("METASTORE_PORT", "8080"))
    base = Path(os.environ.get("METASTORE_DEV_DIR", ".dev")).resolve()
    base.mkdir(exist_ok=True)
    pg = LocalPostgres(data_dir=base, port=int(os.environ.get("METASTORE_DEV_PG_PORT", "54329")))
    pg.start(durable=True)
    try:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(ROLES)
            if not conn.execute("SELECT FROM pg_database WHERE datname = 'metastore'").fetchone():
                conn.execute("CREATE DATABASE metastore OWNER metastore_owner")
        migrations.deploy(pg.dsn_for("metastore_owner", "metastore"))
        os.environ.update(
            {
                "METASTORE_DATABASE_URL": pg.dsn_for("metastore_service", "metastore"),
                "METASTORE_HOST": "127.0.0.1",
                "METASTORE_PORT": str(port),
                "METASTORE_TLS": os.environ.get("METASTORE_TLS", "off"),
            }
        )
        url = f"http://127.0.0.1:{port}"
        print(
            f"""
Metadata Store (development) is starting.
  Post events:     curl -X POST {url}/api/v1/lineage -H 'Content-Type: application/json' -d @event.json
  List datasets:   {url}/api/v1/datasets
  API document:    {url}/api/v1/openapi.json
  PostgreSQL:      psql "{pg.dsn_for("metastore_owner", "metastore")}"
  Backfill:        CALL metastore.backfill();
Stop with Ctrl-C. Data stays in {base}.
""",
            file=sys.stderr,
            flush=True,
        )
        return cli.serve()
    finally:
        pg.stop()


if __name__ == "__main__":
    raise SystemExit(main())
