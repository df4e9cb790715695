"""`make dev`: the service on http://127.0.0.1:8080 against a local embedded PostgreSQL.

For trying the store out, not for production (which brings its own PostgreSQL through
METASTORE_DATABASE_URL). Data persists in .dev/ between runs; `make clean-dev` drops it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from devtools.localpg import LocalPostgres, provision
from metastore import cli


def main() -> int:
    port = int(os.environ.get("METASTORE_PORT", "8080"))
    base = Path(os.environ.get("METASTORE_DEV_DIR", ".dev")).resolve()
    base.mkdir(exist_ok=True)
    pg = LocalPostgres(data_dir=base, port=int(os.environ.get("METASTORE_DEV_PG_PORT", "54329")))
    pg.start(durable=True)
    try:
        provision(pg, "metastore")
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
  Open the view:   {url}/ui/
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
