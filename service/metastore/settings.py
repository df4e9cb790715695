"""Every METASTORE_* setting, declared once: its variable, default, meaning and parser. The server's
(SETTINGS), the admin commands' (ADMIN) and the client's (CLIENT); `config` reads them, and the
docs' tables are generated from them (`metastore settings`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A setting is missing or wrong; the message names it and says what is expected."""


Parse = Callable[[str, str], Any]


@dataclass(frozen=True)
class Setting:
    """One setting, declared once: its variable, default, meaning (the docs' table), how its text is
    read and checked, and the Config field it fills."""

    env: str
    default: str | None
    meaning: str
    parse: Parse
    field: str = ""  # the Config field; "": the variable's name without METASTORE_, lower-cased

    @property
    def name(self) -> str:
        return self.field or self.env.removeprefix("METASTORE_").lower()


def text(name: str, raw: str) -> str:
    return raw


def path(name: str, raw: str) -> Path | None:
    return Path(raw) if raw else None


def whole(low: int, high: int) -> Parse:
    def parse(name: str, raw: str) -> int | None:
        if not raw:
            return None
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a whole number") from None
        if not low <= value <= high:
            raise ConfigError(f"{name}={value} is outside {low}..{high}")
        return value

    return parse


def choice(*choices: str) -> Parse:
    def parse(name: str, raw: str) -> str:
        value = raw.lower()
        if value not in choices:
            raise ConfigError(f"{name}={value!r}: use {', '.join(choices)}")
        return value

    return parse


def switch(name: str, raw: str) -> bool:
    return bool(choice("on", "off")(name, raw) == "on")


def log_level(name: str, raw: str) -> str:
    return str(choice("debug", "info", "warning", "error")(name, raw)).upper()


