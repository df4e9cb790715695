"""metastore.ingest_batch: a JSON array of events, each stored or rejected on its own."""

from __future__ import annotations

import json
import re
import time
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


def run_event(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "eventTime": "2024-01-01T00:00:00Z",
        "run": {"runId": f"r{i}"},
        "job": {"namespace": "j", "name": "n"},
        "inputs": [{"namespace": "trino://h:8080", "name": f"s.t{i % 7}"}],
        **extra,
    }


def test_a_batch_over_the_maximum_is_refused_whole_with_54000(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    owner.execute("UPDATE metastore.settings SET max_batch_events = 3")
    assert batch(service, json.dumps([run_event(i) for i in range(3)]).encode())[0] == "success"
    with pytest.raises(psycopg.Error) as caught:
        batch(service, json.dumps([run_event(i) for i in range(10, 14)]).encode())
    assert caught.value.sqlstate == "54000"
    assert "3" in caught.value.diag.message_primary  # names the limit
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (3,)
    assert owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone() == (0,)


def test_the_default_maximum_takes_a_full_batch(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    row = owner.execute("SELECT max_batch_events FROM metastore.settings").fetchone()
    assert row is not None
    limit = row[0]
    status, result = batch(service, json.dumps([run_event(i) for i in range(limit)]).encode())
    assert (status, result["summary"]["stored"]) == ("success", limit)
    with pytest.raises(psycopg.Error) as caught:
        batch(service, json.dumps([run_event(i) for i in range(limit + 1)]).encode())
    assert caught.value.sqlstate == "54000"


def test_refused_events_are_recorded_in_order_and_a_poison_one_without_its_text(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    numbers = ", ".join(["1e131071"] * 5000)
    body = (
        "["
        + json.dumps(run_event(0))
        + ', {"eventTime": "2024-01-01T00:00:00Z", "facets": ['
        + numbers
        + "]}, "
        + json.dumps(run_event(2, eventTime="1999-01-01T00:00:00Z"))
        + ", "
        + json.dumps({"run": {}})
        + "]"
    ).encode()
    started = time.perf_counter()
    status, result = batch(service, body)
    elapsed = time.perf_counter() - started
    assert status == "partial_success"
    assert [(f["index"], f["code"]) for f in result["failed_events"]] == [(1, "22003"), (2, "22008"), (3, "22023")]
    # Printing the numbers took about 10 s; refusing them takes milliseconds. Only the order is asserted.
    assert elapsed < 3, elapsed
    kept = owner.execute(
        "SELECT body_prefix, body_bytes IS NULL, body_sha256 IS NULL, sqlstate "
        "FROM metastore.rejected_events ORDER BY id"
    ).fetchall()
    assert [k[1:] for k in kept] == [(True, True, "22003"), (False, False, "22008"), (False, False, "22023")]
    assert kept[0][0] is None
    # The text of the event as PostgreSQL prints it (the bytes of one element are not at hand).
    assert json.loads(kept[1][0]) == run_event(2, eventTime="1999-01-01T00:00:00Z")


def test_thousands_of_invalid_events_take_time_linear_in_their_number(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """4000 invalid events took 17.8 s when each failure was appended to a growing jsonb array."""
    owner.execute("UPDATE metastore.settings SET max_batch_events = 4000")
    invalid = [{"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": f"r{i}"}} for i in range(4000)]
    started = time.perf_counter()
    status, result = batch(service, json.dumps(invalid).encode())
    elapsed = time.perf_counter() - started
    assert status == "failure"
    assert [f["index"] for f in result["failed_events"]] == list(range(4000))
    assert owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone() == (4000,)
    assert elapsed < 3, elapsed


def test_a_null_source_kind_is_unauthenticated_and_an_unknown_one_22023(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    body = json.dumps([run_event(0), {"run": {}}]).encode()
    row = service.execute("SELECT status FROM metastore.ingest_batch(%b, NULL, NULL)", (body,)).fetchone()
    assert row == ("partial_success",)
    for kind, principal in (("bogus", None), ("unauthenticated", "CN=x")):
        with pytest.raises(psycopg.Error) as caught:
            service.execute("SELECT status FROM metastore.ingest_batch(%b, %s, %s)", (body, kind, principal))
        assert caught.value.sqlstate == "22023"
    assert owner.execute("SELECT DISTINCT source_kind FROM metastore.events").fetchall() == [("unauthenticated",)]
    assert owner.execute("SELECT DISTINCT source_kind FROM metastore.rejected_events").fetchall() == [
        ("unauthenticated",)
    ]
