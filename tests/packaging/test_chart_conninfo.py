"""The chart's connection string by parts, read back by libpq's own parser: parameter values with
quotes, backslashes and spaces arrive as written. Needs the helm that helm/check.sh caches."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from psycopg import conninfo

from tests.support.helm import helm

ROOT = Path(__file__).resolve().parents[2]


def render(values: dict[str, object], tmp_path: Path) -> list[dict[str, Any]]:
    # A values file, not --set: helm's --set treats a backslash as an escape.
    extra = tmp_path / "values.yaml"
    extra.write_text(yaml.safe_dump(values))
    args = [helm(), "template", "metastore", str(ROOT / "helm" / "metastore"), "--kube-version", "1.30.0"]
    args += ["--values", str(ROOT / "helm" / "metastore" / "ci" / "default-values.yaml"), "--values", str(extra)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def env_of(docs: list[dict[str, Any]], kind: str) -> dict[str, object]:
    resource = next(d for d in docs if d["kind"] == kind)
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in resource["spec"]["template"]["spec"]["containers"][0]["env"]
    }


def test_parameters_with_special_characters_reach_libpq_unchanged(tmp_path: Path) -> None:
    odd = "it's a \\ test, \\'quoted\\'"
    docs = render(
        {
            "database": {
                "host": "pg.example",
                "database": "meta store",
                "credentialsSecret": "service-creds",
                "parameters": {"krbsrvname": odd, "target_session_attrs": "read-write"},
            },
            "migrations": {"credentialsSecret": "owner-creds"},
        },
        tmp_path,
    )
    for kind, url_env, secret in (
        ("Deployment", "METASTORE_DATABASE_URL", "service-creds"),
        ("Job", "METASTORE_ADMIN_DATABASE_URL", "owner-creds"),
    ):
        env = env_of(docs, kind)
        parsed = conninfo.conninfo_to_dict(str(env[url_env]))
        assert parsed == {
            "host": "pg.example",
            "port": "5432",
            "dbname": "meta store",
            "krbsrvname": odd,
            "target_session_attrs": "read-write",
        }
        assert env["PGUSER"] == {"secretKeyRef": {"name": secret, "key": "username"}}
        assert env["PGPASSWORD"] == {"secretKeyRef": {"name": secret, "key": "password"}}


def test_credentials_as_files_are_mounted_and_named_to_the_service_and_the_jobs(tmp_path: Path) -> None:
    values = {
        "database": {"host": "pg.example", "credentialsSecret": "service-creds", "credentialsAsFiles": True},
        "migrations": {"credentialsSecret": "owner-creds"},
        "retention": {"enabled": True},
    }
    docs = render(values, tmp_path)
    for kind, prefix, name, secret in (
        ("Deployment", "METASTORE_DATABASE", "database", "service-creds"),
        ("Job", "METASTORE_ADMIN_DATABASE", "migrations", "owner-creds"),
        ("CronJob", "METASTORE_ADMIN_DATABASE", "migrations", "owner-creds"),
    ):
        resource = next(d for d in docs if d["kind"] == kind)
        pod = resource["spec"]["jobTemplate"]["spec"]["template"] if kind == "CronJob" else resource["spec"]["template"]
        container = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        assert "PGUSER" not in env and "PGPASSWORD" not in env
        assert env[f"{prefix}_USER_FILE"] == f"/stackable/secrets/{name}/username"
        assert env[f"{prefix}_PASSWORD_FILE"] == f"/stackable/secrets/{name}/password"
        mount = next(m for m in container["volumeMounts"] if m["name"] == f"{name}-credentials")
        assert mount == {"name": f"{name}-credentials", "mountPath": f"/stackable/secrets/{name}", "readOnly": True}
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == f"{name}-credentials")
        assert volume["secret"]["secretName"] == secret
        assert {i["key"] for i in volume["secret"]["items"]} == {"username", "password"}
