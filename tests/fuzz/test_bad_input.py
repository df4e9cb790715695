"""Property-based bad input over HTTP: whatever arrives, the service answers 2xx or a 4xx with a
JSON reason, never a 5xx, and never keeps half an event (what it derived equals a full rebuild)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Database
from tests.db.functions.test_backfill import snapshot

nasty_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "\u0000",
            "'; DROP TABLE metastore.events; --",
            "\u202eevil\u202c",
            'quo"te\\',
            "line\nbreak",
            "<script>alert(1)</script>",
            "trino://h:8080",
            "x" * 1001,
            "2024-13-45T99:99:99Z",
            "now",
            "\ud7ff\ue000",
            "NaN",
        ]
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    nasty_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(nasty_text, inner, max_size=5)),
    max_leaves=30,
)
dataset = st.fixed_dictionaries(
    {"namespace": st.one_of(nasty_text, json_values), "name": st.one_of(nasty_text, json_values)},
    optional={"facets": json_values},
)
event_like = st.fixed_dictionaries(
    {},
    optional={
        "eventTime": st.one_of(st.just("2024-01-01T00:00:00Z"), nasty_text, json_values),
        "eventType": st.one_of(st.sampled_from(["START", "COMPLETE", "FAIL"]), json_values),
        "run": st.one_of(st.fixed_dictionaries({"runId": st.one_of(st.uuids().map(str), json_values)}), json_values),
        "job": st.one_of(st.fixed_dictionaries({"namespace": nasty_text, "name": nasty_text}), json_values),
        "dataset": st.one_of(dataset, json_values),
        "inputs": st.one_of(st.lists(st.one_of(dataset, json_values), max_size=4), json_values),
        "outputs": st.one_of(st.lists(dataset, max_size=4), json_values),
        "producer": json_values,
        "schemaURL": json_values,
        "unknownField": json_values,
    },
)
bodies = st.one_of(
    event_like.map(lambda e: json.dumps(e).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    event_like.map(lambda e: json.dumps(e).encode()[: max(1, len(json.dumps(e)) // 2)]),  # truncated
    st.integers(min_value=1, max_value=3000).map(lambda n: b"[" * n + b"]" * n),  # deep nesting
)


def check_answer(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["status"] == response.status_code and error["message"]
        assert "Traceback" not in response.text


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=bodies)
def test_any_body_to_the_single_event_route(client: httpx.Client, body: bytes) -> None:
    check_answer(client.post("/api/v1/lineage", content=body))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.one_of(event_like, json_values), max_size=8))
def test_any_batch(client: httpx.Client, batch: list[Any]) -> None:
    check_answer(client.post("/api/v1/lineage/batch", content=json.dumps(batch).encode()))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(
        st.sampled_from(["limit", "cursor", "namespace", "scheme", "kind", "q", "x"]),
        nasty_text.filter(lambda s: "\u0000" not in s),
        max_size=4,
    )
)
def test_any_query_parameters(client: httpx.Client, params: dict[str, str]) -> None:
    check_answer(client.get("/api/v1/datasets", params=params))


@pytest.mark.parametrize("size", [10 * 1024 * 1024, 200 * 1024 * 1024])
def test_gzip_bombs(client: httpx.Client, size: int) -> None:
    bomb = gzip.compress(b"[" + b"0," * (size // 2) + b"0]", compresslevel=9)
    response = client.post("/api/v1/lineage", content=bomb, headers={"Content-Encoding": "gzip"})
    assert response.status_code == 413


def test_a_huge_array_and_an_enormous_facet(client: httpx.Client) -> None:
    huge = {
        "eventTime": "2024-01-01T00:00:00Z",
        "job": {"namespace": "fuzz", "name": "huge"},
        "inputs": [{"namespace": "n", "name": f"t{i}"} for i in range(5000)],
        "outputs": [{"namespace": "n", "name": "o", "facets": {"blob": {"x": "y" * 500_000}}}],
    }
    response = client.post("/api/v1/lineage", json=huge)
    assert response.status_code == 201, response.text


def test_nothing_half_written(module_db: Database, client: httpx.Client) -> None:
    """Runs last in this module: whatever the fuzzing stored, the derived tables are exactly what
    a rebuild from the stored events gives."""
    with psycopg.connect(module_db.owner_dsn, autocommit=True) as owner:
        before = snapshot(owner)
        owner.execute("CALL metastore.backfill(500)")
        assert snapshot(owner) == before
        stored = owner.execute("SELECT count(*) FROM metastore.events").fetchone()
    assert stored is not None and stored[0] > 0
