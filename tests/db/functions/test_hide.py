"""metastore.hide and metastore.unhide (the owner's): what is hidden disappears from every read
function, stays hidden across a rebuild and when seen again, and its events stay in the feed."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.conftest import ingest
from tests.support.checks import assert_each_refused
from tests.support.lineage_graphs import derive, ds

NS = "trino://h:8080"


def call(conn: psycopg.Connection[Any], sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def hide(owner: psycopg.Connection[Any], kind: str, namespace: str, name: str | None = None) -> Any:
    return call(owner, "SELECT metastore.hide(%s, %s, %s, 'test data')", kind, namespace, name)


def dataset_id(owner: psycopg.Connection[Any], name: str, namespace: str = NS) -> int:
    return int(call(owner, "SELECT id FROM metastore.datasets WHERE namespace = %s AND name = %s", namespace, name))


def job_id(owner: psycopg.Connection[Any], name: str) -> int:
    return int(call(owner, "SELECT id FROM metastore.jobs WHERE name = %s", name))


def everything_visible(service: psycopg.Connection[Any], owner: psycopg.Connection[Any]) -> dict[str, Any]:
    """What every read function shows of the store, by name: the datasets and jobs it lists or
    reaches, and the errors it answers for ids."""
    a, b = dataset_id(owner, "a"), dataset_id(owner, "b")
    seen: dict[str, Any] = {}
    seen["list_datasets"] = {d["name"] for d in call(service, "SELECT metastore.list_datasets(1000)")["datasets"]}
    seen["list_datasets q"] = {
        d["name"]
        for d in call(service, "SELECT metastore.list_datasets(1000, NULL, NULL, NULL, NULL, 'e')")["datasets"]
    }
    seen["summary"] = call(service, "SELECT metastore.dataset_summary()")["datasets"]
    page_a = call(service, "SELECT metastore.get_dataset(%s)", a)
    seen["a downstream"] = {d["name"] for d in page_a["downstream"]}
    seen["a events' jobs"] = {e["job_name"] for e in page_a["events"]}
    page_b = call(service, "SELECT metastore.get_dataset(%s)", b)
    seen["b upstream, column lineage"] = (
        {d["name"] for d in page_b["upstream"]},
        {c["input"]["name"] for c in page_b["column_lineage"]},
    )
    graph = call(service, "SELECT metastore.dataset_lineage(%s, 'downstream', 5, 200)", a)
    seen["lineage"] = {n["name"] for n in graph["nodes"]}
    graph = call(service, "SELECT metastore.lineage_graph(%s, 'downstream', 5, 200, 'jobs')", a)
    seen["lineage with jobs"] = {n["name"] for n in graph["nodes"]}
    fields = call(service, "SELECT metastore.field_lineage(%s, 'x', 'downstream', 5, 200)", a)
    seen["field lineage"] = {n["name"] for n in fields["nodes"]}
    seen["by field"] = {d["name"] for d in call(service, "SELECT metastore.datasets_with_field('x', 100)")["datasets"]}
    seen["runs"] = {
        (r["job"]["name"], tuple(d["name"] for d in r["inputs"] + r["outputs"]))
        for r in call(service, "SELECT metastore.list_runs(1000)")["runs"]
    }
    seen["jobs"] = {j["name"] for j in call(service, "SELECT metastore.list_jobs(1000)")["jobs"]}
    seen["jobs by latest run"] = {
        j["name"]
        for j in call(service, "SELECT metastore.list_jobs(1000, NULL, NULL, NULL, 'latest_run', NULL, NULL)")["jobs"]
    }
    j1 = call(service, "SELECT metastore.get_job(%s)", job_id(owner, "j1"))
    seen["j1 outputs"] = {d["name"] for d in j1["outputs"]}
    run1 = call(service, "SELECT metastore.get_run(%s)", j1["runs"][0]["id"])
    seen["run of j1 outputs"] = {d["name"] for d in run1["outputs"]}
    seen["a runs"] = {r["job"]["name"] for r in call(service, "SELECT metastore.dataset_runs(%s, 100)", a)["runs"]}
    seen["search"] = {
        r.get("name") or r["field"] for r in call(service, "SELECT metastore.search('e', 100)")["results"]
    }
    seen["namespaces"] = {
        (n["namespace"], n["datasets"], n["jobs"])
        for n in call(service, "SELECT metastore.list_namespaces()")["namespaces"]
    }
    return seen


def names_in(value: Any) -> set[str]:
    """Every string in a value made of sets, tuples and strings."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, set | tuple | list):
        return set().union(*(names_in(v) for v in value)) if value else set()
    return set()


def found(service: psycopg.Connection[Any], sql: str, *args: Any) -> bool:
    try:
        call(service, sql, *args)
    except psycopg.errors.NoDataFound:
        return False
    return True


