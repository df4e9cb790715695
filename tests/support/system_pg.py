"""Debian's PostgreSQL with TLS (the embedded one is built without OpenSSL): for the tests of the
service reaching its database over TLS. Skipped where it is not installed; CI must have it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devtools.localpg import LocalPostgres
from tests.support.certs import LOCAL_NAMES, postgres_tls


def tls_postgres(
    bin_path: Path, ca_file: Path, names: tuple[str, ...] = LOCAL_NAMES, options: str = ""
) -> LocalPostgres:
    """A started PostgreSQL of bin_path serving TLS with a certificate for `names` from a throwaway
    CA, whose certificate goes to ca_file; `options`, more server options."""
    if not (bin_path / "postgres").exists():
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide a TLS-capable PostgreSQL at {bin_path}")
        pytest.skip(f"needs a TLS-capable PostgreSQL at {bin_path} (apt-get install postgresql-15)")
    server = LocalPostgres(bin_path=bin_path)
    server.start(options=f"{postgres_tls(server, ca_file, names)} {options}".strip())
    return server
