"""METASTORE_LOG_LEVELS: levels of single loggers (the chart's logging.loggers), checked at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from metastore import logs
from tests.conftest import Database
from tests.support.servers import start_server


def test_levels_parse_and_refuse_what_is_not_logger_equals_level() -> None:
    assert logs.parse_levels(" sanic.access=warning, metastore.db=DEBUG ,") == {
        "sanic.access": "WARNING",
        "metastore.db": "DEBUG",
    }
    assert logs.parse_levels("") == {}
    for bad in ("metastore", "=INFO", "metastore=LOUD"):
        with pytest.raises(ValueError, match="METASTORE_LOG_LEVELS"):
            logs.parse_levels(bad)


def test_a_logger_set_to_error_drops_its_warnings(database: Database, tmp_path: Path) -> None:
    # Without TLS the service warns once at start, on the logger "metastore".
    loud = start_server(database.service_dsn, None, tmp_path / "loud.log")
    loud.stop()
    assert any("TLS is off" in line for line in loud.log_lines())
    quiet = start_server(database.service_dsn, None, tmp_path / "quiet.log", METASTORE_LOG_LEVELS="metastore=ERROR")
    quiet.stop()
    assert not any("TLS is off" in line for line in quiet.log_lines())


def test_a_malformed_setting_refuses_the_start(database: Database) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    env.update(
        {"METASTORE_DATABASE_URL": database.service_dsn, "METASTORE_TLS": "off", "METASTORE_LOG_LEVELS": "sanic"}
    )
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "METASTORE_LOG_LEVELS" in result.stderr