@pytest.fixture
def store(service: psycopg.Connection[Any]) -> None:
    """a -> (j1) -> secret -> (j2) -> b, field x all along; secret carries an S3 identifier; a demo
    namespace with a dataset and a job of its own; a query (j3) reading a and b."""
    a, b = ds("a"), ds("b")
    secret = ds("secret", symlinks={"identifiers": [{"namespace": "s3://x", "name": "secret-path", "type": "TABLE"}]})
    for event in (
        derive(
            1,
            "j1",
            [a],
            dict(secret, facets={**secret["facets"], "schema": {"fields": [{"name": "x"}]}}),
            {"x": [(a, "x", "DIRECT", "IDENTITY")]},
        ),
        derive(
            2,
            "j2",
            [secret],
            dict(b, facets={"schema": {"fields": [{"name": "x"}]}}),
            {"x": [(secret, "x", "DIRECT", "IDENTITY")]},
        ),
        derive(3, "j3", [a, b], ds("report"), {}),
        {
            **derive(4, "demo_job", [ds("demo|seed")], ds("demo|sample"), {}),
            "job": {"namespace": "demo", "name": "demo_job"},
        },
    ):
        assert ingest(service, event)[0] == "stored"


def test_a_hidden_dataset_is_gone_from_every_read_function(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], store: None
) -> None:
    before = everything_visible(service, owner)
    secret = dataset_id(owner, "secret")
    assert "secret" in before["list_datasets"] and "secret" in before["lineage with jobs"]
    result = hide(owner, "dataset", NS, "secret")
    assert (result["already_hidden"], result["datasets"], result["jobs"]) == (False, 1, 0)
    after = everything_visible(service, owner)
    for key, shown in after.items():
        assert "secret" not in names_in(shown), key
    assert after["summary"] == before["summary"] - 1
    # Not walked through: what lies past it (b, its symlink's name) is not reached.
    assert after["lineage"] == {"a", "report"}
    assert after["lineage with jobs"] == {"a", "j1", "j3", "report"}
    assert after["field lineage"] == {"a"}
    assert after["runs"] == {r if r[0] != "j1" else ("j1", ("a",)) for r in before["runs"] if r[0] != "j2"} | {
        ("j2", ("b",))
    }
    for sql in (
        "SELECT metastore.get_dataset(%s)",
        "SELECT metastore.dataset_runs(%s, 5)",
        "SELECT metastore.dataset_lineage(%s, 'both', 3, 10)",
        "SELECT metastore.field_lineage(%s, 'x')",
        "SELECT metastore.list_runs(5, NULL, NULL, NULL, NULL, NULL, %s)",
    ):
        assert not found(service, sql, secret), sql
    # Its identifier is a dataset of its own, still shown; the events stay, in the feed too.
    assert "secret-path" in after["list_datasets"]
    feed = service.execute(
        "SELECT event FROM metastore.read_events(100, NULL, NULL, NULL, NULL, NULL, NULL, NULL, %s, 'secret')", (NS,)
    ).fetchall()
    assert len(feed) == 2


def test_a_hidden_job_is_gone_from_every_read_function(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], store: None
) -> None:
    j2 = job_id(owner, "j2")
    run = call(service, "SELECT metastore.get_job(%s)", j2)["runs"][0]["id"]
    before = everything_visible(service, owner)
    hide(owner, "job", "jobs", "j2")
    after = everything_visible(service, owner)
    assert "j2" in before["jobs"] and "j2" not in after["jobs"] and "j2" not in after["jobs by latest run"]
    assert "j2" not in after["lineage with jobs"] and "b" not in after["lineage"]  # its edge is gone
    assert {r[0] for r in after["runs"]} == {r[0] for r in before["runs"]} - {"j2"}
    assert "j2" not in after["search"]
    assert not found(service, "SELECT metastore.get_job(%s)", j2)
    assert not found(service, "SELECT metastore.get_run(%s)", run)
    secret = call(service, "SELECT metastore.get_dataset(%s)", dataset_id(owner, "secret"))
    assert "j2" not in {e["job_name"] for e in secret["events"]} and secret["downstream"] == []
    assert "j2" not in {
        r["job"]["name"] for r in call(service, "SELECT metastore.dataset_runs(%s, 9)", secret["id"])["runs"]
    }


def test_a_hidden_namespace_hides_its_datasets_and_jobs(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any], store: None
) -> None:
    before = everything_visible(service, owner)
    assert ("demo", 2, 1) in before["namespaces"]
    result = hide(owner, "namespace", "demo")
    assert (result["datasets"], result["jobs"]) == (2, 1)
    after = everything_visible(service, owner)
    assert not {"seed", "sample"} & after["list_datasets"] and "demo_job" not in after["jobs"]
    assert not [n for n in after["namespaces"] if n[0] == "demo"]
    assert after["summary"] == before["summary"] - 2
    assert not found(service, "SELECT metastore.get_dataset(%s)", dataset_id(owner, "seed", "demo"))
    assert not found(service, "SELECT metastore.get_job(%s)", job_id(owner, "demo_job"))


