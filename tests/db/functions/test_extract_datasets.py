"""metastore.extract_datasets and what ingest derives from it, against the rules stated in
tests/lineage_rules.py, for events hypothesis makes up."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import create_database, drop_database, ingest
from tests.lineage_rules import derive, first_fault, input_fields, mentions, merge
from tests.support.derived import event_links
from tests.support.events import symlinked

# A small alphabet makes collisions between names (and so shared datasets) likely.
names = st.one_of(st.sampled_from(["a", "b"]), st.text(alphabet="ab.:/'\"\n\u05d0 ", min_size=1, max_size=4))
namespaces = st.sampled_from(["trino://h:8080", "hive://m:9083", "file", "s3://bucket", "HDFS://NN"])
identifier = st.fixed_dictionaries(
    {"namespace": namespaces, "name": names}, optional={"type": st.sampled_from(["TABLE", "VIEW", "", "x" * 300])}
)
# Any text but NUL: a \u0000 escape is refused before extraction (22P05, tests/db/functions/test_ingest_event.py).
junk_text = st.text(st.characters(exclude_characters="\x00"), max_size=3)
junk = st.one_of(st.none(), st.integers(), junk_text, st.just({"namespace": "n"}), st.just({"name": ""}))
symlinks_facet = st.fixed_dictionaries({"identifiers": st.lists(st.one_of(identifier, junk), max_size=3)})
# columnLineage: input fields naming datasets listed or not, and entries extraction must read past.
# Junk as one branch: st.one_of flattens the branches of a one_of it is given, which would make
# junk five branches of seven.
odd = junk.map(lambda value: value)
transformation = st.fixed_dictionaries(
    {}, optional={"type": st.sampled_from(["DIRECT", "INDIRECT"]), "subtype": st.sampled_from(["FILTER", ""])}
)
input_field = st.fixed_dictionaries(
    {"namespace": namespaces, "name": names, "field": st.sampled_from(["a", "b", ""])},
    optional={"transformations": st.one_of(st.lists(transformation, max_size=2), odd)},
)
# Mostly readable entries: events whose facets name datasets are common.
entry_lists = st.one_of(
    st.lists(input_field, min_size=1, max_size=2),
    st.lists(st.one_of(input_field, odd, st.just({"namespace": "file", "name": "a"})), min_size=1, max_size=3),
    odd,
)
lineage_fields = st.dictionaries(
    st.sampled_from(["x", "y", ""]),
    st.one_of(st.fixed_dictionaries({"inputFields": entry_lists}), odd),
    min_size=1,
    max_size=2,
)
column_lineage_facet = st.one_of(
    st.fixed_dictionaries({"fields": lineage_fields}, optional={"dataset": entry_lists}),
    st.fixed_dictionaries({"fields": st.one_of(lineage_fields, odd), "dataset": entry_lists}),
    odd,
)
dataset = st.fixed_dictionaries(
    {"namespace": namespaces, "name": names},
    optional={
        "facets": st.fixed_dictionaries(
            {},
            optional={
                "symlinks": st.one_of(symlinks_facet, junk),
                "columnLineage": column_lineage_facet,
            },
        )
    },
)
# An output whose facets have a columnLineage member (readable or not).
lineage_output = st.fixed_dictionaries(
    {
        "namespace": namespaces,
        "name": names,
        "facets": st.fixed_dictionaries(
            {"columnLineage": column_lineage_facet}, optional={"symlinks": st.one_of(symlinks_facet, junk)}
        ),
    }
)
run_event = st.fixed_dictionaries(
    {
        "eventTime": st.sampled_from(["2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z", "2023-01-01T00:00:00+02:00"]),
        "run": st.fixed_dictionaries({"runId": st.uuids().map(str)}),
        "job": st.fixed_dictionaries({"namespace": st.just("jobs"), "name": names}),
    },
    optional={
        "inputs": st.lists(dataset, max_size=3),
        "outputs": st.lists(st.one_of(dataset, lineage_output), max_size=3),
        "eventType": st.sampled_from(["START", "COMPLETE", "FAIL"]),
    },
)
dataset_event = st.fixed_dictionaries({"eventTime": st.just("2024-03-01T00:00:00Z"), "dataset": dataset})
# A COMPLETE whose outputs' facets name inputs that it may not list (Spark's often lists none).
lineage_event = st.fixed_dictionaries(
    {
        "eventTime": st.sampled_from(["2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"]),
        "eventType": st.just("COMPLETE"),
        "run": st.fixed_dictionaries({"runId": st.uuids().map(str)}),
        "job": st.fixed_dictionaries({"namespace": st.just("jobs"), "name": names}),
        "inputs": st.lists(dataset, max_size=2),
        "outputs": st.lists(st.one_of(lineage_output, dataset), min_size=1, max_size=2),
    }
)
events = st.lists(st.one_of(lineage_event, run_event, dataset_event), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=events)
def test_ingest_derives_exactly_what_the_rules_say(pg_server: Any, batch: list[dict[str, Any]]) -> None:
    db = create_database(pg_server)
    try:
        with (
            psycopg.connect(db.service_dsn, autocommit=True) as service,
            psycopg.connect(db.owner_dsn, autocommit=True) as owner,
        ):
            ids = []
            for event in batch:
                status, event_id, _, message = ingest(service, event)
                assert status in ("stored", "duplicate"), message
                ids.append(event_id)
            for event, event_id in zip(batch, ids, strict=True):
                assert event_links(owner, event_id) == set(derive(event).links)
            kinds, symlinks = merge(batch)
            stored_kinds = {
                (ns, n): k
                for ns, n, k in owner.execute("SELECT namespace, name, kind FROM metastore.datasets").fetchall()
            }
            assert stored_kinds == kinds
            stored_symlinks = set(
                owner.execute(
                    "SELECT c.namespace, c.name, s.namespace, s.name, y.type FROM metastore.dataset_symlinks y "
                    "JOIN metastore.datasets c ON c.id = y.dataset_id "
                    "JOIN metastore.datasets s ON s.id = y.symlink_id"
                ).fetchall()
            )
            assert stored_symlinks == symlinks
    finally:
        drop_database(db)


def job_run(when: str, run: str, job: str, **datasets: list[Any]) -> dict[str, Any]:
    """An event of run `run` of job j/`job` at `when`, with the inputs and outputs given."""
    return {"eventTime": when, "run": {"runId": run}, "job": {"namespace": "j", "name": job}, **datasets}


def test_a_symlink_becomes_a_dataset_when_it_is_read_for_real(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    table = symlinked("hdfs://nn", "/warehouse/t", "hive://m", "db.t")
    ingest(service, job_run("2024-01-01T00:00:00Z", "r1", "a", outputs=[table]))
    assert owner.execute("SELECT kind FROM metastore.datasets WHERE name = 'db.t'").fetchone() == ("symlink",)
    ingest(service, job_run("2023-01-01T00:00:00Z", "r2", "b", inputs=[{"namespace": "hive://m", "name": "db.t"}]))
    row = owner.execute(
        "SELECT kind, first_seen, last_seen FROM metastore.datasets_view WHERE name = 'db.t'"
    ).fetchone()
    assert row is not None
    assert row[0] == "dataset"
    assert (row[1].year, row[2].year) == (2023, 2024)
    # Once real, a later mention as a mere symlink does not make it a symlink again.
    ingest(service, job_run("2025-01-01T00:00:00Z", "r3", "c", outputs=[table]))
    assert owner.execute("SELECT kind FROM metastore.datasets WHERE name = 'db.t'").fetchone() == ("dataset",)


def test_a_dataset_repeated_in_one_event_is_linked_once_per_direction(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    t = {"namespace": "pg://h", "name": "s.t"}
    event = job_run("2024-01-01T00:00:00Z", "r", "n", inputs=[t, t, t], outputs=[t])
    ingest(service, event)
    rows = owner.execute("SELECT direction FROM metastore.event_datasets ORDER BY 1").fetchall()
    assert rows == [("input",), ("output",)]


def test_column_lineage_input_fields_are_datasets_the_event_reads(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A dataset that only an input field of an output's columnLineage facet names: the event reads it,
    whether or not its inputs list it (Spark's COMPLETE often lists none)."""
    out = {
        "namespace": "pg://h",
        "name": "s.out",
        "facets": {
            "columnLineage": {
                "fields": {"a": {"inputFields": [{"namespace": "pg://other", "name": "s.hidden", "field": "a"}]}}
            }
        },
    }
    event = job_run("2024-01-01T00:00:00Z", "r", "n")
    assert ingest(service, {**event, "outputs": [out]})[0] == "stored"
    rows = owner.execute(
        "SELECT d.name, d.kind, l.direction, d.input_events FROM metastore.datasets_view d"
        " JOIN metastore.event_datasets l ON l.dataset_id = d.id ORDER BY 1"
    ).fetchall()
    assert rows == [("s.hidden", "dataset", "input", 1), ("s.out", "dataset", "output", 0)]
    # Listed among the inputs as well, it is mentioned once.
    listed = {**event, "inputs": [{"namespace": "pg://other", "name": "s.hidden"}], "outputs": [out]}
    found = owner.execute("SELECT * FROM metastore.extract_datasets(%s::jsonb)", (json.dumps(listed),)).fetchall()
    assert found == [
        ("pg://other", "s.hidden", "input", None, None, None),
        ("pg://h", "s.out", "output", None, None, None),
    ]
    alone = owner.execute(
        "SELECT * FROM metastore.extract_datasets(%s::jsonb)", (json.dumps({**event, "outputs": [out]}),)
    )
    assert alone.fetchall() == [
        ("pg://h", "s.out", "output", None, None, None),
        ("pg://other", "s.hidden", "input", None, None, None),
    ]


