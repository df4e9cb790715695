"""metastore.ingest_batch: a JSON array of events, each stored or rejected on its own."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, load_fixture


def batch(conn: psycopg.Connection[Any], body: bytes) -> tuple[str, dict[str, Any]]:
    row = conn.execute("SELECT status, result FROM metastore.ingest_batch(%b)", (body,)).fetchone()
    assert row is not None
    return row[0], row[1]


def test_marquez_seed_events_are_stored_once_their_placeholders_are_filled(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    text = (FIXTURES / "marquez" / "metadata.template.json").read_text()
    # Marquez's seeding fills these before posting; so do we, with distinct times.
    filled = re.sub(r"\{\{(\w+)\}\}", lambda m: f"2024-01-01T00:{len(m.group(1)) % 60:02d}:00Z", text)
    status, result = batch(service, filled.encode())
    events = json.loads(filled)
    assert status == "success"
    assert result["summary"]["received"] == len(events) == result["summary"]["successful"]
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (result["summary"]["stored"],)


def test_the_raw_template_is_refused_event_by_event(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    body = (FIXTURES / "marquez" / "metadata.template.json").read_bytes()
    status, result = batch(service, body)
    assert status == "failure"
    assert {f["code"] for f in result["failed_events"]} == {"22007"}
    assert [f["index"] for f in result["failed_events"]] == list(range(26))
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (0,)
    assert owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone() == (26,)


def test_dbt_run_events_are_stored(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    body = (FIXTURES / "openlineage" / "OpenLineage" / "successful_run_ol_events.json").read_bytes()
    status, result = batch(service, body)
    assert status == "success", result["failed_events"][:3]
    names = {r[0] for r in owner.execute("SELECT name FROM metastore.datasets").fetchall()}
    assert "postgres.public.customers" in names


def test_a_partly_bad_batch_keeps_the_good_events(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    good = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    body = json.dumps([good, {"eventTime": "2024-01-01T00:00:00Z"}, good]).encode()
    status, result = batch(service, body)
    assert status == "partial_success"
    assert result["summary"] == {
        "received": 3,
        "successful": 2,
        "stored": 1,
        "duplicates": 1,
        "failed": 1,
        "retriable": 0,
        "non_retriable": 1,
    }
    assert [(f["index"], f["code"]) for f in result["failed_events"]] == [(1, "22023")]
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (1,)


@pytest.mark.parametrize(("body", "sqlstate"), [(b"{}", "22023"), (b"[", "22P02"), (b"\xff", "22021")])
def test_a_body_that_is_not_an_array_is_refused_whole(
    body: bytes, sqlstate: str, service: psycopg.Connection[Any]
) -> None:
    with pytest.raises(psycopg.Error) as caught:
        batch(service, body)
    assert caught.value.sqlstate == sqlstate


def test_an_empty_batch_succeeds(service: psycopg.Connection[Any]) -> None:
    assert batch(service, b"[]")[0] == "success"
