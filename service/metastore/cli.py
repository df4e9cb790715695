"""The `metastore` command: it dispatches to the program a command belongs to (the server, the
owner's admin commands, the client) and turns their expected failures into a message and an exit
status."""

from __future__ import annotations

import sys

from metastore import arguments
from metastore import config as settings


def main(argv: list[str] | None = None) -> int:
    args = arguments.parser().parse_args(argv)
    if args.command == "settings":
        print(settings.settings_table())
        return 0
    if args.command in arguments.TRANSFER_COMMANDS:
        from metastore import transfer

        return transfer.run(args)
    import psycopg

    from metastore import migrations

    try:
        if args.command == "serve":
            from metastore import server

            return server.serve()
        from metastore import admin

        return admin.db(args)
    except settings.ConfigError as exc:
        print(f"metastore: configuration error: {exc}", file=sys.stderr)
        return 2
    except migrations.MigrationError as exc:
        print(f"metastore: {exc}", file=sys.stderr)
        return exc.exit_code
    except psycopg.Error as exc:
        from metastore.admin import database_failure

        message, code = database_failure(exc)
        print(f"metastore: {message}", file=sys.stderr)
        return code