def test_extract_datasets_is_a_pure_function_of_the_event(owner: psycopg.Connection[Any]) -> None:
    event = {
        "eventTime": "2024-01-01T00:00:00Z",
        "job": {"namespace": "j", "name": "n"},
        "inputs": [{"namespace": "a://b", "name": "c"}],
    }
    rows = owner.execute("SELECT * FROM metastore.extract_datasets(%s::jsonb)", (json.dumps(event),)).fetchall()
    assert rows == [("a://b", "c", "input", None, None, None)]


# Items and lists extraction refuses, or must read past: anything but a dataset object.
bad_item = st.one_of(
    dataset,
    junk,
    st.lists(names, max_size=2),
    st.fixed_dictionaries({"namespace": st.one_of(namespaces, junk), "name": st.one_of(names, junk)}),
)
any_event = st.fixed_dictionaries(
    {
        "eventTime": st.just("2024-01-01T00:00:00Z"),
        "run": st.fixed_dictionaries({"runId": st.just("r")}),
        "job": st.fixed_dictionaries({"namespace": st.just("jobs"), "name": st.just("j")}),
    },
    optional={
        "inputs": st.one_of(st.lists(bad_item, max_size=3), junk),
        "outputs": st.one_of(st.lists(bad_item, max_size=3), junk),
    },
)


