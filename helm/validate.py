"""Validate rendered manifests offline: `python validate.py --kubernetes-version 1.30 FILE...`.

Built-in kinds are checked by kubernetes-validate against that Kubernetes version's OpenAPI
schemas in strict mode (an unknown field is an error, not a warning).

Custom resources have no schema there, and kubernetes-validate only warns about a kind it does not
know. Here that is an error, except for the custom kinds this chart renders on purpose, listed in
CUSTOM_KINDS: their CRDs belong to operators that may not be installed where the chart is
checked, so the fields the chart sets are checked here instead, against the operators' documented
APIs (Prometheus Operator's ServiceMonitor, the Stackable secret-operator's TrustStore).

Then the chart's own rules, for every pod template: non-root, read-only root filesystem, no
capabilities, no privilege escalation, the RuntimeDefault seccomp profile; and a grace period
longer than the preStop sleep plus METASTORE_SHUTDOWN_GRACE_S.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv  # type: ignore[import-untyped,import-not-found,unused-ignore]
import yaml  # type: ignore[import-untyped,import-not-found,unused-ignore]

Resource = dict[str, Any]
TMP = "/tmp"  # noqa: S108 - a mount path to look for, no file is made there


def _keys(where: str, value: Any, allowed: set[str], required: frozenset[str] | set[str] = frozenset()) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object"]
    errors = [f"{where}.{key}: unknown field" for key in sorted(set(value) - allowed)]
    errors += [f"{where}.{key}: required" for key in sorted(required - set(value))]
    return errors


def check_service_monitor(resource: Resource) -> list[str]:
    spec = resource.get("spec", {})
    errors = _keys("spec", spec, {"selector", "namespaceSelector", "endpoints", "jobLabel"}, {"selector", "endpoints"})
    if not spec.get("selector", {}).get("matchLabels"):
        errors.append("spec.selector.matchLabels: empty, would select every Service")
    endpoints = spec.get("endpoints") or []
    if not endpoints:
        errors.append("spec.endpoints: empty")
    for i, endpoint in enumerate(endpoints):
        where = f"spec.endpoints[{i}]"
        errors += _keys(
            where, endpoint, {"port", "scheme", "path", "interval", "scrapeTimeout", "tlsConfig"}, {"port", "scheme"}
        )
        if endpoint.get("scheme") not in ("http", "https"):
            errors.append(f"{where}.scheme: {endpoint.get('scheme')!r} is neither http nor https")
        if not str(endpoint.get("path", "/")).startswith("/"):
            errors.append(f"{where}.path: must start with /")
        if endpoint.get("scheme") == "https":
            tls = endpoint.get("tlsConfig")
            errors += _keys(f"{where}.tlsConfig", tls, {"ca", "cert", "keySecret", "serverName", "insecureSkipVerify"})
            if isinstance(tls, dict) and not (tls.get("ca") or tls.get("insecureSkipVerify")):
                errors.append(f"{where}.tlsConfig: needs a ca (or insecureSkipVerify) to scrape https")
            ca = tls.get("ca") if isinstance(tls, dict) else None
            if ca is not None:
                errors += _keys(f"{where}.tlsConfig.ca", ca, {"configMap", "secret"})
                for kind, ref in ca.items():
                    errors += _keys(f"{where}.tlsConfig.ca.{kind}", ref, {"name", "key", "optional"}, {"name", "key"})
    return errors


def check_trust_store(resource: Resource) -> list[str]:
    spec = resource.get("spec", {})
    errors = _keys("spec", spec, {"secretClassName", "format", "targetKind", "tlsPemCaName"}, {"secretClassName"})
    if spec.get("format", "tls-pem") not in ("tls-pem", "tls-pkcs12"):
        errors.append(f"spec.format: {spec.get('format')!r} is neither tls-pem nor tls-pkcs12")
    return errors


CUSTOM_KINDS: dict[tuple[str, str], Callable[[Resource], list[str]]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): check_service_monitor,
    ("secrets.stackable.tech/v1alpha1", "TrustStore"): check_trust_store,
}


def pod_spec(resource: Resource) -> Resource | None:
    if resource["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        spec: Resource = resource["spec"]["template"]["spec"]
        return spec
    return None


def check_pod_rules(resource: Resource, config: dict[str, str]) -> list[str]:
    spec = pod_spec(resource)
    if spec is None:
        return []
    errors = []
    pod = spec.get("securityContext", {})
    if pod.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        errors.append("securityContext.seccompProfile.type: not RuntimeDefault")
    for container in spec.get("initContainers", []) + spec["containers"]:
        where = f"containers[{container['name']}].securityContext"
        ctx = container.get("securityContext", {})
        if not (ctx.get("runAsNonRoot") or pod.get("runAsNonRoot")):
            errors.append(f"{where}.runAsNonRoot: not true")
        if ctx.get("runAsUser", pod.get("runAsUser")) == 0:
            errors.append(f"{where}.runAsUser: 0")
        if ctx.get("readOnlyRootFilesystem") is not True:
            errors.append(f"{where}.readOnlyRootFilesystem: not true")
        if ctx.get("allowPrivilegeEscalation") is not False:
            errors.append(f"{where}.allowPrivilegeEscalation: not false")
        if "ALL" not in ctx.get("capabilities", {}).get("drop", []) or ctx.get("capabilities", {}).get("add"):
            errors.append(f"{where}.capabilities: must drop ALL and add none")
        if not any(m["mountPath"] == TMP for m in container.get("volumeMounts", [])):
            errors.append(f"containers[{container['name']}]: no writable /tmp")
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        if resource["kind"] == "Deployment":
            if pre_stop[:1] != ["sleep"]:
                errors.append(f"containers[{container['name']}].lifecycle.preStop: no sleep")
                continue
            floor = int(pre_stop[1]) + int(config.get("METASTORE_SHUTDOWN_GRACE_S", "20"))
            if int(spec.get("terminationGracePeriodSeconds", 30)) <= floor:
                errors.append(f"terminationGracePeriodSeconds: not above preStop sleep + shutdown grace ({floor})")
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", required=True)
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    failed = False
    for path in args.files:
        resources = [r for r in yaml.safe_load_all(path.read_text("utf-8")) if r]
        config: dict[str, str] = {}
        for r in resources:
            if r["kind"] == "ConfigMap":
                config.update(r.get("data") or {})
        for resource in resources:
            name = f"{path.name}: {resource['kind']}/{resource['metadata']['name']}"
            custom = CUSTOM_KINDS.get((resource["apiVersion"], resource["kind"]))
            if custom is not None:
                errors, how = custom(resource), "custom resource, chart fields"
            else:
                try:
                    kv.validate(resource, args.kubernetes_version, strict=True)
                    errors = []
                except kv.ValidationError as exc:
                    errors = [f"{'.'.join(str(p) for p in exc.path)}: {exc.message}"]
                except kv.SchemaNotFoundError as exc:
                    errors = [f"{exc.message}; a custom kind must be added to CUSTOM_KINDS"]
                how = f"Kubernetes {args.kubernetes_version}, strict"
            errors += check_pod_rules(resource, config)
            for error in errors:
                print(f"FAIL {name}: {error}")
            if not errors:
                print(f"ok   {name} ({how})")
            failed = failed or bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
