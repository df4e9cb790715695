"""`metastore db hide` and `metastore db unhide`: the owner's hide list (metastore.hide, metastore.unhide).

Hidden datasets, jobs and namespaces disappear from the read API and the view; their events stay and
the event feed serves them. The functions run as the owner (METASTORE_ADMIN_DATABASE_URL); the
service's role cannot call them.
"""

from __future__ import annotations

import argparse
from typing import Any

from metastore import migrations, sql


def add_commands(db_commands: Any) -> None:
    hide = db_commands.add_parser(
        "hide", help="hide a dataset, a job or a namespace from the read API and the view (the events stay)"
    )
    unhide = db_commands.add_parser("unhide", help="show again what `metastore db hide` hid")
    for parser in (hide, unhide):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--dataset", nargs=2, metavar=("NAMESPACE", "NAME"), help="one dataset")
        target.add_argument("--job", nargs=2, metavar=("NAMESPACE", "NAME"), help="one job")
        target.add_argument("--namespace", metavar="NAMESPACE", help="every dataset and job of a namespace")
        if parser is hide:
            target.add_argument("--list", action="store_true", help="print what is hidden (with --all: and was)")
    hide.add_argument("--reason", help="why, recorded with who and when")
    hide.add_argument("--all", action="store_true", help="with --list: also what was shown again")


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
