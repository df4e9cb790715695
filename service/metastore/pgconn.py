"""What the server and the admin commands share about connecting to PostgreSQL: credentials read
from files, and a refused connection told in words an operator can act on."""

from __future__ import annotations

from pathlib import Path

import psycopg


def connection_failure(exc: psycopg.Error, setting: str) -> tuple[str, str]:
    """(kind, reason) of a connection attempt that failed, in libpq's words on one line: the
    server's own message when it answered (who was refused and why), else what the network said.
    The kinds are /readyz's statuses: login refused, not permitted, database missing, database
    unavailable. (libpq gives no SQLSTATE for a refused connection; the server's messages are
    matched in English, anything else is `database unavailable` with its text.)"""
    text = " ".join(str(exc).split()).removeprefix("connection failed: ")
    lower = text.lower()
    if "cannot read metastore_" in lower or any(
        words in lower
        for words in ("password authentication failed", "pg_hba.conf", "not permitted to log in", "authentication")
    ):
        hint = f"the role and password of {setting}, PGUSER/PGPASSWORD or the credential files"
        return "login refused", f"{text} ({hint})"
    if "permission denied for database" in lower:
        return "not permitted", f"{text} (the role needs CONNECT: make it a member of the installation's app role)"
    if 'database "' in lower and "does not exist" in lower:
        return "database missing", f"{text} (dbname of {setting})"
    return "database unavailable", text


def read_credentials(files: tuple[tuple[str, str, Path | None], ...]) -> dict[str, str]:
    """{libpq key: the content of its file} for each (key, setting, file) given a file. One trailing
    newline is the file's, not the value's (echo, kubectl create secret --from-file)."""
    found: dict[str, str] = {}
    for key, setting, path in files:
        if path is None:
            continue
        try:
            found[key] = path.read_text("utf-8").removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
            raise psycopg.OperationalError(f"cannot read {setting}={path}: {reason}") from None
    return found
