"""metastore.derive_job_run: jobs and runs from the events, whatever order they arrive in."""

from __future__ import annotations

import copy
import itertools
import random
import secrets
from typing import Any

import psycopg
import pytest

from tests.conftest import FIXTURES, ingest, load_fixture

RUN_COLUMNS = (
    "state, state_time, started_at, ended_at, duration, error_message, trino_user, trino_source, "
    "trino_catalog, trino_schema, first_event_time, last_event_time, event_count"
)


def event(job: str, event_type: str | None, when: str, run_id: str = "r1", **run_facets: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "eventTime": when,
        "run": {"runId": run_id, "facets": run_facets},
        "job": {"namespace": "ns", "name": job},
    }
    if event_type is not None:
        body["eventType"] = event_type
    return body


def run_row(owner: psycopg.Connection[Any], job: str, run_id: str = "r1") -> tuple[Any, ...]:
    row = owner.execute(
        f"SELECT {RUN_COLUMNS} FROM metastore.runs r JOIN metastore.jobs j ON j.id = r.job_id "
        "WHERE j.name = %s AND r.run_id = %s",
        (job, run_id),
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_state_is_the_same_in_every_arrival_order(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    def events(job: str) -> list[dict[str, Any]]:
        return [
            event(job, "START", "2026-07-20T10:00:00Z"),
            event(job, "RUNNING", "2026-07-20T10:00:05Z"),
            event(job, "OTHER", "2026-07-20T10:00:30Z"),
            event(job, "COMPLETE", "2026-07-20T10:00:10Z"),
        ]

    rows = set()
    for k, order in enumerate(itertools.permutations(range(4))):
        job = f"perm{k}"
        for i in order:
            assert ingest(service, events(job)[i])[0] == "stored"
        rows.add(run_row(owner, job))
    assert len(rows) == 1
    (state, state_time, started, ended, duration, *_rest, events_count) = rows.pop()
    # A terminal event wins over START/RUNNING, and OTHER (later) does not undo it.
    assert state == "COMPLETE" and events_count == 4
    assert (ended - started).total_seconds() == 10 == duration.total_seconds()
    assert ended == state_time


def test_complete_before_start_and_duplicates(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    complete = event("j", "COMPLETE", "2026-07-20T10:00:07Z")
    start = event("j", "START", "2026-07-20T10:00:00Z")
    assert ingest(service, complete)[0] == "stored"
    assert run_row(owner, "j")[:4][0] == "COMPLETE"
    assert run_row(owner, "j")[2] is None  # no START yet: no start time
    assert ingest(service, start)[0] == "stored"
    assert ingest(service, complete)[0] == "duplicate"
    assert ingest(service, start)[0] == "duplicate"
    row = run_row(owner, "j")
    assert row[0] == "COMPLETE" and row[4].total_seconds() == 7
    assert row[-1] == 2  # duplicates are not counted: they are not stored again


def test_retry_after_fail_the_latest_terminal_event_wins(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    failed = event("j", "FAIL", "2026-07-20T10:00:03Z", errorMessage={"message": "Division by zero"})
    done = event("j", "COMPLETE", "2026-07-20T10:00:09Z")
    ingest(service, done)
    ingest(service, failed)
    row = run_row(owner, "j")
    assert (row[0], row[5]) == ("COMPLETE", None)
    # The other way round: the FAIL is the latest, its error message comes with it.
    ingest(service, event("k", "COMPLETE", "2026-07-20T10:00:03Z"))
    ingest(service, event("k", "FAIL", "2026-07-20T10:00:09Z", errorMessage={"message": "boom"}))
    row = run_row(owner, "k")
    assert (row[0], row[5]) == ("FAIL", "boom")


def test_at_the_same_time_fail_wins_over_complete(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for job, order in (("a", ("FAIL", "COMPLETE")), ("b", ("COMPLETE", "FAIL"))):
        for kind in order:
            ingest(service, event(job, kind, "2026-07-20T10:00:00Z"))
        assert run_row(owner, job)[0] == "FAIL"


def test_other_and_typeless_events_leave_state_other_until_a_real_one(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    ingest(service, event("j", None, "2026-07-20T10:00:05Z"))
    assert run_row(owner, "j")[0] == "OTHER"
    ingest(service, event("j", "START", "2026-07-20T10:00:00Z"))
    assert run_row(owner, "j")[0] == "START"


def test_trino_fixtures_fail_with_error_message_user_and_source(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    for name in ("03-ctas-start.json", "04-ctas-complete.json", "06-ctas-analysis-fail.json"):
        assert ingest(service, load_fixture(FIXTURES / "trino" / name))[0] == "stored"
    complete = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    fail = load_fixture(FIXTURES / "trino" / "06-ctas-analysis-fail.json")
    ctas = run_row(owner, complete["job"]["name"], complete["run"]["runId"])
    assert ctas[0] == "COMPLETE"
    assert (ctas[6], ctas[7], ctas[8], ctas[9]) == ("alice", "trino-python-client", None, None)
    assert ctas[4].total_seconds() > 0
    failed = run_row(owner, fail["job"]["name"], fail["run"]["runId"])
    assert failed[0] == "FAIL"
    assert failed[5] == fail["run"]["facets"]["errorMessage"]["message"]
    job = owner.execute(
        "SELECT latest_sql, sql_dialect, processing_type, integration, job_type FROM metastore.jobs WHERE name = %s",
        (complete["job"]["name"],),
    ).fetchone()
    assert job == (
        complete["job"]["facets"]["sql"]["query"],
        "trino",
        "BATCH",
        "TRINO",
        "QUERY",
    )


def test_job_events_update_the_job_only(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    job_event = {
        "eventTime": "2026-07-20T10:00:00Z",
        "job": {"namespace": "ns", "name": "only", "facets": {"sql": {"query": "SELECT 1"}}},
    }
    assert ingest(service, job_event)[0] == "stored"
    assert owner.execute("SELECT latest_sql FROM metastore.jobs WHERE name = 'only'").fetchone() == ("SELECT 1",)
    assert owner.execute("SELECT count(*) FROM metastore.runs").fetchone() == (0,)
    # The latest SQL is the one of the latest eventTime, whatever came last.
    older = dict(job_event, eventTime="2026-07-19T10:00:00Z")
    older["job"] = {"namespace": "ns", "name": "only", "facets": {"sql": {"query": "SELECT 0"}}}
    ingest(service, older)
    assert owner.execute(
        "SELECT latest_sql, first_seen < last_seen FROM metastore.jobs WHERE name = 'only'"
    ).fetchone() == (
        "SELECT 1",
        True,
    )


def test_rows_grow_with_runs_not_with_events(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> None:
    for i in range(30):
        ingest(service, event("j", "RUNNING", f"2026-07-20T10:00:{i:02d}Z", run_id=f"r{i % 3}"))
    assert owner.execute("SELECT count(*) FROM metastore.jobs").fetchone() == (1,)
    assert owner.execute("SELECT count(*), sum(event_count) FROM metastore.runs").fetchone() == (3, 30)


def test_backfill_rebuilds_the_same_jobs_and_runs(database: Any, service: psycopg.Connection[Any]) -> None:
    for name in sorted(p.name for p in (FIXTURES / "trino").glob("*.json")):
        ingest(service, load_fixture(FIXTURES / "trino" / name))
    for i, kind in enumerate(("COMPLETE", "START", "FAIL", "OTHER")):
        ingest(service, event("j", kind, f"2026-07-20T10:00:0{i}Z", errorMessage={"message": f"m{i}"}))
    snapshot = (
        "SELECT j.id, j.namespace, j.name, j.first_seen, j.last_seen, j.latest_sql, j.job_type, r.id, "
        f"{RUN_COLUMNS} FROM metastore.jobs j LEFT JOIN metastore.runs r ON r.job_id = j.id ORDER BY j.id, r.id"
    )
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        before = owner.execute(snapshot).fetchall()
        owner.execute("UPDATE metastore.runs SET state = 'ABORT', event_count = 99")
        owner.execute(
            "INSERT INTO metastore.jobs (namespace, name, first_seen, last_seen) VALUES ('x', 'y', now(), now())"
        )
        owner.execute("CALL metastore.backfill(3)")
        assert owner.execute(snapshot).fetchall() == before
    assert len(before) == 6  # five Trino queries and j


def test_ties_and_empty_values_are_decided_the_same_in_any_order(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    def events(job: str) -> list[dict[str, Any]]:
        same = "2026-07-20T10:00:09Z"
        return [
            event(job, "FAIL", same, errorMessage={"message": "b"}, trino_query_context={"user": "u1"}),
            event(job, "FAIL", same, errorMessage={"message": "a"}, trino_query_context={"user": "u2"}),
            event(job, "FAIL", same, errorMessage={"message": ""}),
            event(job, "COMPLETE", same, trino_query_context={"user": ""}),
            event(job, "START", "2026-07-20T10:00:00Z", trino_query_context={"user": "u0", "source": "s"}),
            event(job, "RUNNING", "2026-07-20T10:00:10Z"),
        ]

    rng = random.Random(15)
    orders = [list(p) for p in itertools.permutations(range(6))]
    rows = set()
    for k, order in enumerate(rng.sample(orders, 40)):
        job = f"tie{k}"
        for i in order:
            assert ingest(service, events(job)[i])[0] == "stored"
        rows.add(run_row(owner, job))
    assert len(rows) == 1
    row = rows.pop()
    assert (row[0], row[5], row[6], row[7]) == ("FAIL", "b", "u2", None)


def test_ingest_goes_on_after_reverting_v0007(empty_db: Any) -> None:
    from metastore import ledger, migrations

    dsn = empty_db.owner_dsn
    migrations.deploy(dsn)
    # With every newer change, newest first.
    assert migrations.revert(dsn, 6) == sorted((c.version for c in ledger.changes() if c.version > 6), reverse=True)
    with psycopg.connect(dsn, autocommit=True) as owner:
        assert ingest(owner, event("j", "COMPLETE", "2026-07-20T10:00:00Z"))[0] == "stored"
        assert owner.execute("SELECT to_regclass('metastore.runs')").fetchone() == (None,)
        # Gone with its change, so that the older release's verify finds exactly its own functions.
        assert owner.execute(
            "SELECT to_regprocedure('metastore.derive_job_run(jsonb[], metastore.valid_event[])')"
        ).fetchone() == (None,)
    migrations.deploy(dsn)
    with psycopg.connect(dsn, autocommit=True) as owner:
        owner.execute("CALL metastore.backfill()")
        assert owner.execute("SELECT state FROM metastore.runs").fetchall() == [("COMPLETE",)]


def test_names_of_any_length_reach_jobs_runs_and_the_dataset_layer(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A 10 KB job name, field names and transformations (random: they do not compress under the
    btree's ~2700-byte entry limit), and the longest run id validate_event takes (256 bytes, so
    runs keep their (job_id, run_id) btree key), are stored and read back whole."""
    job = secrets.token_hex(5000)
    run_id = secrets.token_hex(128)
    field, input_field, subtype = (secrets.token_hex(5000) for _ in range(3))
    event = copy.deepcopy(load_fixture(FIXTURES / "trino" / "04-ctas-complete.json"))
    event["job"]["name"] = job
    event["run"]["runId"] = run_id
    output = event["outputs"][0]
    source = event["inputs"][0]
    output["facets"]["schema"]["fields"] = [{"name": field, "type": "varchar"}]
    source.setdefault("facets", {})["schema"] = {"fields": [{"name": input_field, "type": "varchar"}]}
    output["facets"]["columnLineage"] = {
        "fields": {
            field: {
                "inputFields": [
                    {
                        "namespace": source["namespace"],
                        "name": source["name"],
                        "field": input_field,
                        "transformations": [{"type": "DIRECT", "subtype": subtype}],
                    }
                ]
            }
        }
    }
    assert ingest(service, event)[:3] == ("stored", 1, None)

    row = service.execute("SELECT id FROM metastore.jobs_view WHERE name = %s", (job,)).fetchone()
    assert row is not None
    got_job = service.execute("SELECT metastore.get_job(%s)", (row[0],)).fetchone()
    assert got_job is not None and got_job[0]["name"] == job
    assert [r["run_id"] for r in got_job[0]["runs"]] == [run_id]
    run = service.execute("SELECT metastore.get_run(%s)", (got_job[0]["runs"][0]["id"],)).fetchone()
    assert run is not None and run[0]["run_id"] == run_id and run[0]["job"]["name"] == job
    assert [d["name"] for d in run[0]["outputs"]] == [output["name"]]

    out = owner.execute("SELECT id FROM metastore.datasets WHERE name = %s", (output["name"],)).fetchone()
    assert out is not None
    dataset = service.execute("SELECT metastore.get_dataset(%s)", (out[0],)).fetchone()
    assert dataset is not None
    assert [f["name"] for f in dataset[0]["fields"]] == [field]
    assert [(c["field"], c["input_field"], c["transformation_subtype"]) for c in dataset[0]["column_lineage"]] == [
        (field, input_field, subtype)
    ]
    # The same event again under another run: one job, one column-lineage row, as keyed.
    event["run"]["runId"] = secrets.token_hex(128)
    assert ingest(service, event)[0] == "stored"
    assert owner.execute("SELECT count(*) FROM metastore.jobs").fetchone() == (1,)
    assert owner.execute("SELECT count(*), count(DISTINCT run_id) FROM metastore.runs").fetchone() == (2, 2)
    assert owner.execute("SELECT count(*) FROM metastore.column_lineage").fetchone() == (1,)


def random_events(rng: random.Random, count: int) -> list[tuple[dict[str, Any], tuple[Any, ...]]]:
    """(payload, header) pairs: a few jobs with a few runs each, every event type and none, few
    distinct eventTimes (ties), the facets derive_job_run reads with empty, missing and odd values,
    JobEvents (no run) and DatasetEvents (no job)."""
    times = [f"2026-07-20T10:00:0{i}Z" for i in range(3)]
    types = ["START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER", None]

    def some(*values: Any) -> Any:
        return rng.choice(values)

    out = []
    for _ in range(count):
        kind = some("run", "run", "run", "run", "job", "dataset")
        when = rng.choice(times)
        job = {"namespace": "ns", "name": f"job{rng.randrange(4)}"}
        job_facets: dict[str, Any] = {}
        if rng.random() < 0.5:
            job_facets["sql"] = {"query": some("SELECT 1", "SELECT 2", "", 7)}
            if rng.random() < 0.7:
                job_facets["sql"]["dialect"] = some("trino", "ansi", "", None)
        if rng.random() < 0.4:
            job_facets["jobType"] = some(
                {"processingType": some("BATCH", "STREAMING", ""), "integration": "TRINO", "jobType": "QUERY"},
                {"processingType": "BATCH"},
                {"jobType": some("QUERY", "")},
                "not an object",
            )
        job["facets"] = job_facets
        payload: dict[str, Any] = {"eventTime": when, "job": job}
        event_type = None
        run_id = None
        if kind == "run":
            event_type = rng.choice(types)
            run_id = rng.choice(["r0", "r1", "r2"] * 8 + ["s0", "s1", "s2", "s3"])  # runs of many events and of few
            run_facets: dict[str, Any] = {}
            if rng.random() < 0.5:
                run_facets["errorMessage"] = {"message": some("boom", "bang", "", None)}
            if rng.random() < 0.5:
                context = {"user": some("alice", ""), "source": some("cli", "web", ""), "catalog": "memory"}
                run_facets["trino_query_context"] = {k: v for k, v in context.items() if rng.random() < 0.8}
            payload["run"] = {"runId": run_id, "facets": run_facets}
            if event_type is not None:
                payload["eventType"] = event_type
        elif kind == "dataset":
            payload = {"eventTime": when, "dataset": {"namespace": "ns", "name": "d"}}
            job = {"namespace": None, "name": None}
        header = (kind, event_type, when, run_id, job["namespace"], job["name"])
        out.append((payload, header))
    return out


DERIVE = """SELECT metastore.derive_job_run(%s::jsonb[], ARRAY(
    SELECT ROW(x.k, x.ty, x.t, x.r, x.ns, x.n, NULL, NULL, NULL)::metastore.valid_event
      FROM unnest(%s::text[], %s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::text[])
           WITH ORDINALITY AS x (k, ty, t, r, ns, n, i)
     ORDER BY x.i))"""


def derive(owner: psycopg.Connection[Any], events: list[tuple[dict[str, Any], tuple[Any, ...]]]) -> None:
    from psycopg.types.json import Jsonb

    columns = [list(c) for c in zip(*(header for _, header in events), strict=True)] if events else [[]] * 6
    owner.execute(DERIVE, ([Jsonb(p) for p, _ in events], *columns))


def jobs_and_runs(owner: psycopg.Connection[Any]) -> tuple[list[Any], list[Any]]:
    """Every column but the ids (runs name their job by namespace and name)."""
    jobs = owner.execute("SELECT to_jsonb(j) - 'id' FROM metastore.jobs AS j ORDER BY j.namespace, j.name").fetchall()
    runs = owner.execute(
        "SELECT j.namespace, j.name, to_jsonb(r) - 'id' - 'job_id' FROM metastore.runs AS r "
        "JOIN metastore.jobs AS j ON j.id = r.job_id ORDER BY j.namespace, j.name, r.run_id"
    ).fetchall()
    return jobs, runs


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_a_set_of_events_derives_what_the_events_one_by_one_derive(owner: psycopg.Connection[Any], seed: int) -> None:
    """The rule applied to a set in one call (reduced per job and run first) gives the rows that
    one call per event gives, however the events are split into sets: sets of random sizes,
    with several events of one run, the same event twice, and all events in one set."""
    rng = random.Random(seed)
    events = random_events(rng, 250)
    events += rng.sample(events, 10)  # the same events again: counted again, changing nothing else
    for kind, when in (("OTHER", "2026-07-20T10:00:01Z"), (None, "2026-07-20T10:00:01Z")):  # a run of no state
        events.append((event("job0", kind, when, "lone"), ("run", kind, when, "lone", "ns", "job0")))
    for one in events:
        derive(owner, [one])
    expected = jobs_and_runs(owner)
    jobs, runs = expected
    # The draw reaches every part of the rule.
    states = {r[2]["state"] for r in runs}
    assert {"COMPLETE", "FAIL", "ABORT"} & states and {"START", "RUNNING"} & states and "OTHER" in states
    assert len(jobs) == 4 and len(runs) > 20
    assert any(r[2]["error_message"] for r in runs) and any(r[2]["trino_user"] for r in runs)
    assert any(j[0]["latest_sql"] for j in jobs) and any(j[0]["job_type"] for j in jobs)
    assert sum(r[2]["event_count"] for r in runs) == sum(1 for _, h in events if h[3] is not None)

    splits: list[list[int]] = [[len(events)]]
    for _ in range(4):
        sizes = []
        left = len(events)
        while left:
            sizes.append(min(left, rng.choice((1, 2, 3, 7, 20, 60))))
            left -= sizes[-1]
        splits.append(sizes)
    for sizes in splits:
        owner.execute("TRUNCATE metastore.runs, metastore.jobs")
        shuffled = events[:]
        rng.shuffle(shuffled)
        start = 0
        for size in sizes:
            derive(owner, shuffled[start : start + size])
            start += size
        assert jobs_and_runs(owner) == expected, sizes


def test_an_empty_set_changes_nothing_and_misaligned_arrays_are_refused(owner: psycopg.Connection[Any]) -> None:
    derive(
        owner,
        [(event("j", "START", "2026-07-20T10:00:00Z"), ("run", "START", "2026-07-20T10:00:00Z", "r1", "ns", "j"))],
    )
    before = jobs_and_runs(owner)
    derive(owner, [])
    owner.execute("SELECT metastore.derive_job_run(NULL, NULL)")
    owner.execute("SELECT metastore.derive_job_run('{}', NULL)")
    assert jobs_and_runs(owner) == before
    with pytest.raises(psycopg.Error) as refused:
        owner.execute(
            "SELECT metastore.derive_job_run(ARRAY['{}'::jsonb, '{}'::jsonb],"
            " ARRAY[ROW('run', 'START', now(), 'r1', 'ns', 'j', NULL, NULL, NULL)::metastore.valid_event])"
        )
    assert refused.value.sqlstate == "22023"
    assert jobs_and_runs(owner) == before
