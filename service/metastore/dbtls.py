"""How the service's connection to PostgreSQL is protected, read from the connection string.

Only sslmode=verify-full checks both the server's certificate and its name; every other mode
(libpq's default `prefer` included) lets anyone on the path between the service and PostgreSQL
read and change what passes, the password and the events included.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import psycopg
from psycopg.conninfo import conninfo_to_dict

from metastore import metrics
from metastore.config import Config, ConfigError

log = logging.getLogger("metastore.dbtls")


def sslmode(database_url: str, env: Mapping[str, str] | None = None) -> str:
    """The sslmode libpq will use: the connection string's, else PGSSLMODE, else `prefer`."""
    env = os.environ if env is None else env
    try:
        params = conninfo_to_dict(database_url)
    except psycopg.ProgrammingError:
        # Not the message: it may quote the password.
        raise ConfigError("METASTORE_DATABASE_URL is not a valid libpq connection string or URL") from None
    mode = params.get("sslmode") or env.get("PGSSLMODE") or "prefer"
    return str(mode).strip().lower()


def status(mode: str) -> str:
    return "verify-full" if mode == "verify-full" else "unverified"


def check(config: Config, env: Mapping[str, str] | None = None) -> str:
    """At start: refuse (METASTORE_DATABASE_TLS=verify-full) or warn when not verify-full."""
    mode = sslmode(config.database_url, env)
    metrics.DATABASE_TLS.labels(mode).set(1 if mode == "verify-full" else 0)
    replica = sslmode(config.read_replica_url, env) if config.read_replica_url else "verify-full"
    if replica != "verify-full" and config.database_tls == "verify-full":
        raise ConfigError(
            f"METASTORE_DATABASE_TLS=verify-full, but the read replica's connection uses sslmode={replica}: "
            "add sslmode=verify-full and sslrootcert=<CA bundle> to METASTORE_READ_REPLICA_URL"
        )
    if mode != "verify-full":
        if config.database_tls == "verify-full":
            raise ConfigError(
                f"METASTORE_DATABASE_TLS=verify-full, but the database connection uses sslmode={mode}: "
                "add sslmode=verify-full and sslrootcert=<CA bundle> to METASTORE_DATABASE_URL (or set PGSSLMODE)"
            )
        log.warning(
            "the database connection does not verify the server (sslmode=%s): use sslmode=verify-full "
            "in production, and METASTORE_DATABASE_TLS=verify-full to require it",
            mode,
        )
    return status(mode)
