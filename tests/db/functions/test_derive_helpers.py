"""The helpers of the derivations (metastore.facet_text, mention_key, generation_least and
generation_greatest): what each returns, and that the planner inlines them, in a query of their
own and in the derivations of ingest and backfill, which call them for every event."""

from __future__ import annotations

import json
import time
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, fixture_files, ingest, load_fixture

HELPERS = ("facet_text", "mention_key", "generation_least", "generation_greatest")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ('"x"', "x"),
        ('"\\u00e9 y"', "é y"),
        ('" "', " "),
        ('""', None),
        ("null", None),
        ("1", None),
        ("true", None),
        ("{}", None),
        ('["a"]', None),
        (None, None),
    ],
)
def test_facet_text_reads_non_empty_strings_only(
    owner: psycopg.Connection[Any], value: str | None, text: str | None
) -> None:
    row = owner.execute("SELECT metastore.facet_text(%s::jsonb)", (value,)).fetchone()
    assert row == (text,)


@pytest.mark.parametrize(("namespace", "name"), [("ns", "a.b"), (None, "x"), ('q"uote', "back\\slash"), ("", "")])
def test_mention_key_is_the_json_text_of_the_pair(
    owner: psycopg.Connection[Any], namespace: str | None, name: str
) -> None:
    row = owner.execute("SELECT metastore.mention_key(%s, %s)", (namespace, name)).fetchone()
    assert row is not None
    assert json.loads(row[0]) == [namespace, name]


def test_generation_merges_within_a_generation_and_replaces_across(owner: psycopg.Connection[Any]) -> None:
    rows = owner.execute(
        """SELECT metastore.generation_least(1, 1, '2026-01-02', '2026-01-01'),
                  metastore.generation_least(1, 1, '2026-01-01', '2026-01-02'),
                  metastore.generation_least(1, 1, NULL, '2026-01-02'),
                  metastore.generation_least(1, 2, '2026-01-01', '2026-01-02'),
                  metastore.generation_least(1, 2, '2026-01-01', NULL) IS NULL,
                  metastore.generation_greatest(1, 1, '2026-01-02', '2026-01-01'),
                  metastore.generation_greatest(1, 1, '2026-01-01', NULL),
                  metastore.generation_greatest(1, 2, '2026-01-03', '2026-01-02')"""
    ).fetchone()
    assert rows is not None
    day = [r.day if not isinstance(r, bool) else r for r in rows]
    assert day == [1, 1, 2, 2, True, 2, 1, 2]


@pytest.mark.parametrize(
    "expression",
    [
        "metastore.facet_text(pg_catalog.to_jsonb(g::text))",
        "metastore.mention_key(g::text, g::text)",
        "metastore.generation_least(g, 1, pg_catalog.to_timestamp(g), pg_catalog.to_timestamp(g + 1))",
        "metastore.generation_greatest(g, 1, pg_catalog.to_timestamp(g), pg_catalog.to_timestamp(g + 1))",
    ],
)
def test_a_helper_is_inlined_into_the_query(owner: psycopg.Connection[Any], expression: str) -> None:
    plan = owner.execute(
        f"EXPLAIN (VERBOSE, COSTS OFF) SELECT {expression} FROM pg_catalog.generate_series(1, 3) AS g"  # type: ignore[arg-type]
    ).fetchall()
    text = "\n".join(line for (line,) in plan)
    assert "Output:" in text
    assert not any(name in text for name in HELPERS), text


def test_ingest_and_backfill_call_no_helper(database: Database, service: psycopg.Connection[Any]) -> None:
    # track_functions counts every call of a function that runs as a function: an inlined one
    # runs as its expression and is never counted. Set by the DBA (a superuser's setting).
    with psycopg.connect(database.server.dsn, autocommit=True) as dba:
        dba.execute(f"ALTER DATABASE {database.name} SET track_functions = 'all'")  # type: ignore[arg-type]
    with psycopg.connect(database.service_dsn, autocommit=True) as conn:
        stored = sum(ingest(conn, load_fixture(path))[0] == "stored" for path in fixture_files())
    assert stored > 0
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute("CALL metastore.backfill()")
    # Counts reach the view when each session flushes them, when it ends at the latest.
    calls: dict[str, int] = {}
    deadline = time.monotonic() + 30
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        while time.monotonic() < deadline:
            owner.execute("SELECT pg_catalog.pg_stat_clear_snapshot()")
            calls = dict(
                owner.execute(
                    "SELECT funcname, calls FROM pg_catalog.pg_stat_user_functions WHERE schemaname = 'metastore'"
                ).fetchall()
            )
            if calls.get("backfill", 0) >= 1 and calls.get("derive_job_run", 0) >= stored:
                break
            time.sleep(0.2)
    assert calls.get("backfill", 0) >= 1 and calls.get("derive_job_run", 0) >= stored, calls
    assert {name: calls[name] for name in HELPERS if name in calls} == {}
