"""`metastore db hide` and `metastore db unhide`: the owner's hide list (metastore.hide, metastore.unhide).

Hidden datasets, jobs and namespaces disappear from the read API and the view; their events stay and
the event feed serves them. The functions run as the owner (METASTORE_ADMIN_DATABASE_URL); the
service's role cannot call them.
"""

from __future__ import annotations

import argparse
from typing import Any

from metastore import migrations, sql


def run(dsn: str, args: argparse.Namespace, limits: migrations.Limits) -> Any:
    """What the function answered: the entry made or ended, or the list."""
    with migrations.connect(dsn, limits, autocommit=True) as conn:
        if args.db_command == "hide" and args.list:
            row = migrations.run(conn, sql.query("hidden_list", "admin"), limits, "listing", all=args.all).fetchone()
            return row[0] if row else None
        kind, namespace, name = (
            ("dataset", *args.dataset)
            if args.dataset
            else ("job", *args.job)
            if args.job
            else ("namespace", args.namespace, None)
        )
        params: dict[str, Any] = {"kind": kind, "namespace": namespace, "name": name}
        if args.db_command == "hide":
            params["reason"] = args.reason
        row = migrations.run(conn, sql.query(args.db_command, "admin"), limits, args.db_command, **params).fetchone()
        return row[0] if row else None
