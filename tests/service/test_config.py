"""metastore serve refuses bad configuration at start, with a message that names the setting."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from metastore import config, settings
from tests.support.certs import TLSFiles

BASE = {"METASTORE_DATABASE_URL": "host=127.0.0.1 dbname=x"}


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({}, "METASTORE_DATABASE_URL"),
        (BASE, "METASTORE_TLS_CERT"),
        (
            {**BASE, "METASTORE_TLS_CERT": "/nonexistent.pem", "METASTORE_TLS_KEY": "/nonexistent.key"},
            "/nonexistent.pem",
        ),
        ({**BASE, "METASTORE_TLS": "maybe"}, "METASTORE_TLS"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_PORT": "http"}, "METASTORE_PORT"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_PORT": "70000"}, "METASTORE_PORT"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_POOL_MIN": "5", "METASTORE_POOL_MAX": "2"}, "METASTORE_POOL_MAX"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_LOG_LEVEL": "loud"}, "METASTORE_LOG_LEVEL"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_MAX_BODY_BYTES": "10"}, "METASTORE_MAX_BODY_BYTES"),
        (
            {
                **BASE,
                "METASTORE_TLS": "off",
                "METASTORE_MAX_BODY_BYTES": "2000000",
                "METASTORE_MAX_INFLIGHT_BYTES": "100000",
            },
            "METASTORE_MAX_INFLIGHT_BYTES",
        ),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_SPOOL_DIR": "/proc/nope"}, "METASTORE_SPOOL_DIR"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_TLS_CLIENT_CA": "/etc/hosts"}, "METASTORE_TLS_CLIENT_CA"),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_DATABASE_TLS": "strict"}, "METASTORE_DATABASE_TLS"),
        (
            {**BASE, "METASTORE_TLS": "off", "METASTORE_TLS_EXPIRY_WARNING_DAYS": "-1"},
            "METASTORE_TLS_EXPIRY_WARNING_DAYS",
        ),
        ({**BASE, "METASTORE_TLS": "off", "METASTORE_FRAME_ANCESTORS": "*; x"}, "METASTORE_FRAME_ANCESTORS"),
        (
            {**BASE, "METASTORE_TLS": "off", "METASTORE_POOL_MAX": "2", "METASTORE_GROUP_COMMIT_CALLS": "3"},
            "METASTORE_GROUP_COMMIT_CALLS",
        ),
    ],
)
def test_bad_settings_are_named(env: dict[str, str], names: str) -> None:
    with pytest.raises(config.ConfigError, match=names):
        config.load(env)


def test_defaults_with_tls(tls_files: TLSFiles) -> None:
    loaded = config.load({**BASE, "METASTORE_TLS_CERT": str(tls_files.cert), "METASTORE_TLS_KEY": str(tls_files.key)})
    assert loaded.tls and loaded.port == 8443
    # Twice the ingest budget and Trino's 1 s pause before its one retry fit in its 5 s timeout.
    assert 2 * loaded.ingest_timeout_ms + 1000 < 5000


def test_group_commit_calls_left_unset_follow_a_smaller_pool() -> None:
    plain = {**BASE, "METASTORE_TLS": "off"}
    assert config.load(plain).group_calls == 2
    assert config.load({**plain, "METASTORE_POOL_MIN": "1", "METASTORE_POOL_MAX": "1"}).group_calls == 1


def test_serve_fails_fast_with_exit_code_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"], env={**env, **BASE}, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "METASTORE_TLS_CERT" in result.stderr and "Traceback" not in result.stderr


def test_every_setting_is_in_the_service_reference() -> None:
    reference = (Path(__file__).resolve().parents[2] / "docs" / "service.md").read_text()
    assert config.settings_table() in reference


def test_the_admin_settings_are_in_the_operators_guide() -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    assert config.settings_table(settings.ADMIN) in guide


@pytest.mark.parametrize(
    ("catalogue", "fields"),
    [(settings.SETTINGS, config.Config), (settings.ADMIN, config.Admin)],
    ids=["server", "admin"],
)
def test_each_setting_fills_one_field_and_each_field_has_its_setting(catalogue: Any, fields: Any) -> None:
    names = [s.name for s in catalogue]
    assert len(names) == len(set(names))
    assert set(names) == {f.name for f in dataclasses.fields(fields)}


def test_no_module_reads_a_metastore_variable_but_through_the_declarations() -> None:
    # The environment is read by `settings` alone (libpq's PG* and OpenTelemetry's OTEL_* are theirs).
    package = Path(__file__).resolve().parents[2] / "service" / "metastore"
    readers = sorted(
        str(f.relative_to(package))
        for f in package.rglob("*.py")
        if f.name != "settings.py" and re.search(r"environ(\.get)?\(?\[?[\"']METASTORE_", f.read_text())
    )
    assert readers == []
