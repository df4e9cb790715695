"""Settings from METASTORE_* environment variables, validated once at start."""

from __future__ import annotations

import os
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


# The single list of settings: the README table is generated from it (`metastore settings`).
SETTINGS: tuple[Setting, ...] = (
    Setting("METASTORE_DATABASE_URL", None, "libpq connection string or URL of the application role (required)."),
    Setting("METASTORE_HOST", "0.0.0.0", "Address to listen on."),
    Setting("METASTORE_PORT", "8443", "TCP port to listen on."),
    Setting("METASTORE_TLS_CERT", None, "PEM certificate chain for HTTPS."),
    Setting("METASTORE_TLS_KEY", None, "PEM private key for HTTPS."),
    Setting("METASTORE_TLS", "on", "`off` serves plain HTTP (behind a TLS-terminating mesh, or locally)."),
    Setting("METASTORE_MAX_BODY_BYTES", "16777216", "Largest request body accepted, also after gzip inflation."),
    Setting("METASTORE_DB_TIMEOUT_MS", "3000", "Deadline of each database statement (below Trino's 5 s timeout)."),
    Setting("METASTORE_DB_CONNECT_TIMEOUT_S", "2", "Deadline to open a database connection (libpq minimum is 2)."),
    Setting("METASTORE_POOL_MIN", "2", "Connections kept open."),
    Setting("METASTORE_POOL_MAX", "10", "Most connections opened."),
    Setting("METASTORE_POOL_TIMEOUT_S", "1", "Longest wait for a free connection before answering 503."),
    Setting("METASTORE_TLS_RELOAD_S", "30", "How often to look for a renewed certificate or key file (0: never)."),
    Setting(
        "METASTORE_INGEST_MODE", "sync", "`sync`: 201 once committed. `async`: 202 once queued in memory (see README)."
    ),
    Setting("METASTORE_ASYNC_QUEUE_SIZE", "10000", "Async mode: most events held in memory."),
    Setting("METASTORE_ASYNC_QUEUE_BYTES", "268435456", "Async mode: most bytes of events held in memory."),
    Setting(
        "METASTORE_ASYNC_QUEUE_FULL",
        "sync",
        "Async mode, queue full: `sync` (store it now), `wait`, or `reject` (503).",
    ),
    Setting("METASTORE_ASYNC_QUEUE_WAIT_MS", "200", "Async mode with `wait`: how long to wait for room before a 503."),
    Setting("METASTORE_ASYNC_BATCH_SIZE", "200", "Async mode: most events one writer stores in one transaction."),
    Setting("METASTORE_ASYNC_WRITERS", "2", "Async mode: writers storing batches concurrently."),
    Setting(
        "METASTORE_SHUTDOWN_GRACE_S",
        "20",
        "On SIGTERM: time to finish requests and drain the queue (below Kubernetes' 30 s).",
    ),
    Setting("METASTORE_READY_TIMEOUT_MS", "800", "Bound of the readiness probe's database canary."),
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
)


@dataclass(frozen=True)
class Config:
    database_url: str
    host: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None
    max_body_bytes: int
    db_timeout_ms: int
    db_connect_timeout_s: int
    pool_min: int
    pool_max: int
    pool_timeout_s: float
    log_level: str
    log_file: Path | None
    tls_reload_s: int
    ingest_mode: str
    queue_size: int
    queue_bytes: int
    queue_full: str
    queue_wait_ms: int
    batch_size: int
    writers: int
    shutdown_grace_s: int
    ready_timeout_ms: int

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
    db_timeout_ms = _int(env, "METASTORE_DB_TIMEOUT_MS", 10, 600_000)
    return Config(
        database_url=database_url,
        host=_get(env, "METASTORE_HOST"),
        port=_int(env, "METASTORE_PORT", 0, 65535),
        tls_cert=tls_cert,
        tls_key=tls_key,
        max_body_bytes=_int(env, "METASTORE_MAX_BODY_BYTES", 1024, 1 << 30),
        db_timeout_ms=db_timeout_ms,
        db_connect_timeout_s=_int(env, "METASTORE_DB_CONNECT_TIMEOUT_S", 2, 600),
        pool_min=pool_min,
        pool_max=pool_max,
        pool_timeout_s=_int(env, "METASTORE_POOL_TIMEOUT_S", 1, 600),
        log_level=log_level,
        log_file=Path(log_file) if log_file else None,
        tls_reload_s=_int(env, "METASTORE_TLS_RELOAD_S", 0, 86_400),
        ingest_mode=_choice(env, "METASTORE_INGEST_MODE", ("sync", "async")),
        queue_size=_int(env, "METASTORE_ASYNC_QUEUE_SIZE", 1, 10_000_000),
        queue_bytes=_int(env, "METASTORE_ASYNC_QUEUE_BYTES", 1024, 1 << 40),
        queue_full=_choice(env, "METASTORE_ASYNC_QUEUE_FULL", ("sync", "wait", "reject")),
        queue_wait_ms=_int(env, "METASTORE_ASYNC_QUEUE_WAIT_MS", 0, 60_000),
        batch_size=_int(env, "METASTORE_ASYNC_BATCH_SIZE", 1, 10_000),
        writers=_int(env, "METASTORE_ASYNC_WRITERS", 1, 64),
        shutdown_grace_s=_int(env, "METASTORE_SHUTDOWN_GRACE_S", 1, 3600),
        ready_timeout_ms=_int(env, "METASTORE_READY_TIMEOUT_MS", 50, 60_000),
    )


def settings_table() -> str:
    """The settings as a Markdown table, for the README."""
    rows = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    for s in SETTINGS:
        default = f"`{s.default}`" if s.default is not None else "(none)"
        rows.append(f"| `{s.env}` | {default} | {s.meaning} |")
    return "\n".join(rows)