def test_it_stays_hidden_through_a_rebuild_and_when_seen_again_until_unhidden(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    old = derive(1, "j", [ds("a")], ds("secret"), {})
    old["eventTime"] = "2017-06-01T00:00:00Z"
    ingest(service, old)
    first = dataset_id(owner, "secret")
    hide(owner, "dataset", NS, "secret")
    owner.execute("CALL metastore.backfill()")
    assert not found(service, "SELECT metastore.get_dataset(%s)", first)
    # Retention forgets its only event, a rebuild its row; a new event names it again: a new row.
    owner.execute("SELECT metastore.apply_retention('3000 days')")
    owner.execute("CALL metastore.backfill()")
    assert owner.execute("SELECT count(*) FROM metastore.datasets WHERE name = 'secret'").fetchone() == (0,)
    ingest(service, derive(2, "j", [ds("a")], ds("secret"), {}))
    again = dataset_id(owner, "secret")
    assert again != first
    assert not found(service, "SELECT metastore.get_dataset(%s)", again)
    assert "secret" not in {d["name"] for d in call(service, "SELECT metastore.list_datasets(100)")["datasets"]}
    unhidden = call(owner, "SELECT metastore.unhide('dataset', %s, 'secret')", NS)["unhidden"]
    assert unhidden["unhidden_by"] == "metastore_owner" and unhidden["unhidden_at"] >= unhidden["hidden_at"]
    assert found(service, "SELECT metastore.get_dataset(%s)", again)
    history = call(owner, "SELECT metastore.hidden_list(true)")["hidden"]
    assert [(h["kind"], h["name"], h["reason"], h["hidden_by"]) for h in history] == [
        ("dataset", "secret", "test data", "metastore_owner")
    ]
    assert call(owner, "SELECT metastore.hidden_list()") == {"hidden": []}


def test_hiding_twice_says_so_and_unhiding_what_is_not_hidden_is_p0002(owner: psycopg.Connection[Any]) -> None:
    first = hide(owner, "namespace", "demo")
    second = hide(owner, "namespace", "demo")
    assert second["already_hidden"] is True and second["hidden"]["id"] == first["hidden"]["id"]
    assert hide(owner, "dataset", "demo", "not seen yet")["datasets"] == 0  # hidden from when it is seen
    owner.execute("SELECT metastore.unhide('namespace', 'demo')")
    with pytest.raises(psycopg.errors.NoDataFound):
        owner.execute("SELECT metastore.unhide('namespace', 'demo')")


@pytest.mark.parametrize(
    ("kind", "namespace", "name"),
    [("table", "n", "x"), (None, "n", "x"), ("dataset", None, "x"), ("dataset", "n", None), ("namespace", "n", "x")],
)
def test_bad_arguments_are_22023(owner: psycopg.Connection[Any], kind: Any, namespace: Any, name: Any) -> None:
    for sql in ("SELECT metastore.hide(%s, %s, %s)", "SELECT metastore.unhide(%s, %s, %s)"):
        with pytest.raises(psycopg.Error) as caught:
            owner.execute(sql, (kind, namespace, name))  # type: ignore[arg-type]
        assert caught.value.sqlstate == "22023"


def test_the_service_cannot_hide_unhide_or_read_the_list(service: psycopg.Connection[Any]) -> None:
    assert_each_refused(
        service,
        "SELECT metastore.hide('namespace', 'n')",
        "SELECT metastore.unhide('namespace', 'n')",
        "SELECT metastore.hidden_list()",
        "SELECT * FROM metastore.hidden",
        "INSERT INTO metastore.hidden (kind, namespace, hidden_by, hidden_at) VALUES ('namespace', 'n', 'x', now())",
    )


def test_the_datasets_list_jumps_over_a_hidden_namespace(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    """A hidden namespace is a range of the list's index, skipped as a whole: pages before, inside
    and after it are the visible datasets in order, whatever the cursor."""
    for namespace, count in (("a-visible", 4), ("b-hidden", 300), ("c-visible", 4), ("d-hidden", 5), ("e", 2)):
        datasets = [{"namespace": namespace, "name": f"t{i:03d}"} for i in range(count)]
        ingest(service, {**derive(1, f"j-{namespace}", datasets, ds("out"), {}), "outputs": []})
    hide(owner, "namespace", "b-hidden")
    hide(owner, "namespace", "d-hidden")
    visible = [("a-visible", f"t{i:03d}") for i in range(4)] + [("c-visible", f"t{i:03d}") for i in range(4)]
    visible += [("e", "t000"), ("e", "t001")]
    visible.sort(key=lambda d: (d[0].encode(), d[1].encode()))
    for limit in (1, 3, 4, 100):
        seen, cursor = [], None
        while True:
            page = call(service, "SELECT metastore.list_datasets(%s::int, %s)", limit, cursor)
            seen += [(d["namespace"], d["name"]) for d in page["datasets"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == visible, limit
    assert call(service, "SELECT metastore.list_datasets(10, NULL, 'b-hidden')")["datasets"] == []
    # A cursor inside the hidden namespace (made by hand) goes on after it.
    inside = call(
        owner, "SELECT translate(encode(convert_to('[\"b-hidden\", \"t100\"]', 'UTF8'), 'base64'), '+/', '-_')"
    )
    page = call(service, "SELECT metastore.list_datasets(2, %s)", inside)
    assert [(d["namespace"], d["name"]) for d in page["datasets"]] == visible[4:6]
