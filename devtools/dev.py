"""`make dev`: the service on http://127.0.0.1:8080 against a local embedded PostgreSQL.

For trying the store out, not for production (which brings its own PostgreSQL through
METASTORE_DATABASE_URL). Data persists between runs in `.dev/` of the clone, or, where the
PostgreSQL server's user could not enter the clone (root runs the server as an unprivileged
user, and a clone in /root is private), in /var/tmp/metastore-dev-<hash of the clone's path>;
METASTORE_DEV_DIR chooses another place. `make clean-dev` drops it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from devtools.localpg import LocalPostgres, provision

ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> tuple[Path, str | None]:
    """Where the development database lives, and why there when it is not .dev/ of the clone."""
    explicit = os.environ.get("METASTORE_DEV_DIR")
    if explicit:
        return Path(explicit).resolve(), None
    local = ROOT / ".dev"
    if os.geteuid() != 0 or all(p.stat().st_mode & 0o001 for p in ROOT.parents):
        return local, None
    digest = hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]
    why = (
        f"{ROOT} is in a folder only its owner may enter, and PostgreSQL runs as an unprivileged user "
        "(it refuses root): its data goes where that user can reach it"
    )
    return Path("/var/tmp") / f"metastore-dev-{digest}", why  # noqa: S108 - a fixed place that persists


def clean() -> int:
    base, _ = data_dir()
    if base.exists():
        shutil.rmtree(base)
        print(f"removed the development database in {base}", file=sys.stderr)
    else:
        print(f"nothing to remove: {base} does not exist", file=sys.stderr)
    return 0


def _failed(exc: subprocess.CalledProcessError, base: Path) -> int:
    # The tool's own words, then what to do: a bare traceback says neither.
    output = b"\n".join(part for part in (exc.stdout, exc.stderr) if part).decode(errors="replace").strip()
    tool = Path(str(exc.cmd[0])).name if isinstance(exc.cmd, list | tuple) else str(exc.cmd)
    print(f"make dev: {tool} failed (exit {exc.returncode}):\n{output or '(it printed nothing)'}", file=sys.stderr)
    log = base / "log"
    if log.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-10:]
        print("the server's log ends with:\n  " + "\n  ".join(tail), file=sys.stderr)
    print(
        f"The data is in {base}: `make clean-dev` starts afresh; METASTORE_DEV_DIR=/some/dir puts it elsewhere; "
        "METASTORE_DEV_PG_PORT changes PostgreSQL's port (54329) if another server holds it.",
        file=sys.stderr,
    )
    return 1


def main() -> int:
    if sys.argv[1:] == ["clean"]:
        return clean()
    port = int(os.environ.get("METASTORE_PORT", "8080"))
    base, why = data_dir()
    if why:
        print(f"make dev: the database is in {base}: {why}.", file=sys.stderr)
    base.mkdir(parents=True, exist_ok=True)
    pg = LocalPostgres(data_dir=base, port=int(os.environ.get("METASTORE_DEV_PG_PORT", "54329")))
    try:
        pg.start(durable=True)
    except subprocess.CalledProcessError as exc:
        return _failed(exc, base)
    try:
        provision(pg, "metastore")
        return _serve(pg, port, base)
    finally:
        pg.stop()


def _serve(pg: LocalPostgres, port: int, base: Path) -> int:
    from metastore import server  # imported once the database runs: it loads the whole service

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
  Post an event:   curl -X POST {url}/api/v1/lineage -H 'Content-Type: application/json' \\
                        -d @tests/fixtures/openlineage/trino/04-ctas-complete.json
  List datasets:   curl {url}/api/v1/datasets
  API document:    {url}/api/v1/openapi.json
  PostgreSQL:      psql "{pg.dsn_for("metastore_owner", "metastore")}"
  Backfill:        CALL metastore.backfill();
Stop with Ctrl-C. Data stays in {base} (`make clean-dev` removes it).
""",
        file=sys.stderr,
        flush=True,
    )
    return server.serve()


if __name__ == "__main__":
    raise SystemExit(main())
