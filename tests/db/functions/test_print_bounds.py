"""Every stored event can be served back: metastore.validate_event refuses, on every ingest path, an
event whose JSON text as stored prints far larger than the event is stored (54M01) or that nests
deeper than common readers parse (54M02). The rule is checked against an oracle that prints the
event (octet_length(payload::text)); the cheap bounds that spare most events the printing must
never change a verdict."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from tests.conftest import ingest

MIB = 1 << 20
# The rule (docs/events.md, "What the store refuses so that it can serve every event back").
CAP = 16 * MIB  # no event prints to more than this
FLOOR = 1 * MIB  # nor to more than RATIO times its size as stored, once it prints to more than this
RATIO = 8
DEPTH = 512


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_with(raw: str, **extra: Any) -> bytes:
    """A valid run event whose run facet "x" holds `raw`, JSON text as written (json.dumps would
    print numbers otherwise)."""
    event = {
        "eventTime": now(),
        "eventType": "COMPLETE",
        "run": {"runId": "r", "facets": {"x": "@"}},
        "job": {"namespace": "print-bounds", "name": "j"},
        **extra,
    }
    return json.dumps(event).replace('"@"', raw, 1).encode()


def numbers(literal: str, count: int) -> str:
    return "[" + ",".join([literal] * count) + "]"


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    """A JSON value `depth` containers deep (the facet itself is at depth 4 of the event)."""
    return open_ * depth + close * depth


def objects(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def sizes(owner: psycopg.Connection[Any], body: bytes) -> tuple[int, int]:
    """(printed, stored): the event's JSON text as PostgreSQL prints it, and its jsonb size."""
    row = owner.execute(
        "SELECT octet_length(j::text), pg_column_size(j) FROM (SELECT convert_from(%s, 'UTF8')::jsonb AS j) AS e",
        (body,),
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def refused_by_rule(printed: int, stored: int) -> bool:
    return printed > min(CAP, max(FLOOR, RATIO * stored))


def test_an_event_of_numbers_that_print_309_digits_each_is_refused_with_54m01(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """60,000 x 1e308: 360 KB sent, 18.6 MB as stored text (each prints 309 digits)."""
    body = event_with(numbers("1e308", 60_000))
    printed, stored = sizes(owner, body)
    assert printed > 18_000_000 and printed > RATIO * stored
    status, event_id, code, message = ingest(service, body)
    assert (status, event_id, code) == ("rejected", None, "54M01")
    assert len(message) < 400 and "000000000" not in message, message  # it never prints a value
    # Refused on what its long numbers print at least, without printing the event.
    assert message.startswith("the event prints to at least "), message
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (0,)
    assert owner.execute("SELECT sqlstate, body_bytes FROM metastore.rejected_events").fetchall() == [
        ("54M01", len(body))
    ]


def test_the_refusal_holds_on_every_ingest_path(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    bomb, deep = event_with(numbers("1e308", 60_000)), event_with(nested(DEPTH))
    good = event_with("1")
    rows = service.execute(
        "SELECT status, error_code FROM metastore.ingest_events(%s::bytea[])", ([bomb, deep, good],)
    ).fetchall()
    assert rows == [("rejected", "54M01"), ("rejected", "54M02"), ("stored", None)]
    batch = b"[" + b", ".join([bomb, deep, event_with("2")]) + b"]"
    (result,) = service.execute("SELECT result FROM metastore.ingest_batch(%b)", (batch,)).fetchone()  # type: ignore[misc]
    assert [(f["index"], f["code"]) for f in result["failed_events"]] == [(0, "54M01"), (1, "54M02")]
    assert result["summary"]["stored"] == 1
    # Recorded like every refusal. A batch's elements have no bytes of their own, and these two are
    # recorded without their text: printing them is what the rule avoids.
    recorded = owner.execute(
        "SELECT sqlstate, body_bytes IS NOT NULL FROM metastore.rejected_events ORDER BY id"
    ).fetchall()
    assert recorded == [("54M01", True), ("54M02", True), ("54M01", False), ("54M02", False)]


@pytest.mark.parametrize("shape", ["arrays", "objects"])
def test_events_nested_up_to_512_levels_are_stored_and_deeper_ones_refused_with_54m02(
    shape: str, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    facet_depth = 3  # the event, "run", "facets": "x" holds the value at level 3
    make = nested if shape == "arrays" else objects
    inner = DEPTH - facet_depth
    status, _, code, message = ingest(service, event_with(make(inner)))
    assert (status, code) == ("stored", None), message
    # A container at level 511 of the stored event: 512 deep.
    assert owner.execute(
        "SELECT count(*) FROM metastore.events WHERE jsonb_path_exists(payload, 'strict $.**{511} ? "
        '(@.type() == "array" || @.type() == "object")\')'
    ).fetchone() == (1,)
    status, _, code, message = ingest(service, event_with(make(inner + 1)))
    assert (status, code) == ("rejected", "54M02")
    assert "512" in message


def test_an_event_nested_10000_deep_is_refused_with_54m02_and_recorded(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """PostgreSQL parses it (its own limit, 54001, is far deeper); Python's json and Jackson do not."""
    body = event_with(nested(10_000))
    assert ingest(service, body)[2] == "54M02"
    assert owner.execute("SELECT sqlstate FROM metastore.rejected_events").fetchall() == [("54M02",)]


def test_small_events_are_never_refused_for_printing_large(service: psycopg.Connection[Any]) -> None:
    """Below 1 MiB of text the ratio does not apply: a few numbers such as Double.MAX_VALUE in a small
    event print 30 times their stored size and are fine."""
    body = event_with(numbers("1.7976931348623157e308", 2000))
    status, _, code, message = ingest(service, body)
    assert (status, code) == ("stored", None), message


def test_strings_never_reach_the_ratio(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    """A control character is one byte stored and six printed (\\u0001): the most any string prints."""
    body = event_with(json.dumps("\u0001" * (2 * MIB)))
    printed, stored = sizes(owner, body)
    assert printed > 5.9 * stored and printed > FLOOR
    status, _, code, message = ingest(service, body)
    assert (status, code) == ("stored", None), message


def test_no_event_prints_to_more_than_16_mib(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    head = len(event_with('""'))
    under = event_with(json.dumps("x" * (CAP - head - 64)))
    over = event_with(json.dumps("x" * (CAP - head + 64)))
    assert sizes(owner, under)[0] <= CAP < sizes(owner, over)[0]
    assert ingest(service, under)[2] is None
    assert ingest(service, over)[2] == "54M01"


def random_event(rng: random.Random) -> bytes:
    """Events near the bounds: a mix of numbers that print long (exponents, zeros with decimals,
    tiny magnitudes), short ones, strings with characters printed as escapes, and filler."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["big", "tiny", "zeros", "short", "escapes", "filler", "scaled"])
        n = rng.choice([10, 1000, 20_000, 60_000])
        if kind == "big":
            parts.append(numbers(f"{rng.choice(['', '-'])}{rng.randint(1, 9)}e{rng.randint(16, 307)}", n))
        elif kind == "tiny":
            parts.append(numbers(f"{rng.randint(1, 9)}e-{rng.randint(16, 323)}", n))
        elif kind == "zeros":
            parts.append(numbers(f"0e-{rng.randint(0, 324)}", n))
        elif kind == "scaled":
            parts.append(numbers("1." + "0" * rng.randint(1, 400), n // 10 + 1))
        elif kind == "short":
            parts.append(numbers(f"{rng.randint(1, 9)}e{rng.randint(-15, 15)}", n))
        elif kind == "escapes":
            parts.append(json.dumps(rng.choice(["\u0001", "\n", '"', "é"]) * n * rng.randint(1, 40)))
        else:
            parts.append(json.dumps("x" * n * rng.randint(1, 100)))
    return event_with("[" + ", ".join(parts) + "]")


def test_verdicts_match_the_rule_printed_out(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    """The rule is exact: refused exactly when the printed text passes min(16 MiB, max(1 MiB, 8 x
    stored)), whichever shortcut the function took to know it."""
    rng = random.Random(26)
    seen = {True: 0, False: 0}
    for _ in range(40):
        body = random_event(rng)
        if len(body) > 12 * MIB:
            continue
        printed, stored = sizes(owner, body)
        expected = refused_by_rule(printed, stored)
        _, _, code, message = ingest(service, body)
        assert (code == "54M01") == expected, (printed, stored, code, message)
        seen[expected] += 1
    assert seen[True] >= 10 and seen[False] >= 10, seen


def test_backfill_rebuilds_from_events_stored_before_the_refusal(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """An event stored before the rule existed (written here as the owner, through the store path)
    is kept and rebuilt by backfill like any other."""
    body = event_with(numbers("1e308", 60_000))
    clean = event_with("1")
    owner.execute(
        "SELECT * FROM metastore.store_events(ARRAY[convert_from(%s, 'UTF8')::jsonb], "
        "ARRAY[metastore.validate_event(convert_from(%s, 'UTF8')::jsonb)])",
        (body, clean),
    )
    assert ingest(service, clean)[0] == "stored"
    owner.execute("CALL metastore.backfill()")
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (2,)
    assert owner.execute("SELECT count(*) FROM metastore.jobs WHERE name = 'j'").fetchone() == (1,)
