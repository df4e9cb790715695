"""The SQL files the service and the migrations read are well-formed."""

from __future__ import annotations

import re

import pytest

from metastore import migrations, sql


def test_every_named_query_parses_and_is_used() -> None:
    queries = sql._queries("queries")
    assert set(queries) == {
        "ingest_event",
        "ingest_events",
        "ingest_batch",
        "list_datasets",
        "get_dataset",
        "dataset_summary",
        "ensure_partitions",
        "schema_version",
    }
    assert all(q.lstrip().upper().startswith(("SELECT", "--")) for q in queries.values())


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        sql.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_every_change_has_deploy_revert_and_verify() -> None:
    for change in migrations.changes():
        for kind in ("deploy", "revert", "verify"):
            assert change.file(kind).is_file(), f"{change.name} has no db/{kind} file"


def test_function_files_follow_the_house_rules() -> None:
    for path in sorted((migrations.db_dir() / "functions").glob("*.sql")):
        text = path.read_text()
        assert text.isascii(), f"{path.name}: pgmigrate refuses non-ASCII files"
        assert re.search(r"CREATE OR REPLACE (FUNCTION|PROCEDURE)", text), path.name
        assert "COMMENT ON" in text and "REVOKE ALL ON" in text, path.name
        for raise_stmt in re.findall(r"RAISE EXCEPTION[^;]*;", text, re.DOTALL):
            assert "ERRCODE" in raise_stmt, f"{path.name}: a RAISE without a SQLSTATE"
