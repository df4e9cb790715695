"""An independent statement of the extraction rules, in Python, used as the tests' oracle.

The database implements the rules in SQL; tests compare what it derived with what
this module says it must derive, for fixtures and for generated events alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
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
    # A dataset that a column-lineage input field names is read by the event, listed or not.
    for _, _, _, namespace, name, _, _ in input_fields(event):
        kinds[(namespace, name)] = "dataset"
        links.add((namespace, name, "input"))
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
    and the type); then, in no particular order (sorted here), each dataset that a column-lineage
    input field names and the inputs do not list, once. Assumes first_fault(event) is None."""
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
    listed = {(item["namespace"], item["name"]) for item in event.get("inputs") or []}
    named = {(namespace, name) for _, _, _, namespace, name, _, _ in input_fields(event)}
    rows += [(ns, name, "input", None, None, None) for ns, name in sorted(named - listed)]
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


# (output namespace, output name, output field or None for the dataset-level list, input namespace,
# input name, input field, transformations as sent)
InputField = tuple[str, str, str | None, str, str, str, Any]


def input_fields(event: dict[str, Any]) -> list[InputField]:
    """Every well-formed input field of the columnLineage facets of the event's outputs: per output
    field (`fields.*.inputFields`) and the dataset-level `dataset` list. An entry needs string
    namespace, name and field, the namespace and name not empty; others are skipped. Whether or not
    the event lists the input dataset among its inputs. Assumes first_fault(event) is None."""
    found: list[InputField] = []
    for output in event.get("outputs") or []:
        facets = output.get("facets")
        facet = facets.get("columnLineage") if isinstance(facets, dict) else None
        if not isinstance(facet, dict):
            continue
        lists: list[tuple[str | None, Any]] = []
        fields = facet.get("fields")
        if isinstance(fields, dict):
            lists += [
                (key, spec.get("inputFields") if isinstance(spec, dict) else None) for key, spec in fields.items()
            ]
        lists.append((None, facet.get("dataset")))
        for out_field, entries in lists:
            for entry in entries if isinstance(entries, list) else []:
                if not isinstance(entry, dict):
                    continue
                namespace, name, field = entry.get("namespace"), entry.get("name"), entry.get("field")
                if not (isinstance(namespace, str) and namespace and isinstance(name, str) and name):
                    continue
                if not isinstance(field, str):
                    continue
                found.append(
                    (
                        output["namespace"],
                        output["name"],
                        out_field,
                        namespace,
                        name,
                        field,
                        entry.get("transformations"),
                    )
                )
    return found


def column_lineage(event: dict[str, Any]) -> set[tuple[Any, ...]]:
    """The facets' edges: (output namespace, name, field or None for the dataset-level list, input
    namespace, name, field, transformation type, subtype), one per transformation ('' for a type or
    subtype not given; an entry without transformations is one edge of unknown type)."""
    edges: set[tuple[Any, ...]] = set()
    for out_ns, out_name, out_field, namespace, name, field, transformations in input_fields(event):
        if not isinstance(transformations, list) or not transformations:
            transformations = [{}]
        for t in transformations:
            kind = t.get("type") if isinstance(t, dict) else None
            sub = t.get("subtype") if isinstance(t, dict) else None
            edges.add(
                (
                    out_ns,
                    out_name,
                    out_field or None,  # an empty field name is the dataset-level list too
                    namespace,
                    name,
                    field,
                    kind if isinstance(kind, str) else "",
                    sub if isinstance(sub, str) else "",
                )
            )
    return edges


def lineage_edges(event: dict[str, Any]) -> set[tuple[str, str, str, str, str, str]]:
    """Dataset lineage: (input namespace, name, output namespace, name, job namespace, job name) for
    each input the event lists to each output it lists, and each input dataset of a column-lineage
    input field to the output whose facet names it. Only events with a job; symlinks make none."""
    kind = event_kind(event)
    if kind not in ("run", "job"):
        return set()
    job = (event["job"]["namespace"], event["job"]["name"])
    inputs = {(i["namespace"], i["name"]) for i in event.get("inputs") or []}
    outputs = {(o["namespace"], o["name"]) for o in event.get("outputs") or []}
    edges = {(*i, *o, *job) for i in inputs for o in outputs}
    edges |= {(ns, name, out_ns, out_name, *job) for out_ns, out_name, _, ns, name, _, _ in input_fields(event)}
    return edges


def event_time(event: dict[str, Any]) -> datetime:
    """The eventTime of an event whose time has a zone (Z or an offset)."""
    return datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).astimezone(UTC)


def _hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def _widen(into: dict[Any, tuple[datetime, datetime]], key: Any, first: datetime, last: datetime) -> None:
    seen = into.get(key)
    into[key] = (min(seen[0], first), max(seen[1], last)) if seen else (first, last)


def state(events: list[dict[str, Any]]) -> dict[str, dict[Any, Any]]:
    """What a store holds after these events (valid, distinct as JSON, times with a zone), in any
    order and split into calls however: each dataset's kind, first and last eventTime and counts of
    events that read and wrote it; each dataset lineage edge and each column-lineage edge with its
    first and last hour (UTC)."""
    kinds, _ = merge(events)
    seen: dict[tuple[str, str], tuple[datetime, datetime]] = {}
    reads: dict[tuple[str, str], int] = {}
    writes: dict[tuple[str, str], int] = {}
    edges: dict[tuple[str, ...], tuple[datetime, datetime]] = {}
    columns: dict[tuple[Any, ...], tuple[datetime, datetime]] = {}
    for event in events:
        t = event_time(event)
        links = derive(event).links
        for ident in {(ns, name) for ns, name, _ in links}:
            _widen(seen, ident, t, t)
        for ns, name, direction in links:
            if direction == "input":
                reads[(ns, name)] = reads.get((ns, name), 0) + 1
            elif direction == "output":
                writes[(ns, name)] = writes.get((ns, name), 0) + 1
        for edge in lineage_edges(event):
            _widen(edges, edge, _hour(t), _hour(t))
        for column in column_lineage(event):
            _widen(columns, column, _hour(t), _hour(t))
    datasets = {
        ident: (kinds[ident], *seen[ident], reads.get(ident, 0), writes.get(ident, 0)) for ident in sorted(seen)
    }
    return {"datasets": datasets, "edges": edges, "columns": columns}
