"""Trino's own OpenLineage client (openlineage-java 1.33.0 as Trino 476 configures it: 5 s timeout, one
retry after 1 s on 429/503) never waits 5 s for one event, retry included, whether the database is
healthy, locked or frozen, in sync and in async mode. A few emits per case; `make trino-budget` runs
the same cases with 20 each (tests/trino_client/budget.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.trino_client import budget

LISTENER_TIMEOUT_MS = 5000  # Trino's openlineage-event-listener.transport.timeout default


def test_every_emit_returns_within_trinos_timeout_including_its_retry(tmp_path: Path) -> None:
    result = budget.run(emits=2, none_emits=3, warmup=2, work=tmp_path)
    (tmp_path / "trino-budget.json").write_text(json.dumps(result, indent=2))
    report = budget.table(result)
    print(report)
    cases = {(c["mode"], c["fault"]): c for c in result["cases"]}
    assert set(cases) == {(m, f) for m in budget.MODES for f in budget.FAULTS}

    for mode in budget.MODES:
        healthy = cases[(mode, "none")]
        assert healthy["exceptions"] == 0, f"{mode}: emits failed with a healthy database\n{report}"
        assert healthy["stored"] == healthy["n"], f"{mode}: events missing with a healthy database\n{report}"

    slow = {key: c["max_ms"] for key, c in cases.items() if c["max_ms"] >= LISTENER_TIMEOUT_MS}
    assert not slow, f"emit() reached Trino's {LISTENER_TIMEOUT_MS} ms: {slow}\n{report}"
