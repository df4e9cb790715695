"""The chart's read replica end to end: the server container's env as `helm template` renders it
(the primary and the replica by their parts, the credentials from the primary's Secret or files),
given to a real service in front of a real primary and its hot standby (`pg_basebackup -R`). The
replica's connection string carries no credentials: the service logs in there with the primary's,
and serves the reads from it. Needs the helm that helm/check.sh caches."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devtools.localpg import LocalPostgres
from tests.conftest import SERVICE, provision
from tests.support.certs import TLSFiles
from tests.support.helm import helm
from tests.support.servers import start_server
from tests.support.standby import start_standby, wait_for_replay

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "metastore"


@pytest.fixture(scope="module")
def primary_and_standby() -> Iterator[tuple[LocalPostgres, LocalPostgres]]:
    # A server of its own, database `metastore` as the chart names it by default.
    primary = LocalPostgres().start()
    try:
        provision(primary, "metastore")
        standby = start_standby(primary)
        try:
            wait_for_replay(primary, standby)
            yield primary, standby
        finally:
            standby.cleanup()
    finally:
        primary.cleanup()


def server_env(values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    extra = tmp_path / "values.yaml"
    extra.write_text(yaml.safe_dump(values))
    args = [helm(), "template", "metastore", str(CHART), "--kube-version", "1.30.0"]
    args += ["--values", str(CHART / "ci" / "default-values.yaml"), "--values", str(extra)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    deployment = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment")
    env: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    return env


@pytest.mark.parametrize("as_files", [False, True], ids=["PGUSER", "files"])
def test_the_rendered_replica_setting_serves_the_reads_with_the_primarys_credentials(
    primary_and_standby: tuple[LocalPostgres, LocalPostgres], tls_files: TLSFiles, tmp_path: Path, as_files: bool
) -> None:
    primary, standby = primary_and_standby
    values = {
        "database": {
            "existingSecret": "",
            "host": "127.0.0.1",
            "port": primary.port,
            "credentialsSecret": "metastore-db-service",
            "credentialsAsFiles": as_files,
            "parameters": {"target_session_attrs": "read-write"},
            "readReplica": {"host": "127.0.0.1", "port": standby.port, "maxLagSeconds": 30},
        },
        "migrations": {"existingSecret": "", "credentialsSecret": "metastore-db-owner"},
    }
    # What the kubelet does: the Secret's keys into the variables, or into the mounted files.
    secret = {"username": SERVICE, "password": "unused"}  # the test servers trust 127.0.0.1
    env: dict[str, str] = {}
    for item in server_env(values, tmp_path):
        if "value" in item and item["value"].startswith("/stackable/secrets/database/"):
            key = item["value"].rsplit("/", 1)[1]
            file = tmp_path / key
            file.write_text(secret[key])
            env[item["name"]] = str(file)
        elif "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = secret[item["valueFrom"]["secretKeyRef"]["key"]]
    assert "user=" not in env["METASTORE_READ_REPLICA_URL"] and "password=" not in env["METASTORE_READ_REPLICA_URL"]
    assert ("PGUSER" in env) != as_files, env
    url = env.pop("METASTORE_DATABASE_URL")

    server = start_server(url, tls_files, tmp_path / "server.log", ready="/readyz", **env)
    try:
        deadline = time.monotonic() + 30
        with server.client() as client:
            while (replica := client.get("/readyz").json()["read_replica"])["reads_from"] != "replica":
                assert time.monotonic() < deadline, replica
                time.sleep(0.2)
            assert replica["state"] == "current" and replica["max_lag_seconds"] == 30, replica
            assert client.get("/api/v1/datasets").status_code == 200
        metrics = server.metrics()
        assert re.search(r"^metastore_read_replica_usable 1\.0$", metrics, re.M), metrics
        # What the alert MetastoreReadReplicaNotUsed tells a pod with a replica by.
        assert re.search(r'^metastore_db_pool_connections\{pool="replica_probe",state="idle"\} ', metrics, re.M)
        fallbacks = re.findall(r'^metastore_read_replica_fallbacks_total\{reason="\w+"\} (\S+)$', metrics, re.M)
        assert fallbacks and all(float(n) == 0 for n in fallbacks), fallbacks
    finally:
        assert server.stop() == 0, server.log.read_text()
