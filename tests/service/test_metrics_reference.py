"""The metrics table of docs/service.md against what a running server's /metrics exposes: every
metric it serves is in the table once, and the table names nothing it does not serve."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import httpx

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "service.md"
# How prometheus-client names a family's samples: the name a reader queries.
SUFFIX = {"counter": "_total", "info": "_info"}


def documented() -> list[str]:
    text = REFERENCE.read_text()
    table = text[text.index("| Metric | Labels | What |") :].split("\n\n", 1)[0]
    names: list[str] = []
    for row in table.splitlines()[2:]:
        first_cell = row.split("|")[1]
        names += re.findall(r"`(metastore_[a-z_]+)`", first_cell)
    return names


def served(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE metastore_"):
            _, _, family, kind = line.split()
            if family.endswith("_created"):  # a counter's start time, served beside it
                continue
            names.add(family + SUFFIX.get(kind, "") if not family.endswith(SUFFIX.get(kind, "\0")) else family)
    return names


def test_the_metrics_table_is_what_metrics_serves(server: object, client: httpx.Client) -> None:
    names = documented()
    assert [n for n, k in Counter(names).items() if k > 1] == [], "a metric listed twice"
    exposed = served(client.get("/metrics").text)
    assert exposed, "no metastore_ metric served"
    assert sorted(exposed - set(names)) == [], "served but not in docs/service.md"
    assert sorted(set(names) - exposed) == [], "in docs/service.md but not served"
