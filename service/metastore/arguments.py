"""The `metastore` command's arguments and help: nothing heavy is imported here, so that `--help`
answers at once; cli.py imports what a command needs when it runs."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from metastore.settings import CLIENT, one

# The filters of GET /api/v1/events, which export and replay pass on.
FILTERS = (
    "event_time_from",
    "event_time_to",
    "received_from",
    "received_to",
    "job_namespace",
    "job_name",
    "dataset_namespace",
    "dataset_name",
    "event_type",
)
TRANSFER_COMMANDS = ("export", "import", "replay")
MIB = 1 << 20
# The store's default METASTORE_MAX_BODY_BYTES: the largest event a store takes by default.
STORE_MAX_BODY = 16 * MIB

# Each command's exit status, in its --help and in docs/operations.md ("The database commands").
DB_EXIT_CODES = """exit status:
  0  done, or nothing needed doing
  1  the database refused or failed the operation (SQLSTATE named), or verify found a difference
  2  a setting or an argument is wrong (nothing was changed), or a revert was not confirmed
  3  the database could not be reached or logged into in time"""


SERVE_HELP = """Settings come from METASTORE_* environment variables: `metastore settings` lists every
one with its default and meaning (docs/service.md holds the same table).

exit status:
  0  stopped by SIGTERM or SIGINT after a clean shutdown
  2  a setting is wrong (the message names it); nothing was started"""

TRANSFER_EXIT_CODES = """exit status:
  0    done
  1    stopped by a failure: an answer that does not judge the event, a bad line, no answer after --retries
  2    bad usage
  3    --deadline passed
  130  interrupted"""


def version() -> str:
    try:
        return metadata.version("metastore")
    except metadata.PackageNotFoundError:  # run from a source tree without installing it
        from metastore import __version__

        return __version__


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="metastore", description="Metadata Store: OpenLineage into PostgreSQL.")
    parser.add_argument("--version", action="version", version=f"metastore {version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    _command(
        commands,
        "serve",
        help="run the HTTP service (settings from METASTORE_* variables: metastore settings lists them)",
        description="Run the HTTP service until SIGTERM.",
        epilog=SERVE_HELP,
    )
    commands.add_parser("settings", help="print every METASTORE_* setting with its default and meaning (Markdown)")
    db_parser = _command(
        commands,
        "db",
        help="database migrations (METASTORE_ADMIN_DATABASE_URL: the owner role)",
        epilog=DB_EXIT_CODES,
    )
    db_parser.add_argument("--database-url", help="connection string of the owner role")
    db_commands = db_parser.add_subparsers(dest="db_command", required=True)
    deploy = _command(
        db_commands,
        "deploy",
        help="apply pending changes, re-apply db/functions, then verify",
        epilog=DB_EXIT_CODES,
    )
    deploy.add_argument(
        "--to",
        type=int,
        default=None,
        help="the release's latest change, the only one it deploys to (its functions need all of them)",
    )
    deploy.add_argument(
        "--app-role",
        help="this installation's NOLOGIN group role for the service (env METASTORE_APP_ROLE; "
        "default: <database>_app on a first deploy, then the recorded one)",
    )
    deploy.add_argument(
        "--reader-role",
        help="its read-only group role (env METASTORE_READER_ROLE; default: <database>_reader, then the recorded one)",
    )
    revert = _command(
        db_commands,
        "revert",
        help="revert changes newer than --to, newest first",
        epilog=DB_EXIT_CODES,
    )
    revert.add_argument("--to", type=int, required=True, help="the change to keep (0 removes everything)")
    revert.add_argument("--yes", action="store_true", help="confirm a revert without asking (no terminal, e.g. a Job)")
    db_commands.add_parser(
        "verify", help="fail unless every change of this release is deployed with the expected shape and grants"
    )
    db_commands.add_parser("status", help="print applied and pending changes (JSON lines, or text on a terminal)")
    retention = db_commands.add_parser(
        "retention", help="forget events older than --keep (metastore.apply_retention); prints what it dropped"
    )
    retention.add_argument("--keep", default="90 days", help="a PostgreSQL interval, at least 1 day (default: 90 days)")
    retention.add_argument(
        "--archive",
        type=Path,
        help="first write each expiring day's events to a gzip NDJSON file with a manifest in this directory "
        "(what `metastore import` reads back)",
    )
    rebuild = db_commands.add_parser(
        "backfill", help="rebuild the derived tables from the stored events while ingest goes on (metastore.backfill)"
    )
    rebuild.add_argument("--sessions", type=int, default=1, help="database sessions sharing the work (default 1)")
    rebuild.add_argument("--batch-size", type=int, default=1000, help="events per transaction, at most 1000 (default)")
    _hiding_commands(db_commands)
    for command in db_commands.choices.values():
        command.epilog, command.formatter_class = DB_EXIT_CODES, argparse.RawDescriptionHelpFormatter
        command.add_argument(
            "--log-format",
            choices=("auto", "text", "json"),
            default="auto",
            help="lines for a person (text) or JSON lines for a Job's log (json); auto: text on a terminal",
        )
    _transfer_commands(commands)
    return parser


def _command(subcommands: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose description and epilog (its exit codes) keep their line breaks."""
    parser: argparse.ArgumentParser = subcommands.add_parser(
        name, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
    )
    return parser


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = kind(text)
        if not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
        return value

    return parse


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from",
        dest="source",
        default=one(CLIENT, "METASTORE_URL") or None,
        help="base URL of the store to read, e.g. https://metastore:8443 (default: $METASTORE_URL)",
    )
    parser.add_argument("--ca", type=Path, help="CA certificate(s) that sign the store's certificate (PEM)")
    parser.add_argument("--insecure", action="store_true", help="do not verify the store's certificate")
    for name in FILTERS:
        parser.add_argument(
            f"--{name.replace('_', '-')}", dest=name, help=f"feed filter {name} (see GET /api/v1/events)"
        )
    parser.add_argument("--since", help="received since: a duration back from now (30m, 6h, 7d) or a time")
    parser.add_argument("--limit", type=_positive(int), help="stop after this many events")
    _add_retries(parser)
    parser.add_argument(
        "--max-line-bytes",
        type=_positive(int),
        default=64 * MIB,
        help="longest line of the feed to read (default 64 MiB); a longer one stops the command",
    )
    _add_deadline(parser)


