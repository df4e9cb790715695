"""The `metastore` command run as a client (export, import, replay), and what a store holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import Database


def run(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    return subprocess.run(
        [sys.executable, "-m", "metastore", *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout
    )


def cli(*args: str | Path, ca: Path) -> dict[str, Any]:
    done = run(*args)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def events_of(db: Database) -> list[str]:
    with psycopg.connect(db.owner_dsn) as conn:
        # jsonb renders one way: equal text is equal JSON (and the reverse).
        return sorted(r[0] for r in conn.execute("SELECT payload::text FROM metastore.events"))
