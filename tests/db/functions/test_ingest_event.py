"""metastore.ingest_event: storing, de-duplicating, deriving and rejecting events, as the app role."""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, fixture_files, ingest, load_fixture
from tests.lineage_rules import derive
from tests.support.checks import assert_each_refused
from tests.support.derived import event_links

# Integration-test matchers from OpenLineage's repository: not events (see their README).
MATCHERS = {
    "expected_kafka.json": "22007",  # eventTime is a "${json-unit.any-string}" placeholder
    "expected_sql_kafka.json": "22023",  # no eventTime
    "pysparkHiveCompleteEvent.json": "22023",
    "pysparkSymlinksComplete.json": "22023",
}
SINGLE_EVENTS = [p for p in fixture_files() if isinstance(load_fixture(p), dict)]


def derived_in_db(owner: psycopg.Connection[Any], event_id: int) -> tuple[set[Any], set[Any]]:
    links = event_links(owner, event_id)
    symlinks = set(
        owner.execute(
            "SELECT c.namespace, c.name, s.namespace, s.name, y.type FROM metastore.dataset_symlinks y "
            "JOIN metastore.datasets c ON c.id = y.dataset_id JOIN metastore.datasets s ON s.id = y.symlink_id"
        ).fetchall()
    )
    return links, symlinks


