"""Validate rendered manifests offline: `python validate.py --kubernetes-version 1.30 FILE...`.

Built-in kinds are checked by kubernetes-validate against that Kubernetes version's OpenAPI
schemas in strict mode (an unknown field is an error, not a warning).

Custom resources have no schema there, and kubernetes-validate only warns about a kind it does not
know. Here that is an error, except for the custom kinds this chart renders on purpose, listed in
CUSTOM_KINDS: their CRDs belong to operators that may not be installed where the chart is
checked, so the fields the chart sets are checked here instead, against the operators' documented
APIs (Prometheus Operator's ServiceMonitor, the Stackable secret-operator's TrustStore).

Then the chart's own rules, for every pod template: non-root, read-only root filesystem, no
capabilities, no privilege escalation, the RuntimeDefault seccomp profile, a memory request equal
to the memory limit; and a grace period longer than the preStop sleep plus
METASTORE_SHUTDOWN_GRACE_S.

Every file is read with a strict YAML loader: a key given twice in one mapping (which PyYAML
would silently resolve to the last, and kubectl kustomize refuses) is an error.

Selectors, checked against every pod template of the file: the Services, the PodDisruptionBudget,
the NetworkPolicy and the Deployment select the server pods and no Job's pod; the ServiceMonitor
selects the metrics Service and no other, by a port that Service has; the metrics Service's port
is the server container's port named `metrics` when METASTORE_METRICS_PORT is set.

The spool: the emptyDir's sizeLimit is above METASTORE_SPOOL_MAX_BYTES, and the server container
requests at least the ephemeral-storage its emptyDirs may hold.

With --runbooks docs/operations.md: every alert has a runbook_url whose anchor is a heading of
that file.

The Vector sidecar's configuration (the ConfigMap <release>-vector), against Vector's documented
fields: each component's type and fields, every input names a component, the sink's address
comes from the discovery ConfigMap. With --vrl, each remap program is also compiled and run by
the VRL command line (the vrl crate) on the service's own log lines, and its output checked.

--promql-out FILE writes every alert expression and every dashboard query as a recording rule,
for `promtool check rules`; --rules-out FILE writes the PrometheusRule's groups as they are, for
`promtool test rules`.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv  # type: ignore[import-untyped,import-not-found,unused-ignore]
import yaml  # type: ignore[import-untyped,import-not-found,unused-ignore]
from strict_yaml import StrictLoader  # helm/, beside this file

Resource = dict[str, Any]
TMP = "/tmp"  # noqa: S108 - a mount path to look for, no file is made there
QUANTITY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def quantity(value: Any) -> int:
    text = str(value)
    number = re.match(r"^[0-9]+", text)
    if number is None or text[number.end() :] not in ("", *QUANTITY):
        raise ValueError(f"{text!r} is not a quantity this check reads")
    return int(number.group(0)) * QUANTITY.get(text[number.end() :], 1)


def _keys(where: str, value: Any, allowed: set[str], required: frozenset[str] | set[str] = frozenset()) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object"]
    errors = [f"{where}.{key}: unknown field" for key in sorted(set(value) - allowed)]
    errors += [f"{where}.{key}: required" for key in sorted(required - set(value))]
    return errors


def check_service_monitor(resource: Resource) -> list[str]:
    spec = resource.get("spec", {})
    errors = _keys(
        "spec",
        spec,
        {"selector", "namespaceSelector", "endpoints", "jobLabel", "podTargetLabels"},
        {"selector", "endpoints"},
    )
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


def check_prometheus_rule(resource: Resource) -> list[str]:
    spec = resource.get("spec", {})
    errors = _keys("spec", spec, {"groups"}, {"groups"})
    for i, group in enumerate(spec.get("groups") or []):
        where = f"spec.groups[{i}]"
        errors += _keys(where, group, {"name", "interval", "rules", "limit"}, {"name", "rules"})
        for j, rule in enumerate(group.get("rules") or []):
            at = f"{where}.rules[{j}]"
            errors += _keys(at, rule, {"alert", "record", "expr", "for", "labels", "annotations"}, {"expr"})
            if ("alert" in rule) == ("record" in rule):
                errors.append(f"{at}: needs exactly one of alert and record")
    return errors


CUSTOM_KINDS: dict[tuple[str, str], Callable[[Resource], list[str]]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): check_service_monitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): check_prometheus_rule,
    ("secrets.stackable.tech/v1alpha1", "TrustStore"): check_trust_store,
}


def pod_template(resource: Resource) -> Resource | None:
    if resource["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        template: Resource = resource["spec"]["template"]
        return template
    if resource["kind"] == "CronJob":
        template = resource["spec"]["jobTemplate"]["spec"]["template"]
        return template
    return None


def pod_spec(resource: Resource) -> Resource | None:
    template = pod_template(resource)
    return None if template is None else template["spec"]  # type: ignore[no-any-return]


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def check_selectors(resources: list[Resource]) -> list[str]:
    """Each Service, PDB and Deployment selects the server pods and no other pod of the chart's;
    the ServiceMonitor selects the metrics Service only."""
    templates = [(r, pod_template(r)) for r in resources]
    pods = [(f"{r['kind']}/{r['metadata']['name']}", t["metadata"].get("labels", {})) for r, t in templates if t]
    servers = {name for name, labels in pods if labels.get("app.kubernetes.io/component") == "server"}
    if not servers:
        return ["no pod template is labelled app.kubernetes.io/component=server"]
    errors = []
    for r in resources:
        name = f"{r['kind']}/{r['metadata']['name']}"
        if r["kind"] == "Service":
            selector = r["spec"].get("selector") or {}
        elif r["kind"] in ("PodDisruptionBudget", "Deployment"):
            selector = r["spec"]["selector"].get("matchLabels") or {}
        elif r["kind"] == "NetworkPolicy":
            selector = r["spec"]["podSelector"].get("matchLabels") or {}
        else:
            continue
        selected = {pod for pod, labels in pods if _matches(selector, labels)}
        if selected != servers:
            errors.append(f"{name}: selects {sorted(selected)}, must select exactly {sorted(servers)}")
    services = [r for r in resources if r["kind"] == "Service"]
    for monitor in (r for r in resources if r["kind"] == "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        chosen = [s for s in services if _matches(selector, s["metadata"].get("labels", {}))]
        names = [s["metadata"]["name"] for s in chosen]
        if len(chosen) != 1 or not names[0].endswith("-metrics"):
            errors.append(
                f"ServiceMonitor/{monitor['metadata']['name']}: selects Services {names}, must be the metrics one"
            )
            continue
        ports = {p.get("name") for p in chosen[0]["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            if endpoint["port"] not in ports:
                errors.append(f"ServiceMonitor: port {endpoint['port']!r} is not a port of Service/{names[0]}")
    return errors


# Vector's documented fields (vector.dev, reference: configuration, sources/file,
# sources/internal_logs, transforms/remap, sinks/vector) that this chart may use.
VECTOR_TOP = {"data_dir", "log_schema", "sources", "transforms", "sinks", "api", "acknowledgements"}
VECTOR_LOG_SCHEMA = {"host_key", "message_key", "timestamp_key", "source_type_key", "metadata_key"}
VECTOR_COMPONENTS: dict[str, dict[str, tuple[set[str], set[str]]]] = {
    "sources": {
        "file": (
            {
                "type",
                "include",
                "exclude",
                "read_from",
                "ignore_older_secs",
                "data_dir",
                "max_line_bytes",
                "glob_minimum_cooldown_ms",
                "fingerprint",
                "line_delimiter",
                "multiline",
                "file_key",
                "host_key",
            },
            {"type", "include"},
        ),
        "internal_logs": ({"type", "host_key", "pid_key"}, {"type"}),
    },
    "transforms": {
        "remap": (
            {"type", "inputs", "source", "file", "drop_on_error", "drop_on_abort", "reroute_dropped", "timezone"},
            {"type", "inputs", "source"},
        ),
        "filter": ({"type", "inputs", "condition"}, {"type", "inputs", "condition"}),
    },
    "sinks": {
        "vector": (
            {
                "type",
                "inputs",
                "address",
                "version",
                "compression",
                "buffer",
                "batch",
                "acknowledgements",
                "healthcheck",
                "request",
                "tls",
            },
            {"type", "inputs", "address"},
        ),
    },
}

# Lines as the service writes them (metastore.logs.JsonFormatter), and what the sidecar must make of them.
VRL_SAMPLES = [
    (
        '{"asctime": "2026-03-01 12:34:56,789", "levelname": "WARNING", "name": "metastore.db", '
        '"message": "database call ingest_event failed", "request_id": "r-1"}',
        {
            "level": "WARN",
            "logger": "metastore.db",
            "message": "database call ingest_event failed",
            "timestamp": "2026-03-01T12:34:56.789Z",
            "request_id": "r-1",
        },
    ),
    (
        '{"asctime": "2026-03-01 12:34:57,001", "levelname": "ERROR", "name": "sanic.error", '
        '"message": "Exception occurred", "exc_info": "Traceback (most recent call last):\\n  boom"}',
        {
            "level": "ERROR",
            "logger": "sanic.error",
            "message": "Exception occurred\nTraceback (most recent call last):\n  boom",
        },
    ),
    (
        "not json at all",
        {"level": "INFO", "message": "not json at all", "errors": ["not a JSON object, shipped as it is"]},
    ),
]


def check_vector_config(text: str, vrl: Path | None) -> list[str]:
    errors: list[str] = []
    config = yaml.safe_load(text)
    errors += _keys("vector.yaml", config, VECTOR_TOP, {"data_dir", "sources", "sinks"})
    errors += _keys("vector.yaml.log_schema", config.get("log_schema", {}), VECTOR_LOG_SCHEMA)
    names: set[str] = set()
    for section, kinds in VECTOR_COMPONENTS.items():
        for name, component in (config.get(section) or {}).items():
            names.add(name)
            kind = component.get("type")
            if kind not in kinds:
                errors.append(f"{section}.{name}: type {kind!r} is not one this chart may use ({sorted(kinds)})")
                continue
            allowed, required = kinds[kind]
            errors += _keys(f"{section}.{name}", component, allowed, required)
    for section in ("transforms", "sinks"):
        for name, component in (config.get(section) or {}).items():
            for pattern in component.get("inputs", []):
                if not any(fnmatch.fnmatchcase(other, pattern) for other in names - {name}):
                    errors.append(f"{section}.{name}.inputs: {pattern!r} names no component")
    sinks = config.get("sinks") or {}
    if [s.get("address") for s in sinks.values()] != ["${VECTOR_AGGREGATOR_ADDRESS}"]:
        errors.append("sinks: one vector sink whose address is ${VECTOR_AGGREGATOR_ADDRESS}")
    if vrl is not None and not errors:
        errors += run_vrl_chain(config, vrl)
    return errors


def run_vrl_chain(config: dict[str, Any], vrl: Path) -> list[str]:
    """The file source's events through processed_files_py, extended_logs_files, extended_logs."""
    transforms = config["transforms"]
    chain = ["processed_files_py", "extended_logs_files", "extended_logs"]
    errors = []
    env = {"NAMESPACE": "lineage", "VECTOR_AGGREGATOR_ADDRESS": "aggregator:6000"}
    for line, expected in VRL_SAMPLES:
        event: dict[str, Any] = {
            "message": line,
            "file": "/stackable/log/metastore/metastore.py.json",
            "pod": "metastore-0",
            "source_type": "file",
            "timestamp": "2026-03-01T00:00:00Z",
        }
        for name in chain:
            program = transforms[name]["source"]
            for key, value in env.items():
                program = program.replace("${" + key + "}", value)
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "program.vrl").write_text(program)
                (Path(tmp) / "input.json").write_text(json.dumps(event) + "\n")
                result = subprocess.run(
                    [str(vrl), "--input", "input.json", "--program", "program.vrl", "--print-object"],
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            lines = result.stdout.strip().splitlines()
            if result.returncode != 0 or not lines:
                return [f"vrl {name}: {result.stderr.strip() or result.stdout.strip()}"]
            # The VRL command line prints objects as JSON, except timestamps: t'2026-...Z'.
            event = json.loads(re.sub(r"t'([^']*)'", r'"\1"', lines[-1]))
        want = {
            "container": "metastore",
            "file": "metastore.py.json",
            "pod": "metastore-0",
            "namespace": "lineage",
            "role": "server",
            **expected,
        }
        for key, value in want.items():
            if event.get(key) != value:
                errors.append(f"vrl: {line[:40]!r} gave {key}={event.get(key)!r}, expected {value!r}")
        for key in ("cluster", "roleGroup", "timestamp"):
            if not event.get(key):
                errors.append(f"vrl: {line[:40]!r} has no {key}")
        if "errors" not in expected and "errors" in event:
            errors.append(f"vrl: {line[:40]!r} reported {event['errors']}")
        if "source_type" in event:
            errors.append("vrl: source_type was not removed")
    return errors


def promql_rules(resources: list[Resource]) -> dict[str, Any]:
    """Every alert expression and dashboard query as a recording rule, for promtool's parser."""
    rules: list[dict[str, str]] = []
    for r in resources:
        if r["kind"] == "PrometheusRule":
            for group in r["spec"]["groups"]:
                rules += [{"record": f"check:alert:{i}", "expr": rule["expr"]} for i, rule in enumerate(group["rules"])]
        if r["kind"] == "ConfigMap" and r["metadata"]["name"].endswith("-dashboard"):
            for text in r["data"].values():
                for panel in json.loads(text)["panels"]:
                    for target in panel["targets"]:
                        expr = (
                            target["expr"]
                            .replace("$__rate_interval", "5m")
                            .replace('"$job"', '".*"')
                            .replace('"$namespace"', '".*"')
                        )
                        rules.append({"record": f"check:panel:{panel['id']}:{target['refId']}", "expr": expr})
    return {"groups": [{"name": "chart-expressions", "rules": rules}]} if rules else {}


def _server_container(resources: list[Resource]) -> Resource | None:
    for r in resources:
        if r["kind"] == "Deployment":
            for container in r["spec"]["template"]["spec"]["containers"]:
                if container["name"] == "metastore":
                    return container  # type: ignore[no-any-return]
    return None


def check_ports_and_spool(resources: list[Resource], config: dict[str, str]) -> list[str]:
    """The metrics port where the settings put it; the spool's emptyDir and storage request."""
    errors: list[str] = []
    container = _server_container(resources)
    deployment = next((r for r in resources if r["kind"] == "Deployment"), None)
    if container is None or deployment is None:
        return ["no Deployment with a metastore container"]
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    metrics_port = config.get("METASTORE_METRICS_PORT")
    if metrics_port is not None and ports.get("metrics") != int(metrics_port):
        errors.append(f"METASTORE_METRICS_PORT={metrics_port}; the container's port `metrics`: {ports.get('metrics')}")
    for service in (r for r in resources if r["kind"] == "Service" and r["metadata"]["name"].endswith("-metrics")):
        name, target = service["metadata"]["name"], service["spec"]["ports"][0]["targetPort"]
        expected = int(metrics_port) if metrics_port is not None else ports.get("https", ports.get("http"))
        if target != expected:
            errors.append(f"Service/{name}: targets {target}, the pod serves metrics on {expected}")
        scheme = service["metadata"]["annotations"]["prometheus.io/scheme"]
        if metrics_port is not None and scheme != "http":
            errors.append(f"Service/{name}: the metrics port is plain HTTP, not {scheme}")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    spool = next((v for v in volumes if v["name"] == "spool"), None)
    if spool is None or "METASTORE_SPOOL_MAX_BYTES" not in config:
        return [*errors, "no spool volume, or no METASTORE_SPOOL_MAX_BYTES"]
    limit, most = quantity(spool["emptyDir"]["sizeLimit"]), int(config["METASTORE_SPOOL_MAX_BYTES"])
    if limit <= most:
        errors.append(f"the spool's sizeLimit {limit} is not above METASTORE_SPOOL_MAX_BYTES {most}")
    held = sum(quantity(v["emptyDir"]["sizeLimit"]) for v in volumes if "sizeLimit" in (v.get("emptyDir") or {}))
    asked = container["resources"]["requests"].get("ephemeral-storage")
    if asked is None or quantity(asked) < held:
        errors.append(f"the container requests ephemeral-storage {asked}, its emptyDirs may hold {held} bytes")
    return errors


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, spaces as -, punctuation dropped."""
    found = set()
    for line in markdown.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).lower().replace("`", ""))
            found.add(text.replace(" ", "-"))
    return found


def check_runbooks(resources: list[Resource], runbooks: Path) -> list[str]:
    """Every alert has a runbook_url whose anchor is a heading of the operator's guide."""
    headings = anchors(runbooks.read_text("utf-8"))
    errors = []
    for r in resources:
        if r["kind"] != "PrometheusRule":
            continue
        for group in r["spec"]["groups"]:
            for rule in group["rules"]:
                if "alert" not in rule:
                    continue
                url = rule.get("annotations", {}).get("runbook_url", "")
                anchor = url.rpartition("#")[2] if "#" in url else ""
                if anchor not in headings:
                    errors.append(f"{rule['alert']}: runbook_url {url!r} names no heading of {runbooks}")
    return errors


def check_escape_hatches(resources: list[Resource]) -> list[str]:
    """ci/secret-operator-values.yaml sets every escape hatch: each pod template must carry them."""
    errors = []
    for r in resources:
        template = pod_template(r)
        if template is None:
            continue
        name, spec = f"{r['kind']}/{r['metadata']['name']}", template["spec"]
        if "example.com/owner" not in (template["metadata"].get("annotations") or {}):
            errors.append(f"{name}: no podAnnotations")
        for field in ("tolerations", "affinity"):
            if not spec.get(field):
                errors.append(f"{name}: no {field}")
        if "extra-ca" not in {v["name"] for v in spec.get("volumes", [])}:
            errors.append(f"{name}: no extraVolumes")
        for container in spec["containers"]:
            if "TZ" not in {e["name"] for e in container.get("env", [])}:
                errors.append(f"{name}: container {container['name']} has no extraEnv")
            if "/stackable/extra-ca" not in {m["mountPath"] for m in container.get("volumeMounts", [])}:
                errors.append(f"{name}: container {container['name']} has no extraVolumeMounts")
    return errors


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
        resources = container.get("resources", {})
        limit = resources.get("limits", {}).get("memory")
        if limit is None or resources.get("requests", {}).get("memory") != limit:
            errors.append(f"containers[{container['name']}].resources: the memory request must equal a memory limit")
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        if resource["kind"] == "Deployment" and container["name"] == "metastore":
            if pre_stop[:1] != ["sleep"]:
                errors.append(f"containers[{container['name']}].lifecycle.preStop: no sleep")
                continue
            # The drain (METASTORE_SHUTDOWN_GRACE_S) must end before Kubernetes kills the pod.
            floor = int(pre_stop[1]) + int(config.get("METASTORE_SHUTDOWN_GRACE_S", "20"))
            if int(spec.get("terminationGracePeriodSeconds", 30)) <= floor:
                errors.append(f"terminationGracePeriodSeconds: not above preStop sleep + shutdown grace ({floor})")
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubernetes-version", required=True)
    parser.add_argument("--vrl", type=Path, help="the vrl command line, to run the Vector remap programs")
    parser.add_argument("--promql-out", type=Path, help="write the chart's PromQL as recording rules here")
    parser.add_argument("--rules-out", type=Path, help="write the PrometheusRule's groups here")
    parser.add_argument("--escape-hatches", action="store_true", help="every pod must carry the escape hatches")
    parser.add_argument("--runbooks", type=Path, help="the operator's guide: every alert's runbook_url names a heading")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    failed = False
    promql: list[Any] = []
    alert_groups: list[Any] = []
    for path in args.files:
        try:
            resources = [r for r in yaml.load_all(path.read_text("utf-8"), Loader=StrictLoader) if r]
        except yaml.YAMLError as exc:
            print(f"FAIL {path.name}: strict YAML: {exc}")
            failed = True
            continue
        config: dict[str, str] = {}
        for r in resources:
            if r["kind"] == "ConfigMap":
                config.update(r.get("data") or {})
        checks = [("strict YAML (no key twice)", []), ("selectors", check_selectors(resources))]
        checks.append(("metrics port and spool", check_ports_and_spool(resources, config)))
        if args.runbooks:
            checks.append(("runbooks", check_runbooks(resources, args.runbooks)))
        if args.escape_hatches:
            checks.append(("escape hatches", check_escape_hatches(resources)))
        for r in resources:
            if r["kind"] == "ConfigMap" and "vector.yaml" in (r.get("data") or {}):
                checks.append(("vector.yaml", check_vector_config(r["data"]["vector.yaml"], args.vrl)))
            if r["kind"] == "ConfigMap" and r["metadata"]["name"].endswith("-dashboard"):
                for key, text in r["data"].items():
                    try:
                        json.loads(text)
                    except ValueError as exc:
                        checks.append((f"dashboard {key}", [str(exc)]))
            if r["kind"] == "PrometheusRule":
                alert_groups += r["spec"]["groups"]
        promql += promql_rules(resources).get("groups", [])
        for what, errors in checks:
            for error in errors:
                print(f"FAIL {path.name}: {what}: {error}")
            if not errors:
                print(f"ok   {path.name}: {what}")
            failed = failed or bool(errors)
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
    if args.promql_out:
        for i, group in enumerate(promql):
            group["name"] = f"{group['name']}-{i}"
        args.promql_out.write_text(yaml.safe_dump({"groups": promql}))
    if args.rules_out:
        args.rules_out.write_text(yaml.safe_dump({"groups": alert_groups[:1]}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