def log_levels(name: str, raw: str) -> dict[str, str]:
    from metastore.logs import parse_levels

    try:
        return parse_levels(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def readable_file(name: str, raw: str) -> Path | None:
    if not raw:
        return None
    if not os.path.isfile(raw) or not os.access(raw, os.R_OK):
        raise ConfigError(f"{name}={raw} is not a readable file")
    return Path(raw)


def writable_dir(name: str, raw: str) -> Path | None:
    if not raw:
        return None
    try:
        Path(raw).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{name}={raw}: cannot create it ({exc.strerror})") from None
    if not os.access(raw, os.W_OK | os.X_OK):
        raise ConfigError(f"{name}={raw} is not a writable directory")
    return Path(raw)


def log_file(name: str, raw: str) -> Path | None:
    if raw and not Path(raw).parent.is_dir():
        raise ConfigError(f"{name}={raw}: its directory does not exist")
    return Path(raw) if raw else None


# A CSP source expression (scheme, host with optional scheme, port and wildcard) or a keyword:
# nothing that could end the directive or the header.
_SOURCE = re.compile(r"'none'|'self'|[a-z][a-z0-9+.-]*:|([a-z][a-z0-9+.-]*://)?(\*\.)?[a-z0-9.-]+(:(\d+|\*))?", re.I)


def frame_ancestors(name: str, raw: str) -> str:
    sources = raw.split()
    bad = [s for s in sources if not _SOURCE.fullmatch(s)]
    if not sources or bad or ("'none'" in sources and len(sources) > 1):
        raise ConfigError(
            f"{name}={raw!r}: give 'none', or CSP sources separated by spaces "
            "('self', https://cockpit.example.com, https://*.example.com)"
        )
    return " ".join(sources)


# The server's settings: the table in docs/service.md is generated from them.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "METASTORE_DATABASE_URL",
        None,
        "libpq connection string or URL of the application role (required).",
        text,
    ),
    Setting(
        "METASTORE_DATABASE_USER_FILE",
        None,
        "A file holding the role's name (e.g. a mounted credentials Secret's `username`), read at each new "
        "connection; wins over the connection string and PGUSER.",
        readable_file,
    ),
    Setting(
        "METASTORE_DATABASE_PASSWORD_FILE",
        None,
        "A file holding the role's password (a mounted Secret's `password`), read at each new connection, so a "
        "rotated password is used without a restart; wins over the connection string and PGPASSWORD.",
        readable_file,
    ),
    Setting(
        "METASTORE_HOST",
        "::",
        "Address to listen on. `::`: every address, IPv6 and IPv4 (dual stack; IPv4 only where the host has no IPv6).",
        text,
    ),
    Setting("METASTORE_PORT", "8443", "TCP port to listen on.", whole(0, 65535)),
    Setting(
        "METASTORE_METRICS_PORT",
        None,
        "A second port, serving only `GET /metrics` in plain HTTP (no TLS), for a monitoring stack that scrapes "
        "that way; unset: /metrics only on METASTORE_PORT.",
        whole(1, 65535),
    ),
    Setting("METASTORE_TLS_CERT", None, "PEM certificate chain for HTTPS.", path),
    Setting("METASTORE_TLS_KEY", None, "PEM private key for HTTPS.", path),
    Setting(
        "METASTORE_TLS", "on", "`off` serves plain HTTP (behind a TLS-terminating mesh, or locally).", switch, "tls_on"
    ),
    Setting(
        "METASTORE_MAX_BODY_BYTES",
        "16777216",
        "Largest request body accepted, also after gzip inflation.",
        whole(1024, 1 << 30),
    ),
    Setting(
        "METASTORE_INGEST_TIMEOUT_MS",
        "1500",
        "Budget of a POST's database work, waiting for a connection included. Twice this plus Trino's 1 s "
        "pause before its one retry stays under Trino's 5 s timeout.",
        whole(50, 60_000),
    ),
    Setting(
        "METASTORE_READ_TIMEOUT_MS",
        "1000",
        "Budget of a read request's database work (own pool).",
        whole(50, 600_000),
    ),
    Setting(
        "METASTORE_DB_TIMEOUT_MS",
        "10000",
        "Deadline of each statement of the async writers (not on Trino's clock).",
        whole(10, 600_000),
    ),
    Setting(
        "METASTORE_DB_CONNECT_TIMEOUT_S",
        "2",
        "Deadline to open a database connection (libpq minimum is 2).",
        whole(2, 600),
    ),
    Setting("METASTORE_POOL_MIN", "2", "Ingest pool: connections kept open.", whole(0, 1000)),
    Setting("METASTORE_POOL_MAX", "8", "Ingest pool: most connections opened.", whole(1, 1000)),
    Setting(
        "METASTORE_READ_POOL_MAX",
        "3",
        "Read pool (datasets API and view): most connections opened.",
        whole(1, 1000),
    ),
    Setting(
        "METASTORE_READ_REPLICA_URL",
        None,
        "libpq connection string or URL of a streaming replica (hot standby) of the database for the datasets, "
        "jobs and runs reads and the view, as the same role (METASTORE_DATABASE_USER_FILE and "
        "METASTORE_DATABASE_PASSWORD_FILE apply to it too); its own read pool of METASTORE_READ_POOL_MAX. "
        "The event feed and forwarding stay on the primary. Unset: every read on the primary.",
        text,
    ),
    Setting(
        "METASTORE_READ_REPLICA_MAX_LAG_S",
        "5",
        "Most a read from the replica may be behind the primary: beyond (or with the replica unreachable), "
        "reads go to the primary until it has caught up.",
        whole(2, 86_400),
    ),
    Setting(
        "METASTORE_TLS_RELOAD_S",
        "30",
        "How often to look for a renewed certificate or key file (0: never).",
        whole(0, 86_400),
    ),
    Setting(
        "METASTORE_INGEST_MODE",
        "sync",
        "`sync`: 201 once committed. `async`: 202 once queued (below, 'Ingest modes').",
        choice("sync", "async"),
    ),
    Setting(
        "METASTORE_SPOOL_DIR",
        None,
        "Directory of the durable spool: accepted events are fsynced here before a 202 (async mode, and sync mode "
        "when the database misses the ingest budget) and replayed at start. Unset: no spool.",
        writable_dir,
    ),
    Setting(
        "METASTORE_SPOOL_MAX_BYTES",
        "1073741824",
        "Most bytes the spool holds on disk; beyond, 503.",
        whole(1 << 20, 1 << 50),
    ),
    Setting(
        "METASTORE_SPOOL_HANDOFF_MS",
        "250",
        "Sync mode with a spool: how long a POST waits for its commit before the event is spooled (202).",
        whole(10, 60_000),
    ),
    Setting(
        "METASTORE_GROUP_COMMIT_EVENTS",
        "64",
        "Sync mode: most events of concurrent POSTs stored in one transaction, one commit (group commit; "
        "1: a transaction each).",
        whole(1, 10_000),
        "group_events",
    ),
    Setting(
        "METASTORE_GROUP_COMMIT_BYTES",
        "1048576",
        "Sync mode: most bytes of events in one group commit.",
        whole(1024, 1 << 30),
        "group_bytes",
    ),
    Setting(
        "METASTORE_LARGE_EVENT_BYTES",
        "262144",
        "Sync mode: events larger than this (after inflation) are stored one by one on connections of their own, "
        "at most METASTORE_LARGE_EVENT_CALLS at once, never grouped with others, and their missed deadlines do "
        "not open the circuit breaker.",
        whole(1024, 1 << 30),
    ),
    Setting(
        "METASTORE_LARGE_EVENT_CALLS",
        "1",
        "Sync mode: most large events being stored at once.",
        whole(1, 64),
    ),
    Setting(
        "METASTORE_LARGE_EVENT_SHARE_PERCENT",
        "10",
        "Sync mode: while other events are being stored, large events get at most this share of the large "
        "events' connections' time (after a call of t seconds they rest t x (100 / share - 1)); 100: no rest.",
        whole(1, 100),
    ),
    Setting(
        "METASTORE_GROUP_COMMIT_CALLS",
        "2",
        "Sync mode with group commit: most group calls in flight at once, each a connection of the ingest pool "
        "(unset: 2, or METASTORE_POOL_MAX if smaller).",
        whole(1, 1000),
        "group_calls",
    ),
    Setting(
        "METASTORE_ASYNC_QUEUE_SIZE",
        "10000",
        "Async mode: most events accepted and not yet stored.",
        whole(1, 10_000_000),
        "queue_size",
    ),
    Setting(
        "METASTORE_ASYNC_QUEUE_BYTES",
        "67108864",
        "Async mode without a spool: most bytes of events held in memory (with a spool they wait on disk).",
        whole(1024, 1 << 40),
        "queue_bytes",
    ),
    Setting(
        "METASTORE_ASYNC_QUEUE_FULL",
        "sync",
        "Async mode, queue full: `sync` (store it now), `wait`, or `reject` (503).",
        choice("sync", "wait", "reject"),
        "queue_full",
    ),
    Setting(
        "METASTORE_ASYNC_QUEUE_WAIT_MS",
        "200",
        "Async mode with `wait`: how long to wait for room before a 503.",
        whole(0, 60_000),
        "queue_wait_ms",
    ),
    Setting(
        "METASTORE_ASYNC_BATCH_SIZE",
        "200",
        "Most events one writer stores in one transaction.",
        whole(1, 10_000),
        "batch_size",
    ),
    Setting(
        "METASTORE_ASYNC_BATCH_BYTES",
        "4194304",
        "Most bytes of events one writer stores in one transaction.",
        whole(1024, 1 << 30),
        "batch_bytes",
    ),
    Setting("METASTORE_ASYNC_WRITERS", "2", "Writers storing queued events concurrently.", whole(1, 64), "writers"),
    Setting(
        "METASTORE_WRITER_STUCK_S",
        "60",
        "A writer that has stored nothing for this long while events wait makes /readyz fail.",
        whole(1, 86_400),
    ),
    Setting(
        "METASTORE_MAX_CONNECTIONS",
        "1000",
        "Most client connections open at once; beyond, 503 and close.",
        whole(1, 1_000_000),
    ),
    Setting(
        "METASTORE_MAX_INFLIGHT_BYTES",
        "67108864",
        "Most request bytes being received or inflated at once, all requests together; beyond, 503 with Retry-After.",
        whole(1 << 16, 1 << 40),
    ),
    Setting(
        "METASTORE_REQUEST_DEADLINE_S",
        "10",
        "Longest time to receive a request's headers, then its body (in total, not per byte).",
        whole(1, 3600),
    ),
    Setting(
        "METASTORE_SHUTDOWN_GRACE_S",
        "20",
        "On SIGTERM: time to finish requests and drain the queue (below Kubernetes' 30 s).",
        whole(1, 3600),
    ),
    Setting(
        "METASTORE_READY_TIMEOUT_MS",
        "800",
        "Bound of the readiness probe's database canary (own connection).",
        whole(50, 60_000),
    ),
    Setting("METASTORE_LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR.", log_level),
    Setting(
        "METASTORE_LOG_LEVELS",
        None,
        "Levels of single loggers, e.g. `sanic.access=WARNING,metastore.db=DEBUG` (the rest: METASTORE_LOG_LEVEL).",
        log_levels,
    ),
    Setting(
        "METASTORE_LOG_FILE",
        None,
        "Also write JSON logs to this file, e.g. `/stackable/log/metastore/metastore.py.json`.",
        log_file,
    ),
    Setting(
        "METASTORE_ACCESS_LOG",
        "off",
        "`on`: a log line per request (method, route, status, duration, request id).",
        switch,
    ),
    Setting(
        "METASTORE_TLS_CLIENT_CA",
        None,
        "PEM bundle of CAs for optional client certificates: a verified one makes events `authenticated` "
        "(principal: its subject); one that fails verification is refused at the handshake.",
        readable_file,
    ),
    Setting(
        "METASTORE_TLS_EXPIRY_WARNING_DAYS",
        "7",
        "Log a warning when the served certificate expires within this many days.",
        whole(0, 3650),
    ),
    Setting(
        "METASTORE_DATABASE_TLS",
        "any",
        "`verify-full`: refuse to start unless the database connection uses sslmode=verify-full (production).",
        choice("any", "verify-full"),
    ),
    Setting(
        "METASTORE_FRAME_ANCESTORS",
        "'self'",
        "CSP frame-ancestors of the view: who may embed it in a frame, e.g. `'self' https://cockpit.example.com`.",
        frame_ancestors,
    ),
    Setting(
        "METASTORE_FORWARD_URL",
        None,
        "Forward every stored event to this OpenLineage HTTP endpoint (base URL), at least once, in order.",
        text,
    ),
    Setting(
        "METASTORE_FORWARD_CA",
        None,
        "PEM CA bundle that signs the forwarding target's certificate.",
        readable_file,
    ),
    Setting(
        "METASTORE_FEED_DEADLINE_S",
        "60",
        "GET /api/v1/events: longest time for a whole response; a stream then ends with the cursor to resume "
        "from, a reader that does not take what was sent is disconnected.",
        whole(1, 86_400),
    ),
    Setting(
        "METASTORE_FEED_BUFFER_BYTES",
        "33554432",
        "GET /api/v1/events: most bytes of events read and not yet taken by their readers (the kernel's "
        "send buffers included), all responses together; beyond, a request waits up to the read budget, "
        "then 503 (53000) with Retry-After, connection closed.",
        whole(4 << 20, 1 << 40),
    ),
)


