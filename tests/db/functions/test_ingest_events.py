"""metastore.ingest_events: separately received bodies in one call, one result per body, in order."""

from __future__ import annotations

import json
from typing import Any

import psycopg


def test_one_result_per_body_in_order(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    good = {
        "eventTime": "2024-01-01T00:00:00Z",
        "eventType": "START",
        "run": {"runId": "r"},
        "job": {"namespace": "j", "name": "n"},
    }
    bodies = [
        json.dumps(good).encode(),
        b"{broken",
        json.dumps({"eventTime": "x", "eventType": "FAIL"}).encode(),
        json.dumps(good).encode(),
    ]
    rows = service.execute(
        "SELECT status, error_code, event_type FROM metastore.ingest_events(%s::bytea[])", (bodies,)
    ).fetchall()
    assert rows == [
        ("stored", None, "START"),
        ("rejected", "22P02", None),
        ("rejected", "22023", "FAIL"),
        ("duplicate", None, "START"),
    ]
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (1,)
    assert owner.execute("SELECT count(*) FROM metastore.rejected_events").fetchone() == (1,)


def test_an_empty_array_gives_no_rows(service: psycopg.Connection[Any]) -> None:
    assert service.execute("SELECT * FROM metastore.ingest_events(%s::bytea[])", ([],)).fetchall() == []
