"""metastore.list_runs: the runs timeline, newest first, keyset pages, every filter, as the service's role."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import Database, create_database, drop_database, ingest
from tests.support.events import run_event, symlinked
from tests.support.rows import document, value

FILTERS = ("state", "user", "source", "job_namespace", "dataset_id", "from", "to")


def runs_page(conn: psycopg.Connection[Any], limit: int = 50, cursor: str | None = None, **f: Any) -> dict[str, Any]:
    return document(
        conn,
        "SELECT metastore.list_runs(%s::int, %s, %s, %s, %s, %s, %s::bigint, %s, %s)",
        (limit, cursor, *(f.get(name) for name in FILTERS)),
    )


def all_runs(conn: psycopg.Connection[Any], limit: int = 50, **f: Any) -> tuple[list[dict[str, Any]], int]:
    """Every run the filters give, page after page; and how many pages it took."""
    runs: list[dict[str, Any]] = []
    cursor, pages = None, 0
    while True:
        page = runs_page(conn, limit, cursor, **f)
        pages += 1
        assert len(page["runs"]) <= limit
        runs += page["runs"]
        cursor = page["next_cursor"]
        if cursor is None:
            return runs, pages


def query(
    i: int,
    *,
    state: str = "COMPLETE",
    user: str | None = "alice",
    source: str | None = "cli",
    namespace: str = "trino://t:8080",
    inputs: list[Any] | None = None,
    outputs: list[Any] | None = None,
    minute: int | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """A Trino-like query: its own job and run, its user and source in trino_query_context, at minute
    `minute` (default i) from 2026-07-20T00:00Z."""
    context = {k: v for k, v in (("user", user), ("source", source)) if v is not None}
    facets: dict[str, Any] = {"trino_query_context": context}
    if error:
        facets["errorMessage"] = {"message": error, "programmingLanguage": "java"}
    m = i if minute is None else minute
    return run_event(
        f"run-{i}",
        job=f"q{i:05d}",
        namespace=namespace,
        event_type=state,
        event_time=(datetime(2026, 7, 20, tzinfo=UTC) + timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        inputs=inputs if inputs is not None else [f"s.in{i % 3}"],
        outputs=outputs if outputs is not None else [],
        dataset_namespace="trino://t:8080",
        run={"runId": f"run-{i}", "facets": facets},
    )


def ids(runs: list[dict[str, Any]]) -> list[str]:
    return [r["run_id"] for r in runs]


def dataset_id(owner: psycopg.Connection[Any], namespace: str, name: str) -> int:
    return int(value(owner, "SELECT id FROM metastore.datasets WHERE namespace = %s AND name = %s", (namespace, name)))


def test_newest_first_with_job_state_times_and_datasets(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest(service, query(1, state="START", inputs=[], outputs=[]))
    ingest(service, query(1, state="COMPLETE", minute=3, inputs=["s.a", "s.b"], outputs=["s.c"]))
    ingest(service, query(2, state="FAIL", error="Division by zero"))
    ingest(service, query(3, state="START", user=None, source=None, inputs=[]))
    runs = runs_page(service)["runs"]
    assert ids(runs) == ["run-3", "run-2", "run-1"]
    first = runs[2]
    assert (first["state"], first["duration_s"], first["event_count"], first["trino_user"]) == (
        "COMPLETE",
        120.0,
        2,
        "alice",
    )
    assert first["job"]["name"] == "q00001" and first["job"]["id"] > 0
    assert [d["name"] for d in first["inputs"]] == ["s.a", "s.b"] and [d["name"] for d in first["outputs"]] == ["s.c"]
    assert first["inputs"][0]["id"] == dataset_id(owner, "trino://t:8080", "s.a")
    assert runs[1]["error_message"] == "Division by zero" and runs[1]["started_at"] is None
    assert runs[0]["trino_user"] is None and runs[0]["inputs"] == [] and runs[0]["datasets_truncated"] is False


def test_every_filter_against_an_oracle(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    events = []
    for i in range(60):
        events.append(
            query(
                i,
                state=("COMPLETE", "FAIL", "START", "ABORT")[i % 4],
                user=("alice", "bob", None)[i % 3],
                source=("cli", "airflow")[i % 2],
                namespace=("trino://t:8080", "trino://other:8080")[i % 5 == 0],
                inputs=[f"s.in{i % 3}"],
                outputs=[f"s.out{i % 4}"] if i % 2 else [],
            )
        )
    for event in events:
        assert ingest(service, event)[0] == "stored"
    everything, _ = all_runs(service, 7)
    assert ids(everything) == [f"run-{i}" for i in reversed(range(60))]
    by_id = {r["run_id"]: r for r in everything}

    def expect(keep: Any) -> list[str]:
        return [f"run-{i}" for i in reversed(range(60)) if keep(i)]

    in1 = dataset_id(owner, "trino://t:8080", "s.in1")
    out3 = dataset_id(owner, "trino://t:8080", "s.out3")
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"state": "FAIL"}, lambda i: i % 4 == 1),
        ({"state": "fail, abort"}, lambda i: i % 4 in (1, 3)),
        ({"user": "bob"}, lambda i: i % 3 == 1),
        ({"source": "airflow"}, lambda i: i % 2 == 1),
        ({"job_namespace": "trino://other:8080"}, lambda i: i % 5 == 0),
        ({"dataset_id": in1}, lambda i: i % 3 == 1),
        ({"dataset_id": out3}, lambda i: i % 2 == 1 and i % 4 == 3),
        ({"from": "2026-07-20T00:10:00Z", "to": "2026-07-20T00:20:00"}, lambda i: 10 <= i < 20),
        ({"state": "START", "user": "alice", "source": "cli"}, lambda i: i % 4 == 2 and i % 3 == 0 and i % 2 == 0),
        ({"user": "bob", "dataset_id": in1, "from": "2026-07-20T00:30:00Z"}, lambda i: i % 3 == 1 and i >= 30),
        ({"user": "alice", "dataset_id": in1}, lambda i: False),
        ({"state": "COMPLETE", "job_namespace": "trino://t:8080"}, lambda i: i % 4 == 0 and i % 5 != 0),
    ]
    for filters, keep in cases:
        for limit in (1, 4, 100):
            got, _ = all_runs(service, limit, **filters)
            assert ids(got) == expect(keep), (filters, limit)
            assert all(r == by_id[r["run_id"]] for r in got)


def test_a_namespace_of_many_jobs_walks_the_timeline(service: psycopg.Connection[Any]) -> None:
    # Over 500 jobs: the namespace filter walks the timeline instead of reading job by job.
    bodies = [
        json.dumps(query(i, namespace=("trino://big:8080", "trino://t:8080")[i % 10 == 0])).encode() for i in range(560)
    ]
    for start in range(0, len(bodies), 100):
        service.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies[start : start + 100],))
    got, _ = all_runs(service, 100, job_namespace="trino://big:8080")
    assert ids(got) == [f"run-{i}" for i in reversed(range(560)) if i % 10]
    got, _ = all_runs(service, 100, job_namespace="trino://big:8080", state="COMPLETE")
    assert len(got) == 504


def test_a_dataset_filter_crosses_its_symlinks(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    table = symlinked("trino://t:8080", "hive.s.orders", "s3://b", "w/orders")
    ingest(service, query(1, inputs=[table]))
    ingest(service, query(2, inputs=[{"namespace": "s3://b", "name": "w/orders"}]))
    ingest(service, query(3, inputs=["s.unrelated"]))
    for name, namespace in (("hive.s.orders", "trino://t:8080"), ("w/orders", "s3://b")):
        got = runs_page(service, dataset_id=dataset_id(owner, namespace, name))["runs"]
        assert ids(got) == ["run-2", "run-1"]
    # A run's own datasets are the ones it named, not their symlink identifiers.
    assert [d["name"] for d in got[1]["inputs"]] == ["hive.s.orders"]


def test_a_start_after_its_complete_moves_the_run_in_every_order(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest(service, query(1, minute=10, inputs=["s.x"]))
    ingest(service, query(2, minute=5, inputs=["s.x"]))
    x = dataset_id(owner, "trino://t:8080", "s.x")
    assert ids(runs_page(service)["runs"]) == ids(runs_page(service, dataset_id=x)["runs"]) == ["run-1", "run-2"]
    # Run 1's START, earlier than run 2: both orders follow.
    ingest(service, query(1, state="START", minute=1, inputs=[], outputs=[]))
    assert ids(runs_page(service)["runs"]) == ids(runs_page(service, dataset_id=x)["runs"]) == ["run-2", "run-1"]


def test_a_run_lists_100_datasets_of_each_side_and_says_so(service: psycopg.Connection[Any]) -> None:
    ingest(service, query(1, inputs=[f"s.in{i:03d}" for i in range(150)], outputs=["s.o"]))
    (run,) = runs_page(service)["runs"]
    assert len(run["inputs"]) == 100 and run["datasets_truncated"] is True
    assert [d["name"] for d in run["inputs"]] == sorted(d["name"] for d in run["inputs"])


@pytest.mark.parametrize(
    ("args", "sqlstate"),
    [
        ({"limit": 0}, "22023"),
        ({"limit": 1001}, "22023"),
        ({"limit": None}, "22023"),
        ({"state": "DONE"}, "22023"),
        ({"state": ","}, "22023"),
        ({"cursor": "garbage"}, "22023"),
        ({"cursor": "WyJ4IiwgMV0"}, "22023"),  # ["x", 1]: not a time
        ({"cursor": "WyIyMDI0LTAxLTAxIiwgIjEiXQ"}, "22023"),  # ["2024-01-01", "1"]: not a number
        ({"from": "2026-07-21", "to": "2026-07-20"}, "22023"),
        ({"from": "yesterday-ish"}, "22007"),
        ({"to": "2026-13-45"}, "22008"),
        ({"dataset_id": 999999999}, "P0002"),
    ],
)
def test_bad_arguments(service: psycopg.Connection[Any], args: dict[str, Any], sqlstate: str) -> None:
    limit = args.pop("limit", 10)
    cursor = args.pop("cursor", None)
    with pytest.raises(psycopg.Error) as caught:
        runs_page(service, limit, cursor, **args)
    assert caught.value.sqlstate == sqlstate


RARE = (10_499, 10_498, 3, 2)
ABORTED = (5_001, 7, 1)


@pytest.fixture(scope="module")
def many_runs(pg_server: Any) -> Iterator[Database]:
    """11 500 Trino-like queries. The oldest 10 500 are bob's but every 1000th (alice's): more than
    two pages look at (5000 runs each); four of them FAIL (the two newest and two of the oldest) and
    three ABORT. The newest 1000 are carol's and FAIL, so that neither bob nor FAIL is rare."""
    db = create_database(pg_server)
    bodies = []
    for i in range(11_500):
        user = "carol" if i >= 10_500 else "alice" if i % 1000 == 0 else "bob"
        state = "FAIL" if i in RARE or user == "carol" else "ABORT" if i in ABORTED else "COMPLETE"
        event = query(i, state=state, user=user, inputs=[], minute=i)
        bodies.append(json.dumps(event).encode())
    with psycopg.connect(db.service_dsn, autocommit=True) as conn:
        for start in range(0, len(bodies), 500):
            conn.execute("SELECT count(*) FROM metastore.ingest_events(%s::bytea[])", (bodies[start : start + 500],))
    with psycopg.connect(db.owner_dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE metastore.runs")
    yield db
    drop_database(db)


def test_a_rare_combination_gives_short_pages_that_still_find_every_run(many_runs: Database) -> None:
    expected = [f"run-{i}" for i in RARE]
    with psycopg.connect(many_runs.service_dsn, autocommit=True) as conn:
        # bob's runs drive the walk and FAIL is rare among them: the first page finds two, looks at
        # 5000 runs for a third and stops there with what it found and a cursor to go on from; the
        # second looks at the next 5000 and finds none; the third finds the last two, at the end.
        first = runs_page(conn, 3, user="bob", state="FAIL")
        assert ids(first["runs"]) == expected[:2] and first["next_cursor"]
        second = runs_page(conn, 3, first["next_cursor"], user="bob", state="FAIL")
        assert second["runs"] == [] and second["next_cursor"]
        third = runs_page(conn, 3, second["next_cursor"], user="bob", state="FAIL")
        assert ids(third["runs"]) == expected[2:] and third["next_cursor"] is None
        # Three filters, one page per run found plus the one that found none: the same runs.
        got, pages = all_runs(conn, 1, source="cli", state="FAIL", user="bob", **{"from": "2026-07-20T00:00:00Z"})
        assert ids(got) == expected and pages == 5
        # Every run, in pages of 1000: each page full.
        got, pages = all_runs(conn, 1000)
        assert len(got) == 11_500 and pages == 12


def test_a_rare_state_of_a_busy_user_walks_the_state(many_runs: Database) -> None:
    """ABORT has fewer runs than bob: its index is walked, and one page has all bob's aborted runs
    (bob's walk would look at 10 000 runs in two pages first)."""
    with psycopg.connect(many_runs.service_dsn, autocommit=True) as conn:
        page = runs_page(conn, 3, user="bob", state="ABORT")
        assert ids(page["runs"]) == [f"run-{i}" for i in ABORTED] and page["next_cursor"] is None
        # Several states are counted together: ABORT and FAIL (1007 runs) are not rarer than carol's
        # 1000, whose walk finds her newest three on the first page.
        page = runs_page(conn, 3, user="carol", state="ABORT,FAIL")
        assert ids(page["runs"]) == ["run-11499", "run-11498", "run-11497"]


def test_paging_while_runs_are_added_and_completed_never_skips_or_repeats(
    database: Database, service: psycopg.Connection[Any]
) -> None:
    """A reader pages with a small limit while a writer adds new runs and completes existing ones:
    every run that existed when paging began is read exactly once, in order."""
    for i in range(300):
        ingest(service, query(i, state="START", inputs=[], minute=i))
    before = [f"run-{i}" for i in reversed(range(300))]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with psycopg.connect(database.service_dsn, autocommit=True) as conn:
                i = 0
                while not stop.is_set() and i < 300:
                    # The end of an existing run (it does not move), and a new one after all of them.
                    ingest(conn, query(i, state="COMPLETE", minute=i + 1, inputs=["s.a"], outputs=["s.b"]))
                    ingest(conn, query(1000 + i, state="START", minute=600 + i, inputs=[]))
                    i += 1
        except BaseException as exc:  # reported by the reader
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen: list[str] = []
        cursor = None
        while True:
            page = runs_page(service, 7, cursor)
            seen += ids(page["runs"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
    finally:
        stop.set()
        thread.join(60)
    assert not errors
    assert len(seen) == len(set(seen)), "a run was read twice"
    assert [r for r in seen if int(r.split("-")[1]) < 1000] == before
