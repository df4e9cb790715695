"""An independent statement of the extraction rules, in Python, used as the tests' oracle.

The database implements the rules in SQL; tests compare what it derived with what
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


def mentions(event: dict[str, Any]) -> list[tuple[str, str, str, str | None, str | None, str | None]]:
    """metastore.extract_datasets' rows, in their order: each input, output or DatasetEvent dataset
    (namespace, name, direction), each followed by its valid symlink identifiers (with the carrier
    and the type). Assumes first_fault(event) is None."""
    rows: list[tuple[str, str, str, str | None, str | None, str | None]] = []
    carriers = [(item, "input") for item in event.get("inputs") or []]
    carriers += [(item, "output") for item in event.get("outputs") or []]
    if event_kind(event) == "dataset":
        carriers.append((event["dataset"], "none"))
    for item, direction in carriers:
        rows.append((item["namespace"], item["name"], direction, None, None, None))
        facets = item.get("facets")
        facet = facets.get("symlinks") if isinstance(facets, dict) else None
        identifiers = facet.get("identifiers") if isinstance(facet, dict) else None
        for sym in identifiers if isinstance(identifiers, list) else []:
            if not isinstance(sym, dict):
                continue
            ns, name = sym.get("namespace"), sym.get("name")
            if not (isinstance(ns, str) and isinstance(name, str) and ns and name) or (ns, name) == (
                item["namespace"],
                item["name"],
            ):
                continue
            kind = sym.get("type")
            carrier = (item["namespace"], item["name"])
            rows.append((ns, name, direction, *carrier, kind[:200] if isinstance(kind, str) else ""))
    return rows


def first_fault(event: dict[str, Any]) -> str | None:
    """The path of the first member extraction refuses (22023): a list that is not an array, an item
    that is not an object, a namespace or name that is not a non-empty string; None when none is."""
    lists = [("inputs", event.get("inputs")), ("outputs", event.get("outputs"))]
    if event_kind(event) == "dataset":
        lists.append(("dataset", [event["dataset"]]))
    for key, items in lists:
        if items is None:
            continue
        if not isinstance(items, list):
            return key
        for pos, item in enumerate(items):
            path = key if key == "dataset" else f"{key}[{pos}]"
            if not isinstance(item, dict):
                return path
            for part in ("namespace", "name"):
                if not (isinstance(item.get(part), str) and item[part]):
                    return f"{path}.{part}"
    return None
