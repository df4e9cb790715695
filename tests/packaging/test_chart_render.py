"""The chart as rendered from every values file: every object read by a strict YAML loader (a key
given twice is an error; kubectl kustomize refuses such output), the memory limit above the
service's documented memory bound at the settings the chart renders, one spool size from which
the emptyDir's sizeLimit and the ephemeral-storage request follow, and replicas spread by default.
Needs the helm that helm/check.sh caches."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from bench import floods
from tests.support.helm import helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "metastore"
VALUES = sorted((CHART / "ci").glob("*.yaml"))
MIB = 1 << 20
# The documented bound's constants (`make floods`; docs/operations.md, "Sizing").
CONSTANTS = json.loads((ROOT / "bench" / "results" / "memory.json").read_text())["constants"]


def strict_yaml() -> ModuleType:
    spec = importlib.util.spec_from_file_location("strict_yaml", ROOT / "helm" / "strict_yaml.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def template(values: Path, *sets: str) -> subprocess.CompletedProcess[str]:
    args = [helm(), "template", "metastore", str(CHART), "--namespace", "lineage", "--kube-version", "1.30.0"]
    args += ["--values", str(values), *(a for s in sets for a in ("--set", s))]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def render(values: Path, *sets: str) -> list[dict[str, Any]]:
    result = template(values, *sets)
    assert result.returncode == 0, result.stderr
    loader = strict_yaml().StrictLoader
    return [d for d in yaml.load_all(result.stdout, Loader=loader) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str = "metastore") -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def quantity(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([KMGT]i)?", str(text)).groups()  # type: ignore[union-attr]
    return int(number) << {None: 0, "Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[unit]


def test_the_strict_loader_refuses_a_key_given_twice() -> None:
    # The metrics Service once carried its vendor label twice: PyYAML keeps the last, kustomize refuses.
    text = "metadata:\n  labels:\n    stackable.tech/vendor: Stackable\n    stackable.tech/vendor: Stackable\n"
    assert yaml.safe_load(text) == {"metadata": {"labels": {"stackable.tech/vendor": "Stackable"}}}
    with pytest.raises(yaml.constructor.ConstructorError, match="given twice"):
        yaml.load(text, Loader=strict_yaml().StrictLoader)


# Each values file, and with the labels an operator is told to add: the chart's own keys among them.
VARIANTS = [(v, ()) for v in VALUES] + [
    (
        CHART / "ci" / "default-values.yaml",
        (
            "labels.stackable\\.tech/vendor=Stackable",
            "labels.app\\.kubernetes\\.io/name=other",
            "podLabels.app\\.kubernetes\\.io/instance=other",
            "metrics.httpPort=9090",
            "networkPolicy.enabled=true",
        ),
    )
]


@pytest.mark.parametrize(("values", "sets"), VARIANTS, ids=[f"{v.stem}{'+' if s else ''}" for v, s in VARIANTS])
def test_every_rendered_object_has_each_key_once(values: Path, sets: tuple[str, ...]) -> None:
    docs = render(values, *sets)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ConfigMap", "Service"} <= kinds, kinds
    for doc in docs:
        labels = doc["metadata"].get("labels", {})
        # The chart's labels win over the operator's: a selector keeps matching the pods.
        assert labels.get("app.kubernetes.io/instance", "metastore") == "metastore", doc["metadata"]


def server_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    env = dict(one(docs, "ConfigMap")["data"])
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


# Settings that move the bound's terms: connections, bytes in flight, the body limit, the pool,
# the writers, and async mode whose full queue stores at once (sync) or refuses (reject).
MEMORY_CASES = [(v, ()) for v in VALUES] + [
    # A full queue stored at once: any ingest connection may carry an event of the body limit.
    (
        CHART / "ci" / "default-values.yaml",
        ("config.ingestMode=async", "config.asyncQueueFull=sync", "resources.memory.limit=1Gi"),
    ),
    (CHART / "ci" / "default-values.yaml", ("config.maxConnections=3000", "resources.memory.limit=1Gi")),
    (CHART / "ci" / "async-values.yaml", ("config.asyncWriters=8", "resources.memory.limit=2Gi")),
    (
        CHART / "ci" / "default-values.yaml",
        ("config.maxBodyBytes=33554432", "config.poolMax=16", "resources.memory.limit=1Gi"),
    ),
]


@pytest.mark.parametrize(("values", "sets"), MEMORY_CASES, ids=[f"{v.stem}:{','.join(s)}" for v, s in MEMORY_CASES])
def test_the_memory_limit_is_above_the_documented_bound(values: Path, sets: tuple[str, ...]) -> None:
    docs = render(values, *sets)
    env = server_env(docs)
    assert env["METASTORE_SPOOL_DIR"], "the chart always has a spool"
    documented_mb = floods.bound_mb(CONSTANTS, env)
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    limit = quantity(container["resources"]["limits"]["memory"])
    assert quantity(container["resources"]["requests"]["memory"]) == limit
    # The chart computes the same bound (its constants in metastore.memoryModel) and says so.
    configmap = template(values, *sets).stdout
    said = re.search(r"memory bound at these settings .*?: (\d+) bytes,\s*# within (\d+)", configmap)
    assert said, "the ConfigMap does not state the bound"
    assert abs(int(said.group(1)) / MIB - documented_mb) <= 0.1, (int(said.group(1)) / MIB, documented_mb)
    assert documented_mb * MIB <= 0.8 * limit, (documented_mb, limit / MIB)


def test_a_limit_below_the_documented_bound_is_refused() -> None:
    # 547.1 MiB at the defaults: 80 % of 448Mi is 358.4 MiB.
    default = CHART / "ci" / "default-values.yaml"
    assert floods.bound_mb(CONSTANTS, server_env(render(default))) > 0.8 * 448
    result = template(default, "resources.memory.limit=448Mi")
    assert result.returncode != 0 and "leaves no room for the async queue" in result.stderr, result.stderr
    assert "the service's memory bound" in result.stderr


@pytest.mark.parametrize("values", VALUES, ids=[v.stem for v in VALUES])
def test_one_spool_size_sets_the_service_limit_the_volume_and_the_disk_request(values: Path) -> None:
    docs = render(values)
    size = quantity(yaml.safe_load(values.read_text()).get("spool", {}).get("size", "1Gi"))
    env = server_env(docs)
    assert int(env["METASTORE_SPOOL_MAX_BYTES"]) == size
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    size_limit = quantity(volumes["spool"]["emptyDir"]["sizeLimit"])
    # Headroom: the service refuses to spool (503) before the kubelet would evict the pod.
    assert size_limit >= size + max(size // 4, 64 * MIB)
    held = sum(quantity(v["emptyDir"]["sizeLimit"]) for v in pod["volumes"] if "sizeLimit" in (v.get("emptyDir") or {}))
    assert quantity(pod["containers"][0]["resources"]["requests"]["ephemeral-storage"]) >= held


def test_replicas_are_spread_over_nodes_by_default() -> None:
    docs = render(CHART / "ci" / "default-values.yaml")
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    constraints = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    by_key = {c["topologyKey"]: c for c in constraints}
    assert by_key["kubernetes.io/hostname"]["maxSkew"] == 1
    selector = by_key["kubernetes.io/hostname"].get("labelSelector", {}).get("matchLabels", {})
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector and selector.items() <= pod_labels.items(), (selector, pod_labels)


def server_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return container


REPLICA_ENV = ("METASTORE_READ_REPLICA_URL", "METASTORE_READ_REPLICA_MAX_LAG_S")
# The primary by its parts, as docs/operations.md describes it.
PARTS = ("database.host=pg-rw", "database.credentialsSecret=svc", "migrations.credentialsSecret=owner")


@pytest.mark.parametrize("values", VALUES, ids=[v.stem for v in VALUES])
def test_a_read_replica_setting_is_rendered_only_with_a_replica(values: Path) -> None:
    docs = render(values)
    names = {e["name"] for e in server_container(docs).get("env", [])} | set(one(docs, "ConfigMap")["data"])
    replica = yaml.safe_load(values.read_text()).get("database", {}).get("readReplica", {})
    assert ("METASTORE_READ_REPLICA_URL" in names) == bool(replica), names
    assert ("METASTORE_READ_REPLICA_MAX_LAG_S" in names) == ("maxLagSeconds" in replica), names


def test_a_read_replica_by_its_parts_shares_the_primarys_database_parameters_and_credentials() -> None:
    docs = render(
        CHART / "ci" / "default-values.yaml",
        *PARTS,
        "database.parameters.target_session_attrs=read-write",
        "database.parameters.sslnegotiation=direct",
        "database.readReplica.host=pg-ro",
        "database.readReplica.port=5433",
        "database.readReplica.parameters.connect_timeout=3",
        "database.readReplica.maxLagSeconds=30",
    )
    env = {e["name"]: e for e in server_container(docs)["env"]}
    # The primary's read-write would refuse every standby: the replica's own standby wins.
    assert env["METASTORE_READ_REPLICA_URL"]["value"] == (
        "connect_timeout='3' dbname='metastore' host='pg-ro' port='5433' sslnegotiation='direct' "
        "target_session_attrs='standby'"
    )
    assert "target_session_attrs='read-write'" in env["METASTORE_DATABASE_URL"]["value"]
    assert env["METASTORE_READ_REPLICA_MAX_LAG_S"]["value"] == "30"
    # No credentials in the string: PGUSER and PGPASSWORD of the primary's Secret serve both.
    assert env["PGUSER"]["valueFrom"]["secretKeyRef"] == {"name": "svc", "key": "username"}
    # Only the server reads: the migrations Job gets no replica.
    job = next(d for d in docs if d["kind"] == "Job")
    job_env = {e["name"] for c in job["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])}
    assert not job_env & set(REPLICA_ENV), job_env


def test_a_read_replica_with_credentials_as_files_reads_the_primarys_files() -> None:
    sets = (*PARTS, "database.credentialsAsFiles=true", "database.readReplica.host=pg-ro")
    container = server_container(render(CHART / "ci" / "default-values.yaml", *sets))
    env = {e["name"]: e.get("value") for e in container["env"]}
    url = env["METASTORE_READ_REPLICA_URL"]
    assert url == "dbname='metastore' host='pg-ro' port='5432' target_session_attrs='standby'"
    # The service applies these files to the replica's connections too (config.py).
    assert env["METASTORE_DATABASE_USER_FILE"] == "/stackable/secrets/database/username"
    assert "METASTORE_READ_REPLICA_MAX_LAG_S" not in env, "unset: the service's default"


def test_a_read_replica_from_an_existing_secret() -> None:
    docs = render(CHART / "ci" / "default-values.yaml", "database.readReplica.existingSecret=metastore-db-replica")
    env = {e["name"]: e for e in server_container(docs)["env"]}
    assert env["METASTORE_READ_REPLICA_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": "metastore-db-replica", "key": "url"}
    }


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        # A primary given by a whole string has no credentials Secret for the replica to share.
        (("database.readReplica.host=pg-ro",), "database.readReplica.host needs database.host"),
        ((*PARTS, "database.readReplica.host=pg-ro", "database.readReplica.existingSecret=r"), "not both"),
        (("database.readReplica.maxLagSeconds=10",), "maxLagSeconds needs a replica"),
        (("database.readReplica.existingSecret=r", "database.readReplica.maxLagSeconds=1"), "maxLagSeconds"),
        (
            (*PARTS, "database.readReplica.host=pg-ro", "database.readReplica.parameters.user=x"),
            "database.readReplica.parameters.user",
        ),
        ((*PARTS, "database.readReplica.hots=pg-ro"), "additional properties 'hots' not allowed"),
    ],
)
def test_read_replica_values_the_chart_refuses(sets: tuple[str, ...], says: str) -> None:
    result = template(CHART / "ci" / "default-values.yaml", *sets)
    assert result.returncode != 0 and says in result.stderr, result.stderr