def _add_retries(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--retries",
        type=int,
        choices=range(0, 101),
        metavar="N",
        default=4,
        help="tries after the first when a store or target gives no answer, or 408, 429 or 5xx (default 4)",
    )


def _add_deadline(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deadline", type=_positive(float), help="seconds the whole command may take (exit 3 when they pass)"
    )


def _transfer_commands(commands: Any) -> None:
    exp = _command(
        commands,
        "export",
        help="write stored events to NDJSON (gzip when the name ends in .gz)",
        epilog=TRANSFER_EXIT_CODES,
    )
    _add_source(exp)
    exp.add_argument("-o", "--output", required=True, help="file to write, or - for stdout")
    exp.add_argument("--gzip", action=argparse.BooleanOptionalAction, default=None, help="compress (default: by name)")
    exp.add_argument("--cursor", help="start after this event's cursor")
    exp.add_argument("--timeout", type=_positive(float), default=30.0, help="seconds per read (default 30)")

    imp = _command(
        commands,
        "import",
        help="store the events of export files into a store (de-duplicated)",
        epilog=TRANSFER_EXIT_CODES,
    )
    imp.add_argument(
        "files",
        nargs="+",
        help="NDJSON files written by export, gzip or not, or by `db retention --archive` (checked against their "
        "manifests, which may be named instead); - for stdin",
    )
    imp.add_argument("--to", required=True, help="base URL of the receiving store (or its ingest URL)")
    imp.add_argument("--ca", type=Path, help="CA certificate(s) that sign its certificate (PEM)")
    imp.add_argument("--insecure", action="store_true", help="do not verify its certificate")
    # 100 is the store's default max_batch_events: a larger batch is refused whole (413).
    imp.add_argument("--batch-size", type=_positive(int), default=100, help="events per POST (default 100)")
    imp.add_argument(
        "--batch-bytes", type=_positive(int), default=4 * MIB, help="bytes of events per POST (default 4 MiB)"
    )
    imp.add_argument(
        "--max-event-bytes",
        type=_positive(int),
        default=STORE_MAX_BODY,
        help="largest event the target takes, its METASTORE_MAX_BODY_BYTES (default 16 MiB); a longer line "
        "stops the import, naming it",
    )
    imp.add_argument("--timeout", type=_positive(float), default=60.0, help="seconds per POST (default 60)")
    _add_retries(imp)
    _add_deadline(imp)

    rep = _command(
        commands,
        "replay",
        help="re-emit stored events to an OpenLineage HTTP endpoint",
        epilog=TRANSFER_EXIT_CODES,
    )
    _add_source(rep)
    rep.add_argument(
        "--to",
        required=True,
        help="the OpenLineage endpoint's base URL (Marquez, another store, ...), or its ingest URL",
    )
    rep.add_argument("--endpoint", default="api/v1/lineage", help="path under a base URL (default api/v1/lineage)")
    rep.add_argument("--to-ca", type=Path, help="CA certificate(s) of the target (PEM)")
    rep.add_argument("--to-insecure", action="store_true", help="do not verify the target's certificate")
    rep.add_argument("--rate", type=_positive(float), help="at most this many events a second")
    rep.add_argument("--checkpoint", type=Path, help="file to resume from and to save progress in")
    rep.add_argument("--restart", action="store_true", help="ignore the checkpoint file's position")
    rep.add_argument(
        "--timeout",
        type=_positive(float),
        default=10.0,
        help="seconds per POST, plus one per MiB of the event (default 10)",
    )
    rep.add_argument("--gzip", action="store_true", help="send the events gzip-compressed")


def _hiding_commands(db_commands: Any) -> None:
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
