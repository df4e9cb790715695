"""metastore.json_has_unique_keys, and the ingest functions refusing duplicate keys (22030), as the
app role: jsonb keeps the last of duplicate keys silently, so such an event is not the one sent.
Runs on whichever server the session uses (CI: 15 and 18, two different implementations)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, fixture_files, ingest

UNIQUE = [
    "{}",
    "[]",
    '"{\\"a\\": 1, \\"a\\": 2}"',  # a string, not an object
    '{"a": 1, "b": {"a": 1, "b": 2}}',
    '[{"k": 1}, {"k": 2}]',
    '{"a": "x:y", "a:": {"b": "{"}}',
    '{"A": 1, "a": 2, "\\u00e9": 3, "e\\u0301": 4}',  # distinct keys (no normalisation)
    '{"n": null, "m": null}',
    "[" * 500 + '{"a": 1}' + "]" * 500,
]
DUPLICATED = [
    '{"a": 1, "a": 1}',
    '{"a": 1, "b": 2, "a": 3}',
    '{"x": {"a": [1, {"z": 1, "z": 2}]}}',
    '[{"k": 1}, {"k": 2, "k": 3}]',
    '{"a": 1, "\\u0061": 2}',  # the same key, one spelt with an escape
    '{"a": {"b": 1}, "a": {"b": 1}}',
    '{"a": 1, "a": null}',
    '{"a": "\\u003a", "a": "x", "b": ":"}',  # an escaped colon cannot hide a dropped member
    "[" * 500 + '{"a": 1, "a": 2}' + "]" * 500,
]


@pytest.mark.parametrize("text", UNIQUE)
def test_unique(owner: psycopg.Connection[Any], text: str) -> None:
    assert owner.execute(
        "SELECT metastore.json_has_unique_keys(%(t)s::text, %(t)s::text::jsonb)", {"t": text}
    ).fetchone() == (True,)


@pytest.mark.parametrize("text", DUPLICATED)
def test_duplicated(owner: psycopg.Connection[Any], text: str) -> None:
    assert owner.execute(
        "SELECT metastore.json_has_unique_keys(%(t)s::text, %(t)s::text::jsonb)", {"t": text}
    ).fetchone() == (False,)


def test_a_dropped_null_is_only_seen_from_16(owner: psycopg.Connection[Any]) -> None:
    """The documented gap of the PostgreSQL 15 implementation."""
    version = owner.execute("SELECT current_setting('server_version_num')::int").fetchone()
    assert version is not None
    unique = owner.execute(
        "SELECT metastore.json_has_unique_keys(%(t)s::text, %(t)s::text::jsonb)", {"t": '{"a": null, "a": 1}'}
    ).fetchone()
    assert unique == ((version[0] < 160000),)


def test_every_fixture_has_unique_keys(owner: psycopg.Connection[Any]) -> None:
    for path in fixture_files():
        text = path.read_text("utf-8")
        (unique,) = owner.execute(
            "SELECT metastore.json_has_unique_keys(%(t)s::text, %(t)s::text::jsonb)", {"t": text}
        ).fetchone() or (None,)
        assert unique is True, path.relative_to(FIXTURES)


def test_the_app_role_cannot_call_it_directly(service: psycopg.Connection[Any]) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        service.execute("SELECT metastore.json_has_unique_keys('{}', '{}')")


def test_ingest_refuses_and_stores_nothing(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    body = b'{"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "n", "name": "a", "name": "b"}}'
    status, event_id, code, _ = ingest(service, body)
    assert (status, event_id, code) == ("rejected", None, "22030")
    rows = service.execute(
        "SELECT status, error_code FROM metastore.ingest_events(ARRAY[%b, %b]::bytea[])", (body, b"{}")
    )
    assert [tuple(r) for r in rows.fetchall()] == [("rejected", "22030"), ("rejected", "22023")]
    with pytest.raises(psycopg.errors.DuplicateJsonObjectKeyValue):
        service.execute("SELECT * FROM metastore.ingest_batch(%b)", (b"[" + body + b"]",))
    counts = owner.execute(
        "SELECT (SELECT count(*) FROM metastore.events), (SELECT count(*) FROM metastore.rejected_events)"
    ).fetchone()
    # Nothing stored; the record of each refusal (a prefix, size and hash of the body, and why) is kept:
    # the two single bodies with the duplicate and the {} (a refused batch leaves no record).
    assert counts == (0, 3)


def test_a_valid_event_still_goes_in(service: psycopg.Connection[Any]) -> None:
    event = {"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "n", "name": "a"}}
    assert ingest(service, json.dumps(event).encode())[0] == "stored"
