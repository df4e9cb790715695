"""Settings from METASTORE_* environment variables, validated once at start."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class ConfigError(ValueError):
    """A setting is missing or wrong; the message names it and says what is expected."""


@dataclass(frozen=True)
class Setting:
    env: str
    default: str | None
    meaning: str


# The single list of settings: the table in docs/service.md is generated from it (`metastore settings`).
SETTINGS: tuple[Setting, ...] = (
    Setting("METASTORE_DATABASE_URL", None, "libpq connection string or URL of the application role (required)."),
    Setting("METASTORE_HOST", "0.0.0.0", "Address to listen on."),
    Setting("METASTORE_PORT", "8443", "TCP port to listen on."),
    Setting("METASTORE_TLS_CERT", None, "PEM certificate chain for HTTPS."),
    Setting("METASTORE_TLS_KEY", None, "PEM private key for HTTPS."),
    Setting("METASTORE_TLS", "on", "`off` serves plain HTTP (behind a TLS-terminating mesh, or locally)."),
    Setting("METASTORE_MAX_BODY_BYTES", "16777216", "Largest request body accepted, also after gzip inflation."),
    Setting(
        "METASTORE_INGEST_TIMEOUT_MS",
        "1500",
        "Budget of a POST's database work, waiting for a connection included. Twice this plus Trino's 1 s "
        "pause before its one retry stays under Trino's 5 s timeout.",
    ),
    Setting("METASTORE_READ_TIMEOUT_MS", "1000", "Budget of a read request's database work (own pool)."),
    Setting(
        "METASTORE_DB_TIMEOUT_MS",
        "10000",
        "Deadline of each statement of the async writers (not on Trino's clock).",
    ),
    Setting("METASTORE_DB_CONNECT_TIMEOUT_S", "2", "Deadline to open a database connection (libpq minimum is 2)."),
    Setting("METASTORE_POOL_MIN", "2", "Ingest pool: connections kept open."),
    Setting("METASTORE_POOL_MAX", "8", "Ingest pool: most connections opened."),
    Setting("METASTORE_READ_POOL_MAX", "3", "Read pool (datasets API and view): most connections opened."),
    Setting("METASTORE_TLS_RELOAD_S", "30", "How often to look for a renewed certificate or key file (0: never)."),
    Setting(
        "METASTORE_INGEST_MODE", "sync", "`sync`: 201 once committed. `async`: 202 once queued (below, 'Ingest modes')."
    ),
    Setting(
        "METASTORE_SPOOL_DIR",
        None,
        "Directory of the durable spool: accepted events are fsynced here before a 202 (async mode, and sync mode "
        "when the database misses the ingest budget) and replayed at start. Unset: no spool.",
    ),
    Setting("METASTORE_SPOOL_MAX_BYTES", "1073741824", "Most bytes the spool holds on disk; beyond, 503."),
    Setting(
        "METASTORE_SPOOL_HANDOFF_MS",
        "250",
        "Sync mode with a spool: how long a POST waits for its commit before the event is spooled (202).",
    ),
    Setting(
        "METASTORE_GROUP_COMMIT_EVENTS",
        "64",
        "Sync mode: most events of concurrent POSTs stored in one transaction, one commit (group commit; "
        "1: a transaction each).",
    ),
    Setting("METASTORE_GROUP_COMMIT_BYTES", "1048576", "Sync mode: most bytes of events in one group commit."),
    Setting(
        "METASTORE_LARGE_EVENT_BYTES",
        "262144",
        "Sync mode: events larger than this (after inflation) are stored one by one on connections of their own, "
        "at most METASTORE_LARGE_EVENT_CALLS at once, never grouped with others, and their missed deadlines do "
        "not open the circuit breaker.",
    ),
    Setting("METASTORE_LARGE_EVENT_CALLS", "1", "Sync mode: most large events being stored at once."),
    Setting(
        "METASTORE_LARGE_EVENT_SHARE_PERCENT",
        "10",
        "Sync mode: while other events are being stored, large events get at most this share of the large "
        "events' connections' time (after a call of t seconds they rest t x (100 / share - 1)); 100: no rest.",
    ),
    Setting(
        "METASTORE_GROUP_COMMIT_CALLS",
        "2",
        "Sync mode with group commit: most group calls in flight at once, each a connection of the ingest pool "
        "(unset: 2, or METASTORE_POOL_MAX if smaller).",
    ),
    Setting("METASTORE_ASYNC_QUEUE_SIZE", "10000", "Async mode: most events accepted and not yet stored."),
    Setting(
        "METASTORE_ASYNC_QUEUE_BYTES",
        "67108864",
        "Async mode without a spool: most bytes of events held in memory (with a spool they wait on disk).",
    ),
    Setting(
        "METASTORE_ASYNC_QUEUE_FULL",
        "sync",
        "Async mode, queue full: `sync` (store it now), `wait`, or `reject` (503).",
    ),
    Setting("METASTORE_ASYNC_QUEUE_WAIT_MS", "200", "Async mode with `wait`: how long to wait for room before a 503."),
    Setting("METASTORE_ASYNC_BATCH_SIZE", "200", "Most events one writer stores in one transaction."),
    Setting("METASTORE_ASYNC_BATCH_BYTES", "4194304", "Most bytes of events one writer stores in one transaction."),
    Setting("METASTORE_ASYNC_WRITERS", "2", "Writers storing queued events concurrently."),
    Setting(
        "METASTORE_WRITER_STUCK_S",
        "60",
        "A writer that has stored nothing for this long while events wait makes /readyz fail.",
    ),
    Setting("METASTORE_MAX_CONNECTIONS", "1000", "Most client connections open at once; beyond, 503 and close."),
    Setting(
        "METASTORE_MAX_INFLIGHT_BYTES",
        "67108864",
        "Most request bytes being received or inflated at once, all requests together; beyond, 503 with Retry-After.",
    ),
    Setting(
        "METASTORE_REQUEST_DEADLINE_S",
        "10",
        "Longest time to receive a request's headers, then its body (in total, not per byte).",
    ),
    Setting(
        "METASTORE_SHUTDOWN_GRACE_S",
        "20",
        "On SIGTERM: time to finish requests and drain the queue (below Kubernetes' 30 s).",
    ),
    Setting("METASTORE_READY_TIMEOUT_MS", "800", "Bound of the readiness probe's database canary (own connection)."),
    Setting("METASTORE_LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR."),
    Setting(
        "METASTORE_LOG_LEVELS",
        None,
        "Levels of single loggers, e.g. `sanic.access=WARNING,metastore.db=DEBUG` (the rest: METASTORE_LOG_LEVEL).",
    ),
    Setting(
        "METASTORE_LOG_FILE",
        None,
        "Also write JSON logs to this file, e.g. `/stackable/log/metastore/metastore.py.json`.",
    ),
    Setting(
        "METASTORE_ACCESS_LOG", "off", "`on`: a log line per request (method, route, status, duration, request id)."
    ),
    Setting(
        "METASTORE_TLS_CLIENT_CA",
        None,
        "PEM bundle of CAs for optional client certificates: a verified one makes events `authenticated` "
        "(principal: its subject); one that fails verification is refused at the handshake.",
    ),
    Setting(
        "METASTORE_TLS_EXPIRY_WARNING_DAYS",
        "7",
        "Log a warning when the served certificate expires within this many days.",
    ),
    Setting(
        "METASTORE_DATABASE_TLS",
        "any",
        "`verify-full`: refuse to start unless the database connection uses sslmode=verify-full (production).",
    ),
    Setting(
        "METASTORE_FRAME_ANCESTORS",
        "'self'",
        "CSP frame-ancestors of the view: who may embed it in a frame, e.g. `'self' https://cockpit.example.com`.",
    ),
    Setting(
        "METASTORE_FORWARD_URL",
        None,
        "Forward every stored event to this OpenLineage HTTP endpoint (base URL), at least once, in order.",
    ),
    Setting("METASTORE_FORWARD_CA", None, "PEM CA bundle that signs the forwarding target's certificate."),
)


@dataclass(frozen=True)
class Config:
    database_url: str
    host: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None
    max_body_bytes: int
    ingest_timeout_ms: int
    read_timeout_ms: int
    db_timeout_ms: int
    db_connect_timeout_s: int
    pool_min: int
    pool_max: int
    read_pool_max: int
    log_level: str
    log_file: Path | None
    tls_reload_s: int
    ingest_mode: str
    spool_dir: Path | None
    spool_max_bytes: int
    spool_handoff_ms: int
    queue_size: int
    queue_bytes: int
    queue_full: str
    queue_wait_ms: int
    batch_size: int
    batch_bytes: int
    writers: int
    writer_stuck_s: int
    max_connections: int
    max_inflight_bytes: int
    request_deadline_s: int
    shutdown_grace_s: int
    ready_timeout_ms: int
    access_log: bool
    # Defaults so that a Config made by hand stays valid.
    tls_client_ca: Path | None = None
    tls_expiry_warning_days: int = 7
    database_tls: str = "any"
    frame_ancestors: str = "'self'"
    group_events: int = 64
    group_bytes: int = 1 << 20
    group_calls: int = 2
    large_event_bytes: int = 256 << 10
    large_event_calls: int = 1
    large_event_share_percent: int = 10

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def _int(env: Mapping[str, str], name: str, low: int, high: int) -> int:
    raw = _get(env, name)
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise ConfigError(f"{name}={value} is outside {low}..{high}")
    return value


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = _get(env, name).lower()
    if value not in choices:
        raise ConfigError(f"{name}={value!r}: use {', '.join(choices)}")
    return value


def _get(env: Mapping[str, str], name: str) -> str:
    default = next(s.default for s in SETTINGS if s.env == name)
    value = env.get(name, "").strip()
    if value:
        return value
    if default is None:
        return ""
    return default


def load(env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    database_url = _get(env, "METASTORE_DATABASE_URL")
    if not database_url:
        raise ConfigError("METASTORE_DATABASE_URL is required: the PostgreSQL connection string of the service role")

    tls_switch = _choice(env, "METASTORE_TLS", ("on", "off"))
    cert, key = _get(env, "METASTORE_TLS_CERT"), _get(env, "METASTORE_TLS_KEY")
    tls_cert = tls_key = None
    if tls_switch == "on":
        if not (cert and key):
            raise ConfigError(
                "HTTPS needs METASTORE_TLS_CERT and METASTORE_TLS_KEY (PEM files); "
                "set METASTORE_TLS=off to serve plain HTTP behind a TLS-terminating proxy"
            )
        tls_cert, tls_key = Path(cert), Path(key)
        for name, path in (("METASTORE_TLS_CERT", tls_cert), ("METASTORE_TLS_KEY", tls_key)):
            if not path.is_file():
                raise ConfigError(f"{name}={path} is not a readable file")

    pool_min = _int(env, "METASTORE_POOL_MIN", 0, 1000)
    pool_max = _int(env, "METASTORE_POOL_MAX", 1, 1000)
    if pool_max < pool_min:
        raise ConfigError(f"METASTORE_POOL_MAX={pool_max} is below METASTORE_POOL_MIN={pool_min}")
    log_level = _choice(env, "METASTORE_LOG_LEVEL", ("debug", "info", "warning", "error")).upper()
    log_file = _get(env, "METASTORE_LOG_FILE")
    if log_file and not Path(log_file).parent.is_dir():
        raise ConfigError(f"METASTORE_LOG_FILE={log_file}: its directory does not exist")
    spool_dir = _get(env, "METASTORE_SPOOL_DIR")
    if spool_dir:
        try:
            Path(spool_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"METASTORE_SPOOL_DIR={spool_dir}: cannot create it ({exc.strerror})") from None
        if not os.access(spool_dir, os.W_OK | os.X_OK):
            raise ConfigError(f"METASTORE_SPOOL_DIR={spool_dir} is not a writable directory")
    ingest_timeout_ms = _int(env, "METASTORE_INGEST_TIMEOUT_MS", 50, 60_000)
    max_body_bytes = _int(env, "METASTORE_MAX_BODY_BYTES", 1024, 1 << 30)
    max_inflight_bytes = _int(env, "METASTORE_MAX_INFLIGHT_BYTES", 1 << 16, 1 << 40)
    if max_inflight_bytes < max_body_bytes:
        raise ConfigError(
            f"METASTORE_MAX_INFLIGHT_BYTES={max_inflight_bytes} is below METASTORE_MAX_BODY_BYTES={max_body_bytes}: "
            "the largest accepted body could never be received"
        )
    client_ca = _get(env, "METASTORE_TLS_CLIENT_CA")
    if client_ca and tls_cert is None:
        raise ConfigError("METASTORE_TLS_CLIENT_CA needs HTTPS (METASTORE_TLS=on with a certificate and key)")
    if client_ca and not Path(client_ca).is_file():
        raise ConfigError(f"METASTORE_TLS_CLIENT_CA={client_ca} is not a readable file")
    return Config(
        database_url=database_url,
        host=_get(env, "METASTORE_HOST"),
        port=_int(env, "METASTORE_PORT", 0, 65535),
        tls_cert=tls_cert,
        tls_key=tls_key,
        max_body_bytes=max_body_bytes,
        ingest_timeout_ms=ingest_timeout_ms,
        read_timeout_ms=_int(env, "METASTORE_READ_TIMEOUT_MS", 50, 600_000),
        db_timeout_ms=_int(env, "METASTORE_DB_TIMEOUT_MS", 10, 600_000),
        db_connect_timeout_s=_int(env, "METASTORE_DB_CONNECT_TIMEOUT_S", 2, 600),
        pool_min=pool_min,
        pool_max=pool_max,
        read_pool_max=_int(env, "METASTORE_READ_POOL_MAX", 1, 1000),
        log_level=log_level,
        log_file=Path(log_file) if log_file else None,
        tls_reload_s=_int(env, "METASTORE_TLS_RELOAD_S", 0, 86_400),
        ingest_mode=_choice(env, "METASTORE_INGEST_MODE", ("sync", "async")),
        spool_dir=Path(spool_dir) if spool_dir else None,
        spool_max_bytes=_int(env, "METASTORE_SPOOL_MAX_BYTES", 1 << 20, 1 << 50),
        spool_handoff_ms=_int(env, "METASTORE_SPOOL_HANDOFF_MS", 10, 60_000),
        queue_size=_int(env, "METASTORE_ASYNC_QUEUE_SIZE", 1, 10_000_000),
        queue_bytes=_int(env, "METASTORE_ASYNC_QUEUE_BYTES", 1024, 1 << 40),
        queue_full=_choice(env, "METASTORE_ASYNC_QUEUE_FULL", ("sync", "wait", "reject")),
        queue_wait_ms=_int(env, "METASTORE_ASYNC_QUEUE_WAIT_MS", 0, 60_000),
        batch_size=_int(env, "METASTORE_ASYNC_BATCH_SIZE", 1, 10_000),
        batch_bytes=_int(env, "METASTORE_ASYNC_BATCH_BYTES", 1024, 1 << 30),
        writers=_int(env, "METASTORE_ASYNC_WRITERS", 1, 64),
        writer_stuck_s=_int(env, "METASTORE_WRITER_STUCK_S", 1, 86_400),
        max_connections=_int(env, "METASTORE_MAX_CONNECTIONS", 1, 1_000_000),
        max_inflight_bytes=max_inflight_bytes,
        request_deadline_s=_int(env, "METASTORE_REQUEST_DEADLINE_S", 1, 3600),
        shutdown_grace_s=_int(env, "METASTORE_SHUTDOWN_GRACE_S", 1, 3600),
        ready_timeout_ms=_int(env, "METASTORE_READY_TIMEOUT_MS", 50, 60_000),
        access_log=_choice(env, "METASTORE_ACCESS_LOG", ("on", "off")) == "on",
        tls_client_ca=Path(client_ca) if client_ca else None,
        tls_expiry_warning_days=_int(env, "METASTORE_TLS_EXPIRY_WARNING_DAYS", 0, 3650),
        database_tls=_choice(env, "METASTORE_DATABASE_TLS", ("any", "verify-full")),
        frame_ancestors=_frame_ancestors(_get(env, "METASTORE_FRAME_ANCESTORS")),
        group_events=_int(env, "METASTORE_GROUP_COMMIT_EVENTS", 1, 10_000),
        group_bytes=_int(env, "METASTORE_GROUP_COMMIT_BYTES", 1024, 1 << 30),
        large_event_bytes=_int(env, "METASTORE_LARGE_EVENT_BYTES", 1024, 1 << 30),
        large_event_calls=_int(env, "METASTORE_LARGE_EVENT_CALLS", 1, 64),
        large_event_share_percent=_int(env, "METASTORE_LARGE_EVENT_SHARE_PERCENT", 1, 100),
        # Unset, it follows a smaller pool down; set, it must fit in the pool.
        group_calls=(
            _int(env, "METASTORE_GROUP_COMMIT_CALLS", 1, pool_max)
            if env.get("METASTORE_GROUP_COMMIT_CALLS", "").strip()
            else min(int(_get(env, "METASTORE_GROUP_COMMIT_CALLS")), pool_max)
        ),
    )


# A CSP source expression (scheme, host with optional scheme, port and wildcard) or a keyword:
# nothing that could end the directive or the header.
_SOURCE = re.compile(r"'none'|'self'|[a-z][a-z0-9+.-]*:|([a-z][a-z0-9+.-]*://)?(\*\.)?[a-z0-9.-]+(:(\d+|\*))?", re.I)


def _frame_ancestors(value: str) -> str:
    sources = value.split()
    bad = [s for s in sources if not _SOURCE.fullmatch(s)]
    if not sources or bad or ("'none'" in sources and len(sources) > 1):
        raise ConfigError(
            f"METASTORE_FRAME_ANCESTORS={value!r}: give 'none', or CSP sources separated by spaces "
            "('self', https://cockpit.example.com, https://*.example.com)"
        )
    return " ".join(sources)


def settings_table() -> str:
    """The settings as a Markdown table, for docs/service.md."""
    rows = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default is not None else "(none)"
        rows.append(f"| `{s.env}` | {default} | {s.meaning} |")
    return "\n".join(rows)
