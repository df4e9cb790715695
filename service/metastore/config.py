"""Settings from METASTORE_* environment variables (declared in `settings`), read and checked once
at start: each alone by its parser, then those that must agree with each other."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from metastore.settings import ADMIN, SETTINGS, ConfigError, Setting, read

__all__ = ["SETTINGS", "Admin", "Config", "ConfigError", "load", "load_admin"]


@dataclass(frozen=True)
class Config:
    """The settings as read: one field per Setting (its `name`), typed; defaults and checks are the
    Setting's."""

    database_url: str
    host: str
    port: int
    tls_cert: Path | None
    tls_key: Path | None
    tls_on: bool
    max_body_bytes: int
    ingest_timeout_ms: int
    read_timeout_ms: int
    db_timeout_ms: int
    db_connect_timeout_s: int
    pool_min: int
    pool_max: int
    read_pool_max: int
    read_replica_url: str
    read_replica_max_lag_s: int
    log_level: str
    log_levels: Mapping[str, str]
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
    tls_client_ca: Path | None
    tls_expiry_warning_days: int
    database_tls: str
    frame_ancestors: str
    group_events: int
    group_bytes: int
    group_calls: int
    feed_deadline_s: int
    feed_buffer_bytes: int
    database_user_file: Path | None
    database_password_file: Path | None
    metrics_port: int | None
    large_event_bytes: int
    large_event_calls: int
    large_event_share_percent: int
    forward_url: str
    forward_ca: Path | None

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


def _get(env: Mapping[str, str], name: str) -> str:
    """The variable's text, or its default; "" when unset without one."""
    value = env.get(name, "").strip()
    return value or next(s.default for s in SETTINGS if s.env == name) or ""


def load(env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    if not _get(env, "METASTORE_DATABASE_URL"):
        raise ConfigError("METASTORE_DATABASE_URL is required: the PostgreSQL connection string of the service role")
    if _get(env, "METASTORE_TLS").lower() == "on" and not (
        _get(env, "METASTORE_TLS_CERT") and _get(env, "METASTORE_TLS_KEY")
    ):
        raise ConfigError(
            "HTTPS needs METASTORE_TLS_CERT and METASTORE_TLS_KEY (PEM files); "
            "set METASTORE_TLS=off to serve plain HTTP behind a TLS-terminating proxy"
        )
    values = read(SETTINGS, env)
    # Unset, the group calls follow a smaller pool down; set, they must fit in the pool.
    if not env.get("METASTORE_GROUP_COMMIT_CALLS", "").strip():
        values["group_calls"] = min(2, values["pool_max"])
    elif values["group_calls"] > values["pool_max"]:
        raise ConfigError(f"METASTORE_GROUP_COMMIT_CALLS={values['group_calls']} is outside 1..{values['pool_max']}")
    return _checked(Config(**values))


@dataclass(frozen=True)
class Admin:
    """The admin commands' settings (settings.ADMIN) as read."""

    database_url: str
    connect_timeout_s: int
    statement_timeout_s: int | None
    user_file: Path | None
    password_file: Path | None
    allowed_connect: tuple[str, ...]
    app_role: str
    reader_role: str
    log_level: str


def load_admin(env: Mapping[str, str] | None = None) -> Admin:
    return Admin(**read(ADMIN, env))


def _checked(config: Config) -> Config:
    """What one setting cannot say alone: the settings that must agree with each other."""
    if not config.tls_on:
        config = replace(config, tls_cert=None, tls_key=None)
    for name, file in (("METASTORE_TLS_CERT", config.tls_cert), ("METASTORE_TLS_KEY", config.tls_key)):
        if file is not None and not file.is_file():
            raise ConfigError(f"{name}={file} is not a readable file")
    if config.pool_max < config.pool_min:
        raise ConfigError(f"METASTORE_POOL_MAX={config.pool_max} is below METASTORE_POOL_MIN={config.pool_min}")
    if config.max_inflight_bytes < config.max_body_bytes:
        raise ConfigError(
            f"METASTORE_MAX_INFLIGHT_BYTES={config.max_inflight_bytes} is below METASTORE_MAX_BODY_BYTES="
            f"{config.max_body_bytes}: the largest accepted body could never be received"
        )
    check_conninfo(config.database_url, "METASTORE_DATABASE_URL")
    if config.read_replica_url:
        check_conninfo(config.read_replica_url, "METASTORE_READ_REPLICA_URL")
    if config.metrics_port is not None and config.metrics_port == config.port:
        raise ConfigError(
            f"METASTORE_METRICS_PORT={config.metrics_port} is METASTORE_PORT: give the metrics another port"
        )
    if config.tls_client_ca and config.tls_cert is None:
        raise ConfigError("METASTORE_TLS_CLIENT_CA needs HTTPS (METASTORE_TLS=on with a certificate and key)")
    return config


# libpq's parameters that take a whole number; libpq checks the rest (sslmode, ...) itself.
_INTEGER_PARAMETERS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)


def check_conninfo(dsn: str, setting: str) -> dict[str, str]:
    """The parameters of a libpq connection string or URL, or a ConfigError naming the setting. A
    port that is no number would otherwise be reported at connect time as a host that does not
    resolve. Nothing of the string is quoted back but parameter names and ports: it may hold a
    password."""
    from psycopg import ProgrammingError, conninfo

    try:
        params: dict[str, str] = {k: str(v) for k, v in conninfo.conninfo_to_dict(dsn).items()}
    except ProgrammingError as exc:
        words = str(exc).strip()
        if not words.startswith("invalid connection option"):
            words = re.sub(r'"([^"]*)"', lambda m: m.group(0) if m.group(1) == "=" else '"..."', words)
        raise ConfigError(f"{setting} is not a valid connection string: {words}") from None
    for port in params.get("port", "").split(","):
        if port.strip() and not (port.strip().isdigit() and 1 <= int(port) <= 65535):
            raise ConfigError(f"{setting}: port {port.strip()!r} is not a TCP port (a number from 1 to 65535)")
    for name in _INTEGER_PARAMETERS:
        value = params.get(name, "").strip()
        if value and not value.lstrip("-").isdigit():
            raise ConfigError(f"{setting}: {name} {value!r} is not a whole number")
    return params


def _readable(env: str, default: str) -> str:
    """A byte count that is a whole number of MiB or KiB, as such: `16 MiB` reads, 16777216 must be
    counted."""
    if env.endswith("_BYTES") and default.isdigit():
        for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if int(default) >= size and int(default) % size == 0:
                return f"{int(default) // size} {unit}"
    return default


def settings_table(catalogue: tuple[Setting, ...] = SETTINGS) -> str:
    """A catalogue's settings as a Markdown table: the server's for docs/service.md, the admin
    commands' for docs/operations.md."""
    rows = ["| Variable | Default | Meaning |", "| --- | --- | --- |"]
    for s in catalogue:
        default = f"`{_readable(s.env, s.default)}`" if s.default is not None else "(none)"
        rows.append(f"| `{s.env}` | {default} | {s.meaning} |")
    return "\n".join(rows)