def column_lineage_tail(event: dict[str, Any]) -> set[tuple[str, str]]:
    listed = {(i["namespace"], i["name"]) for i in event.get("inputs") or []}
    return {(e[3], e[4]) for e in input_fields(event)} - listed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(event=st.one_of(run_event, dataset_event, lineage_event, any_event))
def test_extract_datasets_gives_the_rules_rows_in_order_or_the_first_fault(
    owner: psycopg.Connection[Any], event: dict[str, Any]
) -> None:
    fault = first_fault(event)
    query = "SELECT * FROM metastore.extract_datasets(%s::jsonb)"
    if fault is None:
        rows, expected = owner.execute(query, (json.dumps(event),)).fetchall(), mentions(event)
        # The datasets only column lineage names come last, in no particular order.
        head = len(expected) - len(column_lineage_tail(event))
        assert rows[:head] == expected[:head] and sorted(rows[head:]) == expected[head:]
        return
    # The same fault whichever item a plan reaches first: the message names the first in order.
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        owner.execute(query, (json.dumps(event),))
    assert caught.value.diag.message_primary is not None
    assert caught.value.diag.message_primary.startswith(f'"{fault}"'), (fault, caught.value.diag.message_primary)


def test_extract_datasets_is_inlined_into_the_statement_that_calls_it(owner: psycopg.Connection[Any]) -> None:
    """A SQL function PostgreSQL inlines (no SET clause, qualified names): as backfill calls it over
    every stored event, the plan holds its expressions, not a call per event."""
    owner.execute("SET search_path = pg_catalog, pg_temp")
    plan = "\n".join(
        r[0]
        for r in owner.execute(
            "EXPLAIN VERBOSE SELECT x.* FROM metastore.events AS e"
            " CROSS JOIN LATERAL metastore.extract_datasets(e.payload) AS x"
        )
    )
    # On Citus the coordinator's plan quotes the query it sends to each worker ("Query: ..."), the
    # call included; the workers' plans below it are what runs.
    planned = "\n".join(line for line in plan.splitlines() if not line.strip().startswith("Query:"))
    assert "jsonb_array_elements" in planned and "Function Scan on extract_datasets" not in planned, plan
    assert "metastore.extract_datasets" not in planned, plan
