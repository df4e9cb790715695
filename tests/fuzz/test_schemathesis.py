"""Schemathesis against the served OpenAPI document: every operation, with data made from the
schema and data that breaks it, never gets a server error and always answers as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.servers import Server

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def test_every_operation_against_its_schema(server: Server, tmp_path: Path) -> None:
    st = Path(sys.executable).with_name("st")
    result = subprocess.run(
        [
            str(st),
            "run",
            f"{server.url}/api/v1/openapi.json",
            "--url",
            server.url,
            "--tls-verify",
            str(server.ca),
            "--checks",
            CHECKS,
            "--max-examples",
            os.environ.get("METASTORE_FUZZ_EXAMPLES", "40"),
            "--generation-deterministic",
            "--max-failures",
            "5",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    print(result.stdout[-1500:])
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "passed" in result.stdout
