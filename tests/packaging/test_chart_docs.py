"""The operator's guide and the chart agree: the install and upgrade commands wait longer than the
migrations Job may run, and every alert has its runbook in docs/operations.md and a rule test
that makes it fire; every metric an alert or a dashboard panel reads is one the service exposes.
(helm/check.sh checks the rendered runbook URLs too, with helm.)"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "operations.md").read_text("utf-8")
CHART = ROOT / "helm" / "metastore"


def minutes(duration: str) -> float:
    value = re.fullmatch(r"(\d+)(s|m|h)", duration)
    assert value, duration
    return int(value.group(1)) * {"s": 1 / 60, "m": 1, "h": 60}[value.group(2)]


def test_install_and_upgrade_wait_longer_than_the_migrations_job_may_run() -> None:
    deadline_min = yaml.safe_load((CHART / "values.yaml").read_text())["migrations"]["activeDeadlineSeconds"] / 60
    commands = re.findall(r"^helm (install|upgrade) .*$", GUIDE, re.MULTILINE)
    lines = [line for line in GUIDE.splitlines() if re.match(r"^helm (install|upgrade) ", line)]
    assert {"install", "upgrade"} <= set(commands), commands
    for line in lines:
        assert "--wait" in line, line
        timeout = re.search(r"--timeout (\S+)", line)
        assert timeout, f"no --timeout (Helm's default is 5m): {line}"
        # The Job's deadline, then the pods' rollout: at least 5 more minutes.
        assert minutes(timeout.group(1)) >= deadline_min + 5, line


def alerts() -> list[str]:
    return re.findall(r"^\s+- alert: (\w+)$", (CHART / "templates" / "prometheusrule.yaml").read_text(), re.MULTILINE)


def test_every_alert_has_its_runbook_section() -> None:
    template = (CHART / "templates" / "prometheusrule.yaml").read_text()
    headings = set(re.findall(r"^#### (\w+)$", GUIDE, re.MULTILINE))
    assert len(alerts()) >= 11
    for alert in alerts():
        assert alert in headings, f"docs/operations.md has no runbook section for {alert}"
        assert f'"%s#{alert.lower()}" $runbook' in template, f"{alert} has no runbook_url to its section"
        assert f"| `{alert}` |" in GUIDE, f"{alert} is not in the alerts table"


def test_every_alert_has_a_rule_test_that_makes_it_fire() -> None:
    fired: set[str] = set()
    for path in (ROOT / "helm" / "tests").glob("*.test.yaml"):
        for test in yaml.safe_load(path.read_text())["tests"]:
            fired |= {case["alertname"] for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    assert set(alerts()) <= fired, set(alerts()) - fired


def exposed_metric_names() -> set[str]:
    from prometheus_client import REGISTRY

    # The modules that register the service's metrics (forwarding has its own).
    from metastore import forward, metrics  # noqa: F401

    names: set[str] = set()
    for family in REGISTRY.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}.get(family.type, ("",))
        names |= {family.name + suffix for suffix in suffixes}
    return names


def test_every_metric_an_alert_reads_is_one_the_service_exposes() -> None:
    template = (CHART / "templates" / "prometheusrule.yaml").read_text()
    read = set(re.findall(r"\b((?:metastore|process)_\w+)\{", template))
    assert {"metastore_spool_writable", "metastore_spool_quarantined_total", "process_start_time_seconds"} <= read
    assert read <= exposed_metric_names(), read - exposed_metric_names()


def test_the_replica_alert_tells_pods_with_a_replica_by_a_pool_only_they_have() -> None:
    # metastore_read_replica_usable is 0 in a pod without a replica too: the alert needs the
    # replica's lag-check pool, which only a pod with one opens and reports.
    from prometheus_client import REGISTRY

    from metastore import config, db

    template = (CHART / "templates" / "prometheusrule.yaml").read_text()
    rule = template.split("- alert: MetastoreReadReplicaNotUsed", 1)[1].split("- alert:", 1)[0]
    pools = set(re.findall(r'\bpool="(\w+)"', rule))
    assert pools == {"replica_probe"}, rule
    base = {"METASTORE_DATABASE_URL": "host=127.0.0.1 dbname=x", "METASTORE_TLS": "off"}

    async def pool_names(env: dict[str, str]) -> set[str]:
        database = db.Database(config.load(env), writers=1)
        database.record_pool_stats()
        return {pool.name for pool in database.pools}

    assert not pools & asyncio.run(pool_names(base))
    assert pools <= asyncio.run(pool_names({**base, "METASTORE_READ_REPLICA_URL": "host=127.0.0.2 dbname=x"}))
    sample = REGISTRY.get_sample_value("metastore_db_pool_connections", {"pool": "replica_probe", "state": "idle"})
    assert sample is not None


def test_every_metric_a_dashboard_panel_reads_is_one_the_service_exposes() -> None:
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    read = {name for expr in exprs for name in re.findall(r"\b(metastore_\w+)\{", expr)}
    assert {"metastore_read_replica_lag_seconds", "metastore_read_replica_fallbacks_total"} <= read
    assert read <= exposed_metric_names(), read - exposed_metric_names()
    # The replica's lag panel shows pods with a replica only, told by the pool only they open.
    (lag,) = [e for e in exprs if "metastore_read_replica_lag_seconds" in e]
    assert 'pool="replica_probe"' in lag