@pytest.mark.parametrize("path", SINGLE_EVENTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_is_stored_with_its_datasets_or_rejected_with_a_reason(
    path: Path, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    event = load_fixture(path)
    status, event_id, code, message = ingest(service, event)
    if path.name in MATCHERS:
        assert (status, event_id, code) == ("rejected", None, MATCHERS[path.name])
        assert message
        body = json.dumps(event).encode()  # what ingest() sent
        kept = owner.execute(
            "SELECT body_prefix, body_bytes, body_sha256, sqlstate FROM metastore.rejected_events"
        ).fetchall()
        assert kept == [(body[:4096].decode(), len(body), hashlib.sha256(body).digest(), MATCHERS[path.name])]
        assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (0,)
        return
    assert (status, code) == ("stored", None), message
    payload = owner.execute("SELECT payload FROM metastore.events WHERE id = %s", (event_id,)).fetchone()
    assert payload == (event,)
    expected = derive(event)
    links, symlinks = derived_in_db(owner, event_id)
    assert links == set(expected.links)
    assert symlinks == set(expected.symlinks)
    kinds = dict(
        ((ns, n), k) for ns, n, k in owner.execute("SELECT namespace, name, kind FROM metastore.datasets").fetchall()
    )
    assert kinds == expected.kinds


def test_trino_ctas_reads_the_source_and_writes_the_created_table(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    event = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    _, event_id, _, _ = ingest(service, event)
    rows = owner.execute(
        "SELECT d.namespace, d.scheme, d.authority, d.name, l.direction, e.event_type, e.run_id, e.job_name "
        "FROM metastore.event_datasets l JOIN metastore.datasets d ON d.id = l.dataset_id "
        "JOIN metastore.events e ON e.id = l.event_id AND e.event_time = l.event_time "
        "WHERE e.id = %s ORDER BY l.direction",
        (event_id,),
    ).fetchall()
    run_id, job = event["run"]["runId"], event["job"]["name"]
    assert rows == [
        ("trino://localhost:8080", "trino", "localhost:8080", "tpch.tiny.nation", "input", "COMPLETE", run_id, job),
        (
            "trino://localhost:8080",
            "trino",
            "localhost:8080",
            "memory.default.nation_copy",
            "output",
            "COMPLETE",
            run_id,
            job,
        ),
    ]


def test_spark_symlinks_become_symlink_datasets_linked_to_their_table(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    path = FIXTURES / "openlineage" / "compatibility-tests" / "spark_dataproc_simple_producer_test" / "4.json"
    ingest(service, load_fixture(path))
    datasets = owner.execute("SELECT namespace, name, scheme, kind FROM metastore.datasets ORDER BY 1, 2").fetchall()
    assert datasets == [
        ("hdfs://dataproc-producer-test-m", "/user/hive/warehouse/t1", "hdfs", "dataset"),
        ("hdfs://dataproc-producer-test-m", "/user/hive/warehouse/t2", "hdfs", "dataset"),
        ("hive://dataproc-producer-test-m:9083", "default.t1", "hive", "symlink"),
        ("hive://dataproc-producer-test-m:9083", "default.t2", "hive", "symlink"),
    ]
    symlinks = owner.execute(
        "SELECT c.name, s.name, y.type FROM metastore.dataset_symlinks y "
        "JOIN metastore.datasets c ON c.id = y.dataset_id JOIN metastore.datasets s ON s.id = y.symlink_id ORDER BY 1"
    ).fetchall()
    assert symlinks == [
        ("/user/hive/warehouse/t1", "default.t1", "TABLE"),
        ("/user/hive/warehouse/t2", "default.t2", "TABLE"),
    ]


def test_a_resent_event_is_stored_once_and_both_calls_succeed(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    event = load_fixture(FIXTURES / "trino" / "02-select-complete.json")
    first = ingest(service, event)
    # Equal as JSON: other key order and whitespace.
    reordered = json.dumps(dict(reversed(list(event.items()))), indent=3).encode()
    second = ingest(service, reordered)
    assert first[0] == "stored"
    assert second == ("duplicate", first[1], None, None)
    assert owner.execute("SELECT count(*) FROM metastore.events").fetchone() == (1,)
    assert owner.execute("SELECT count(*) FROM metastore.event_datasets").fetchone() == (1,)


def test_an_event_that_differs_in_any_value_is_a_new_event(service: psycopg.Connection[Any]) -> None:
    event = load_fixture(FIXTURES / "trino" / "02-select-complete.json")
    changed = copy.deepcopy(event)
    changed["eventTime"] = "2025-01-01T00:00:00Z"
    assert ingest(service, event)[0] == "stored"
    assert ingest(service, changed)[0] == "stored"


def minimal_run(**extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventTime": "2024-05-01T12:00:00Z",
        "producer": "https://example.com/producer",
        "run": {"runId": "0190b8e2-0000-7000-8000-000000000001"},
        "job": {"namespace": "tests", "name": "job"},
    }
    event.update(extra)
    return event


BAD_EVENTS: list[tuple[str, bytes, str]] = [
    ("not UTF-8", b'{"eventTime": "\xff\xfe"}', "22021"),
    ("not JSON", b"{not json", "22P02"),
    ("empty body", b"", "22P02"),
    ("NUL escape", json.dumps(minimal_run(producer="a\u0000b")).encode(), "22P05"),
    ("too deep", b"[" * 100_000 + b"]" * 100_000, "54001"),
    ("a JSON array", b"[]", "22023"),
    ("a JSON string", b'"event"', "22023"),
    ("no run, job or dataset", json.dumps({"eventTime": "2024-05-01T12:00:00Z"}).encode(), "22023"),
    ("run without job", json.dumps({"eventTime": "2024-05-01T12:00:00Z", "run": {"runId": "x"}}).encode(), "22023"),
    ("no eventTime", json.dumps({k: v for k, v in minimal_run().items() if k != "eventTime"}).encode(), "22023"),
    ("eventTime a number", json.dumps(minimal_run(eventTime=1714564800)).encode(), "22023"),
    ("eventTime a word", json.dumps(minimal_run(eventTime="now")).encode(), "22007"),
    ("eventTime month 13", json.dumps(minimal_run(eventTime="2024-13-01T00:00:00Z")).encode(), "22007"),
    ("runId missing", json.dumps(minimal_run(run={})).encode(), "22023"),
    ("job name a number", json.dumps(minimal_run(job={"namespace": "n", "name": 7})).encode(), "22023"),
    ("eventType not a string", json.dumps(minimal_run(eventType=["START"])).encode(), "22023"),
    ("inputs an object", json.dumps(minimal_run(inputs={"namespace": "n", "name": "t"})).encode(), "22023"),
    ("input without name", json.dumps(minimal_run(inputs=[{"namespace": "n"}])).encode(), "22023"),
    ("output a string", json.dumps(minimal_run(outputs=["n.t"])).encode(), "22023"),
    # Names have no cap (tests/db/functions/test_long_names.py); a runId has one.
    ("runId too long", json.dumps(minimal_run(run={"runId": "r" * 257})).encode(), "22001"),
    (
        "DatasetEvent without name",
        json.dumps({"eventTime": "2024-05-01T12:00:00Z", "dataset": {"namespace": "n"}}).encode(),
        "22023",
    ),
]


@pytest.mark.parametrize(("case", "body", "sqlstate"), BAD_EVENTS, ids=[c[0] for c in BAD_EVENTS])
def test_bad_input_is_rejected_with_a_sqlstate_and_nothing_is_half_written(
    case: str, body: bytes, sqlstate: str, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    status, event_id, code, message = ingest(service, body)
    assert (status, event_id, code) == ("rejected", None, sqlstate)
    assert message
    counts = owner.execute(
        "SELECT (SELECT count(*) FROM metastore.events), (SELECT count(*) FROM metastore.datasets), "
        "(SELECT count(*) FROM metastore.event_datasets), (SELECT count(*) FROM metastore.rejected_events)"
    ).fetchone()
    # A body PostgreSQL cannot hold as jsonb is refused without a record; the rest is kept.
    kept = sqlstate not in ("22021", "22P02", "22P05", "54001")
    assert counts == (0, 0, 0, 1 if kept else 0)


@pytest.mark.parametrize(
    "event_time",
    [
        "2020-12-28T19:51:01.641499",
        "2020-12-28T20:51:01.641499+01:00",
        "2020-12-28 19:51:01.641499Z",
        "2020-12-28T19:51:01.641499123Z",
    ],
)
def test_event_times_are_read_leniently_and_without_a_zone_as_utc(
    event_time: str, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    _, event_id, _, message = ingest(service, minimal_run(eventTime=event_time))
    assert event_id is not None, message
    row = owner.execute(
        "SELECT to_char(event_time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') FROM metastore.events WHERE id = %s",
        (event_id,),
    ).fetchone()
    assert row is not None
    assert row[0].startswith("2020-12-28 19:51:01.6414")


def test_lenient_where_producers_are(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    event = minimal_run(run={"runId": "not-a-uuid"}, job={"namespace": "n", "name": "j"}, inputs=None, outputs=[])
    del event["producer"]
    _, event_id, _, message = ingest(service, event)
    assert event_id is not None, message
    row = owner.execute(
        "SELECT event_kind, event_type, run_id, producer, schema_url, source_kind, source_principal "
        "FROM metastore.events WHERE id = %s",
        (event_id,),
    ).fetchone()
    assert row == ("run", None, "not-a-uuid", None, None, "unauthenticated", None)


def test_job_and_dataset_events_are_told_apart_by_shape(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    job_event = {
        "eventTime": "2024-05-01T12:00:00Z",
        "job": {"namespace": "n", "name": "j"},
        "inputs": [{"namespace": "pg://h:5432", "name": "db.s.t"}],
    }
    dataset_event = {
        "eventTime": "2024-05-01T12:00:00Z",
        "run": None,
        "dataset": {"namespace": "pg://h:5432", "name": "db.s.u"},
    }
    ingest(service, job_event)
    ingest(service, dataset_event)
    rows = owner.execute(
        "SELECT e.event_kind, d.name, l.direction FROM metastore.events e "
        "JOIN metastore.event_datasets l ON l.event_id = e.id AND l.event_time = e.event_time "
        "JOIN metastore.datasets d ON d.id = l.dataset_id "
        "ORDER BY e.id"
    ).fetchall()
    assert rows == [("job", "db.s.t", "input"), ("dataset", "db.s.u", "none")]


def test_the_app_role_cannot_rewrite_history_or_read_tables(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest(service, minimal_run())
    assert_each_refused(
        service,
        "UPDATE metastore.events SET event_type = 'X'",
        "DELETE FROM metastore.events",
        "TRUNCATE metastore.events",
        "SELECT * FROM metastore.events",
        "INSERT INTO metastore.datasets (namespace, name, kind, first_seen, last_seen) "
        "VALUES ('a', 'b', 'dataset', now(), now())",
        "SELECT * FROM metastore.validate_event('{}'::jsonb)",
        "CALL metastore.backfill()",
    )


def test_events_are_append_only_even_for_the_owner(
    owner: psycopg.Connection[Any], service: psycopg.Connection[Any]
) -> None:
    ingest(service, minimal_run())
    for statement in ("UPDATE metastore.events SET event_type = 'X'", "DELETE FROM metastore.events"):
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            owner.execute(statement)


def ingest_as(
    conn: psycopg.Connection[Any], body: bytes, kind: str | None, principal: str | None
) -> tuple[str, int | None, str | None]:
    row = conn.execute(
        "SELECT status, event_id, error_code FROM metastore.ingest_event(%b, %s::text, %s::text)",
        (body, kind, principal),
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def test_a_null_source_kind_is_unauthenticated_in_events_and_rejected_events(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    assert ingest_as(service, json.dumps(minimal_run()).encode(), None, None)[0] == "stored"
    assert ingest_as(service, json.dumps(minimal_run(run={})).encode(), None, None)[2] == "22023"
    assert owner.execute("SELECT source_kind, source_principal FROM metastore.events").fetchall() == [
        ("unauthenticated", None)
    ]
    assert owner.execute("SELECT source_kind, source_principal FROM metastore.rejected_events").fetchall() == [
        ("unauthenticated", None)
    ]


@pytest.mark.parametrize(
    ("kind", "principal"),
    [("bogus", None), ("", None), ("Authenticated", "x"), ("unauthenticated", "CN=someone"), (None, "CN=someone")],
)
def test_an_undefined_source_is_refused_with_22023_and_nothing_is_recorded(
    kind: str | None, principal: str | None, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for body in (json.dumps(minimal_run()).encode(), json.dumps(minimal_run(run={})).encode()):
        with pytest.raises(psycopg.Error) as caught:
            ingest_as(service, body, kind, principal)
        assert caught.value.sqlstate == "22023"
    assert owner.execute(
        "SELECT (SELECT count(*) FROM metastore.events), (SELECT count(*) FROM metastore.rejected_events)"
    ).fetchone() == (0, 0)


def test_an_authenticated_principal_is_recorded_with_stored_and_refused_events(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    assert ingest_as(service, json.dumps(minimal_run()).encode(), "authenticated", "CN=trino")[0] == "stored"
    assert ingest_as(service, json.dumps(minimal_run(run={})).encode(), "inferred", "10.0.0.7")[0] == "rejected"
    assert owner.execute("SELECT source_kind, source_principal FROM metastore.events").fetchall() == [
        ("authenticated", "CN=trino")
    ]
    assert owner.execute("SELECT source_kind, source_principal FROM metastore.rejected_events").fetchall() == [
        ("inferred", "10.0.0.7")
    ]


def test_rejected_events_keep_a_bounded_prefix_the_size_and_the_hash_of_the_body(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    # 1 MB of an invalid event, with a two-byte character across the 4096-byte cut.
    text = json.dumps(minimal_run(run={}, facets={"x": "@"}))
    body = text.replace("@", "a" * (4095 - text.index("@")) + "é" * 500_000).encode()
    assert body[4095:4097] == "é".encode()
    assert ingest(service, body)[2] == "22023"
    row = owner.execute(
        "SELECT body_prefix, body_bytes, body_sha256, sqlstate, reason FROM metastore.rejected_events"
    ).fetchone()
    assert row is not None
    prefix, size, digest, sqlstate, reason = row
    assert prefix == body[:4095].decode()  # the character cut in two is left out
    assert (size, digest, sqlstate) == (len(body), hashlib.sha256(body).digest(), "22023")
    assert "run.runId" in reason


def test_the_app_role_cannot_read_or_change_settings_or_rejections(service: psycopg.Connection[Any]) -> None:
    assert_each_refused(
        service,
        "SELECT * FROM metastore.settings",
        "UPDATE metastore.settings SET max_batch_events = 100000",
        "SELECT * FROM metastore.rejected_events",
        "DELETE FROM metastore.rejected_events",
        "SELECT metastore.record_rejection('\\x00'::bytea, '22023', 'x', 'unauthenticated', NULL)",
        "SELECT * FROM metastore.read_event('{}'::bytea)",
    )


def random_text(n_bytes: int) -> str:
    """Text that does not compress (a btree entry is limited after compression): hex of random bytes."""
    return os.urandom(n_bytes // 2).hex()


@pytest.mark.parametrize("size", [3_000, 10_000])
def test_names_of_any_length_are_stored_found_and_deduplicated(size: int, service: psycopg.Connection[Any]) -> None:
    namespace, name = f"s3://{random_text(size)}", f"warehouse/{random_text(size)}"
    job = {"namespace": random_text(size), "name": random_text(size)}
    first = minimal_run(job=job, inputs=[{"namespace": namespace, "name": name}])
    status, event_id, code, _ = ingest(service, first)
    assert (status, code) == ("stored", None)
    assert ingest(service, first)[:2] == ("duplicate", event_id)
    # Another event naming the same dataset finds it, however long: one dataset, counted twice.
    second = minimal_run(run={"runId": "another"}, outputs=[{"namespace": namespace, "name": name}])
    status, second_id, _, _ = ingest(service, second)
    assert status == "stored"

    listed = service.execute("SELECT metastore.list_datasets(10, NULL, %s)", (namespace,)).fetchone()
    assert listed is not None
    [dataset] = listed[0]["datasets"]
    assert (dataset["name"], dataset["input_events"], dataset["output_events"]) == (name, 1, 1)
    found = service.execute("SELECT metastore.get_dataset(%s)", (dataset["id"],)).fetchone()
    assert found is not None
    assert {e["event_id"] for e in found[0]["events"]} == {event_id, second_id}
    assert job["name"] in {e["job_name"] for e in found[0]["events"]}
    # The job filter of the event feed, and its dataset filter, find them too.
    by_job = service.execute(
        "SELECT count(*) FROM metastore.read_events(p_job_namespace => %s, p_job_name => %s)",
        (job["namespace"], job["name"]),
    ).fetchone()
    by_dataset = service.execute(
        "SELECT count(*) FROM metastore.read_events(p_dataset_namespace => %s, p_dataset_name => %s)",
        (namespace, name),
    ).fetchone()
    assert by_job == (1,) and by_dataset == (2,)
