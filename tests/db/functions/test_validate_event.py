"""metastore.validate_event's guards, through metastore.ingest_event as the app role: numbers within the
IEEE-754 double range (I-JSON), eventTime within the window of metastore.settings, messages that never
print a whole value."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture


def run_event(**extra: Any) -> dict[str, Any]:
    return {
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "run": {"runId": "r"},
        "job": {"namespace": "n", "name": "j"},
        **extra,
    }


def with_number(literal: str) -> bytes:
    """An event whose run facet holds the number as written (json.dumps would print it otherwise)."""
    return json.dumps(run_event(run={"runId": "r", "facets": {"x": {"v": "@"}}})).replace('"@"', literal).encode()


@pytest.mark.parametrize(
    "literal", ["1e131071", "-1e131071", "1.8e308", "-1.7976931348623159e308", "1e309", "4e-324", "-1e-400", "0e-400"]
)
def test_numbers_outside_the_double_range_are_refused_with_22003(
    literal: str, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    status, _, code, _ = ingest(service, with_number(literal))
    assert (status, code) == ("rejected", "22003")
    assert owner.execute("SELECT sqlstate FROM metastore.rejected_events").fetchall() == [("22003",)]


@pytest.mark.parametrize(
    "literal",
    ["1.7976931348623157e308", "-1.7976931348623157e308", "4.9e-324", "-5e-324", "0", "-0.0", "0e-300", "0e400", "1e2"],
)
def test_numbers_within_the_double_range_are_accepted(literal: str, service: psycopg.Connection[Any]) -> None:
    status, _, code, message = ingest(service, with_number(literal))
    assert (status, code) == ("stored", None), message


def test_thousands_of_huge_numbers_are_refused_well_under_a_second(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """1e131071 takes a few bytes in jsonb and 131,072 digits as text: 5000 of them printed for the
    de-duplication hash made about 650 MB and wedged the writers."""
    numbers = ", ".join(["1e131071"] * 5000)
    event = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    event["eventTime"] = datetime.now(UTC).isoformat()
    body = json.dumps(event).replace('"run": {', '"run": {"stats": [' + numbers + "], ", 1).encode()
    started = time.perf_counter()
    status, _, code, _ = ingest(service, body)
    elapsed = time.perf_counter() - started
    assert (status, code) == ("rejected", "22003")
    # Printing the numbers took about 10 s; refusing them takes milliseconds. Only the order is asserted.
    assert elapsed < 3, elapsed
    assert owner.execute("SELECT body_bytes FROM metastore.rejected_events").fetchall() == [(len(body),)]


def test_messages_name_the_type_never_the_value(service: psycopg.Connection[Any]) -> None:
    # Within the double range, yet an object whose text is large: the message stays short.
    big = {"k" + str(i): list(range(100)) for i in range(200)}
    status, _, code, message = ingest(service, run_event(run={"runId": big}))
    assert (status, code) == ("rejected", "22023")
    assert message is not None and len(message) < 200 and "object" in message


def at(delta: timedelta | str) -> str:
    """A time that far from now (computed when the test runs, not when it is collected)."""
    if isinstance(delta, str):
        return delta
    return (datetime.now(UTC) + delta).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.parametrize(
    "event_time",
    [
        -timedelta(days=3653 + 2),  # ten years and a bit ago
        timedelta(days=1, minutes=5),
        "2099-01-01T00:00:00Z",
        "9999-12-31T23:00:00-05:00",  # 10000-01-01 in UTC
        "0001-01-01T00:00:00+01:00",  # 1 BC in UTC
        "1900-01-01T00:00:00Z",
    ],
)
def test_an_event_time_outside_the_window_is_refused_with_22008_and_kept(
    event_time: timedelta | str, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    status, _, code, message = ingest(service, run_event(eventTime=at(event_time)))
    assert (status, code) == ("rejected", "22008"), message
    assert owner.execute("SELECT sqlstate FROM metastore.rejected_events").fetchall() == [("22008",)]
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (0,)


def test_year_zero_is_not_a_date_time(service: psycopg.Connection[Any]) -> None:
    assert ingest(service, run_event(eventTime="0000-01-01T00:00:00Z"))[2] == "22007"


@pytest.mark.parametrize("event_time", [-timedelta(days=3650 - 2), -timedelta(minutes=1), timedelta(hours=23)])
def test_an_event_time_inside_the_window_is_stored(event_time: timedelta, service: psycopg.Connection[Any]) -> None:
    status, _, code, message = ingest(service, run_event(eventTime=at(event_time)))
    assert (status, code) == ("stored", None), message


def test_the_owner_moves_the_window_with_an_update(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ahead, old = at(timedelta(days=20)), at(-timedelta(days=40))
    assert ingest(service, run_event(eventTime=ahead))[2] == "22008"
    owner.execute("UPDATE metastore.settings SET event_time_future = '30 days', event_time_past = '30 days'")
    assert ingest(service, run_event(eventTime=ahead))[0] == "stored"
    assert ingest(service, run_event(eventTime=old))[2] == "22008"
    # Whatever the window says, years outside 1..9999 stay out.
    owner.execute("UPDATE metastore.settings SET event_time_future = '1000 years'")
    assert ingest(service, run_event(eventTime="9999-12-31T23:00:00-05:00"))[2] == "22008"


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE metastore.settings SET event_time_past = '-1 day'",
        "UPDATE metastore.settings SET event_time_future = '2000 years'",
        "UPDATE metastore.settings SET max_batch_events = 0",
        "UPDATE metastore.settings SET max_batch_events = NULL",
    ],
)
def test_settings_out_of_bounds_are_refused(statement: str, owner: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.IntegrityError):
        owner.execute(statement)


def test_settings_keep_exactly_one_row(owner: psycopg.Connection[Any]) -> None:
    for statement in ("DELETE FROM metastore.settings", "TRUNCATE metastore.settings"):
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            owner.execute(statement)
    with pytest.raises(psycopg.errors.UniqueViolation):
        owner.execute("INSERT INTO metastore.settings DEFAULT VALUES")
    assert owner.execute("SELECT count(*) FROM metastore.settings").fetchone() == (1,)
