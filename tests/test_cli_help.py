"""The `metastore` command explains itself: a version, help that names where the settings are and
what each exit status means, and help that imports nothing a command would only need to run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from metastore import arguments

HEAVY = ("sanic", "psycopg", "psycopg_pool", "requests", "prometheus_client", "opentelemetry")


def metastore(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    return subprocess.run(
        [sys.executable, "-m", "metastore", *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_version() -> None:
    result = metastore("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"metastore {arguments.version()}"


def test_serve_help_names_the_settings_command() -> None:
    result = metastore("serve", "--help")
    assert result.returncode == 0
    assert "metastore settings" in result.stdout and "exit status" in result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["serve", "--help"],
        ["db", "--help"],
        ["db", "deploy", "--help"],
        ["db", "revert", "--help"],
        ["db", "verify", "--help"],
        ["db", "status", "--help"],
        ["db", "hide", "--help"],
        ["export", "--help"],
        ["import", "--help"],
        ["replay", "--help"],
    ],
)
def test_help_imports_nothing_heavy(command: list[str]) -> None:
    probe = (
        "import sys\n"
        "from metastore.cli import main\n"
        "try:\n"
        f"    main({command!r})\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
    if command != ["--help"]:
        assert "exit status" in result.stdout


def test_a_usage_error_is_exit_2_without_a_traceback() -> None:
    result = metastore("db", "revert")  # --to is required
    assert result.returncode == 2
    assert "--to" in result.stderr and "Traceback" not in result.stderr
