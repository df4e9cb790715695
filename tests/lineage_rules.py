"""An independent statement of the extraction rules, in Python, used as the tests' oracle.

The database implements the rules in PL/pgSQL; tests compare what it derived with what
this module says it must derive, for fixtures and for generated events alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_BYTES = 1000


def _absent(value: Any) -> bool:
    return value is None


def event_kind(event: dict[str, Any]) -> str | None:
    run, job, dataset = event.get("run"), event.get("job"), event.get("dataset")
    if isinstance(run, dict) and isinstance(job, dict):
        return "run"
    if _absent(run) and isinstance(job, dict):
        return "job"
    if _absent(run) and _absent(job) and isinstance(dataset, dict):
        return "dataset"
    return None


def _valid_name(value: Any) -> bool:
    return isinstance(value, str) and value != "" and len(value.encode()) <= MAX_BYTES


@dataclass(frozen=True)
class Derived:
    # (namespace, name) -> "dataset" | "symlink"
    kinds: dict[tuple[str, str], str]
    # {(namespace, name, direction)}
    links: frozenset[tuple[str, str, str]]
    # {(carrier namespace, carrier name, symlink namespace, symlink name, type)}
    symlinks: frozenset[tuple[str, str, str, str, str]]


def derive(event: dict[str, Any]) -> Derived:
    """What one valid event contributes. Assumes the event passed validation."""
    kinds: dict[tuple[str, str], str] = {}
    links: set[tuple[str, str, str]] = set()
    symlinks: set[tuple[str, str, str, str, str]] = set()
    carriers: list[tuple[dict[str, Any], str]] = []
    for key, direction in (("inputs", "input"), ("outputs", "output")):
        for item in event.get(key) or []:
            carriers.append((item, direction))
    if event_kind(event) == "dataset":
        carriers.append((event["dataset"], "none"))
    for item, direction in carriers:
        ident = (item["namespace"], item["name"])
        kinds[ident] = "dataset"
        links.add((*ident, direction))
        facet = (item.get("facets") or {}).get("symlinks") if isinstance(item.get("facets"), dict) else None
        identifiers = facet.get("identifiers") if isinstance(facet, dict) else None
        if not isinstance(identifiers, list):
            continue
        for sym in identifiers:
            if not isinstance(sym, dict) or not (_valid_name(sym.get("namespace")) and _valid_name(sym.get("name"))):
                continue
            target = (sym["namespace"], sym["name"])
            if target == ident:
                continue
            kinds.setdefault(target, "symlink")
            links.add((*target, direction))
            sym_type = sym.get("type")
            symlinks.add((*ident, *target, sym_type[:200] if isinstance(sym_type, str) else ""))
    return Derived(kinds, frozenset(links), frozenset(symlinks))


def merge(events: list[dict[str, Any]]) -> tuple[dict[tuple[str, str], str], frozenset[tuple[str, str, str, str, str]]]:
    """Dataset kinds and symlinks of several events together: a dataset is real once any event says so."""
    kinds: dict[tuple[str, str], str] = {}
    symlinks: set[tuple[str, str, str, str, str]] = set()
    for event in events:
        derived = derive(event)
        for ident, kind in derived.kinds.items():
            if kinds.get(ident) != "dataset":
                kinds[ident] = kind
        symlinks |= derived.symlinks
    return kinds, frozenset(symlinks)