def role_names(name: str, raw: str) -> tuple[str, ...]:
    """Role names as they are spelt, comma-separated."""
    roles = tuple(r.strip() for r in raw.split(",") if r.strip())
    for role in roles:
        if role.lower() == "public" or len(role.encode()) > 63:
            raise ConfigError(
                f"{name}: {role!r} is not a role name (at most 63 bytes; PUBLIC is never allowed: every role "
                "would connect)"
            )
    return roles


# The admin commands' (`metastore db ...`) settings: the table in docs/operations.md is generated
# from them.
ADMIN: tuple[Setting, ...] = (
    Setting(
        "METASTORE_ADMIN_DATABASE_URL",
        None,
        "libpq connection string or URL of the role that owns the schema (or `--database-url`).",
        text,
        "database_url",
    ),
    Setting(
        "METASTORE_ADMIN_CONNECT_TIMEOUT_S",
        "5",
        "libpq's `connect_timeout` (per address tried), unless the connection string or `PGCONNECT_TIMEOUT` sets "
        "one; TCP keepalives notice a vanished peer.",
        whole(2, 600),
        "connect_timeout_s",
    ),
    Setting(
        "METASTORE_ADMIN_STATEMENT_TIMEOUT_S",
        None,
        "The server's `statement_timeout` of the session, and a client-side deadline 5 s later that ends the "
        "command even when the server answers nothing (a paused or blackholed server); `lock_timeout` is 30 s. "
        "Unset: 600 for deploy, revert and retention, 10 for the others.",
        whole(1, 86_400),
        "statement_timeout_s",
    ),
    Setting(
        "METASTORE_ADMIN_DATABASE_USER_FILE",
        None,
        "A file holding the owner's role name (a mounted Secret's `username`); wins over the connection string "
        "and PGUSER.",
        readable_file,
        "user_file",
    ),
    Setting(
        "METASTORE_ADMIN_DATABASE_PASSWORD_FILE",
        None,
        "A file holding the owner's password (a mounted Secret's `password`); wins over the connection string "
        "and PGPASSWORD.",
        readable_file,
        "password_file",
    ),
    Setting(
        "METASTORE_ALLOWED_CONNECT_ROLES",
        None,
        "`deploy` and `verify`: roles besides the installation's that may hold `CONNECT` on the database "
        "(section 1), comma-separated.",
        role_names,
        "allowed_connect",
    ),
    Setting(
        "METASTORE_APP_ROLE",
        None,
        "`deploy` (or `--app-role`): this installation's NOLOGIN group role for the service; unset: "
        "`<database>_app` on a first deploy, then the recorded one.",
        text,
        "app_role",
    ),
    Setting(
        "METASTORE_READER_ROLE",
        None,
        "`deploy` (or `--reader-role`): its read-only group role; unset: `<database>_reader`, then the recorded one.",
        text,
        "reader_role",
    ),
    Setting("METASTORE_LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR.", log_level),
)

# The client's (`metastore export | import | replay`) settings.
CLIENT: tuple[Setting, ...] = (
    Setting("METASTORE_URL", None, "Base URL of the store read by `--from` (its default).", text, "url"),
    Setting("METASTORE_LOG_LEVEL", "WARNING", "DEBUG, INFO, WARNING or ERROR (logged to stderr).", log_level),
)


def read(catalogue: tuple[Setting, ...], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Each setting of a catalogue by its `name`, parsed from its variable, else from its default."""
    env = os.environ if env is None else env
    return {s.name: s.parse(s.env, env.get(s.env, "").strip() or s.default or "") for s in catalogue}


def one(catalogue: tuple[Setting, ...], variable: str, env: Mapping[str, str] | None = None) -> Any:
    """One setting of a catalogue, parsed (the others are not read)."""
    (value,) = read(tuple(s for s in catalogue if s.env == variable), env).values()
    return value
