"""GET /api/v1/runs, /api/v1/search, /api/v1/namespaces, /api/v1/datasets/{id}/fields/{field}/lineage,
the jobs list's sort and filters, the job page's datasets and the lineage graph's jobs, through the
real server over TLS; and what `metastore db hide` hides, across every read route, after a backfill."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import Database
from tests.support.checks import assert_error
from tests.support.servers import Server


def post(client: httpx.Client, event: dict[str, Any]) -> None:
    response = client.post("/api/v1/lineage", json=event)
    assert response.status_code in (200, 201), response.text


def get(client: httpx.Client, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def query(
    tag: str,
    i: int,
    *,
    state: str = "COMPLETE",
    user: str = "alice",
    inputs: Any = None,
    outputs: Any = None,
    minute: int | None = None,
    fields: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ns = f"trino://{tag}:8080"
    m = i if minute is None else minute

    def ds(d: Any) -> dict[str, Any]:
        return d if isinstance(d, dict) else {"namespace": ns, "name": d}

    event: dict[str, Any] = {
        "eventTime": f"2026-07-20T{m // 60:02d}:{m % 60:02d}:00Z",
        "eventType": state,
        "run": {"runId": f"{tag}-{i}", "facets": {"trino_query_context": {"user": user, "source": f"src-{tag}"}}},
        "job": {"namespace": ns, "name": f"{tag}_q{i:04d}"},
        "inputs": [ds(d) for d in (inputs or [])],
        "outputs": [ds(d) for d in (outputs or [])],
    }
    if fields:
        event["outputs"][0]["facets"] = {"columnLineage": {"fields": fields}}
    return event


def dataset_id(client: httpx.Client, namespace: str, name: str) -> int:
    page = get(client, "/api/v1/datasets", namespace=namespace, q=name)
    (match,) = [d for d in page["datasets"] if d["name"] == name]
    return int(match["id"])


def every_run(client: httpx.Client, limit: int, **params: Any) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = get(client, "/api/v1/runs", limit=limit, **params, **({"cursor": cursor} if cursor else {}))
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


def test_the_runs_timeline_and_each_of_its_parameters(client: httpx.Client) -> None:
    tag = f"t{uuid.uuid4().hex[:8]}"
    for i in range(12):
        post(
            client,
            query(
                tag,
                i,
                state=("COMPLETE", "FAIL", "START")[i % 3],
                user=("alice", "bob")[i % 2],
                inputs=[f"in{i % 2}"],
                outputs=[f"out{i}"],
            ),
        )
    ns = f"trino://{tag}:8080"
    in1 = dataset_id(client, ns, "in1")
    newest = [f"{tag}-{i}" for i in reversed(range(12))]
    assert every_run(client, 5, job_namespace=ns) == newest
    assert every_run(client, 5, job_namespace=ns, state="fail") == [r for r in newest if int(r.split("-")[1]) % 3 == 1]
    assert every_run(client, 2, user="bob", job_namespace=ns) == [r for r in newest if int(r.split("-")[1]) % 2]
    assert every_run(client, 2, source=f"src-{tag}", state="START,FAIL") == [
        r for r in newest if int(r.split("-")[1]) % 3
    ]
    assert every_run(client, 3, dataset_id=in1) == [r for r in newest if int(r.split("-")[1]) % 2]
    window = {"from": "2026-07-20T00:03:00Z", "to": "2026-07-20T00:06:00+00:00"}
    assert every_run(client, 50, job_namespace=ns, **window) == [f"{tag}-{i}" for i in (5, 4, 3)]
    (run,) = get(client, "/api/v1/runs", dataset_id=dataset_id(client, ns, "out7"))["runs"]
    assert (run["state"], run["trino_user"], run["job"]["name"]) == ("FAIL", "bob", f"{tag}_q0007")
    assert [d["name"] for d in run["inputs"]] == ["in1"] and [d["name"] for d in run["outputs"]] == ["out7"]
    assert set(run["inputs"][0]) == {"id", "namespace", "name"}


def test_runs_page_without_skips_or_repeats_while_queries_are_posted(client: httpx.Client, server: Server) -> None:
    tag = f"c{uuid.uuid4().hex[:8]}"
    ns = f"trino://{tag}:8080"
    for i in range(120):
        post(client, query(tag, i, state="START", minute=i))
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with server.client() as c:
                i = 0
                while not stop.is_set() and i < 120:
                    post(c, query(tag, i, state="COMPLETE", minute=i + 1, inputs=["a"], outputs=["b"]))
                    post(c, query(tag, 500 + i, state="START", minute=300 + i))
                    i += 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = every_run(client, 9, job_namespace=ns)
    finally:
        stop.set()
        thread.join(60)
    assert not errors
    assert len(seen) == len(set(seen))
    assert [r for r in seen if int(r.split("-")[1]) < 500] == [f"{tag}-{i}" for i in reversed(range(120))]


def test_jobs_by_latest_run_with_state_and_user_and_a_job_s_datasets(client: httpx.Client) -> None:
    tag = f"j{uuid.uuid4().hex[:8]}"
    ns = f"trino://{tag}:8080"
    post(client, query(tag, 1, state="FAIL", user="bob", inputs=["src"], outputs=["dst"]))
    post(client, query(tag, 2, state="COMPLETE", user="alice", inputs=["dst"], outputs=["end"]))
    names = [j["name"] for j in get(client, "/api/v1/jobs", namespace=ns, sort="latest_run")["jobs"]]
    assert names == [f"{tag}_q0002", f"{tag}_q0001"]
    (failed,) = get(client, "/api/v1/jobs", namespace=ns, state="FAIL", user="bob", sort="name")["jobs"]
    assert failed["latest_run"]["state"] == "FAIL" and failed["latest_run"]["trino_user"] == "bob"
    detail = get(client, f"/api/v1/jobs/{failed['id']}")
    assert [d["name"] for d in detail["inputs"]] == ["src"] and [d["name"] for d in detail["outputs"]] == ["dst"]
    assert detail["inputs"][0]["symlinks"] == [] and detail["datasets_truncated"] is False
    # The lineage graph with the jobs between the datasets.
    graph = get(client, f"/api/v1/datasets/{dataset_id(client, ns, 'dst')}/lineage", include="jobs")
    assert {(n["type"], n["name"]) for n in graph["nodes"]} == {
        ("dataset", "dst"),
        ("dataset", "src"),
        ("dataset", "end"),
        ("job", f"{tag}_q0001"),
        ("job", f"{tag}_q0002"),
    }
    assert {e["kind"] for e in graph["edges"]} == {"input", "output"}
    plain = get(client, f"/api/v1/datasets/{dataset_id(client, ns, 'dst')}/lineage")
    assert all("type" not in n for n in plain["nodes"]) and {e["kind"] for e in plain["edges"]} == {"lineage"}


@pytest.mark.parametrize("field", ["amount", "a/b", "total cost", "päivä", "50%", "x.y", "..", "#1?"])
def test_field_lineage_with_the_field_percent_encoded(client: httpx.Client, field: str) -> None:
    tag = f"f{uuid.uuid4().hex[:8]}"
    ns = f"trino://{tag}:8080"
    src = {"namespace": ns, "name": "src"}
    post(
        client,
        query(
            tag,
            1,
            inputs=[src],
            outputs=["mid"],
            fields={
                field: {
                    "inputFields": [
                        {**src, "field": field, "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}]}
                    ]
                }
            },
        ),
    )
    mid = {"namespace": ns, "name": "mid"}
    post(
        client, query(tag, 2, inputs=[mid], outputs=["end"], fields={"out": {"inputFields": [{**mid, "field": field}]}})
    )
    # A segment of dots only is a dot segment to URL normalisation: its dots are sent encoded too.
    segment = quote(field, safe="") if field.strip(".") else "%2E" * len(field)
    path = f"/api/v1/datasets/{dataset_id(client, ns, 'src')}/fields/{segment}/lineage"
    graph = get(client, path, direction="downstream", depth=5)
    assert [(n["name"], n["field"], n["depth"]) for n in graph["nodes"]] == [
        ("src", field, 0),
        ("mid", field, 1),
        ("end", "out", 2),
    ]
    assert [(e["from"], e["to"], e["transformation"]) for e in graph["edges"]] == [
        (1, 2, {"type": "DIRECT", "subtype": "IDENTITY"}),
        (2, 3, None),
    ]
    assert get(client, path, direction="upstream")["nodes"][0]["field"] == field
    cut = get(client, path, direction="both", depth=1, limit=1)
    assert len(cut["nodes"]) == 1 and cut["truncated"] is True and cut["depth"] == 1


def test_search_and_namespaces(client: httpx.Client) -> None:
    tag = f"s{uuid.uuid4().hex[:8]}"
    ns = f"trino://{tag}:8080"
    post(client, query(tag, 1, inputs=[f"hive.x.{tag}_orders"], outputs=[f"{tag}_orders_daily"]))
    got = get(client, "/api/v1/search", q=f"{tag}_ORDERS", limit=5)
    assert [(r["type"], r["match"], r["name"]) for r in got["results"]] == [
        ("dataset", "exact", f"hive.x.{tag}_orders"),
        ("dataset", "prefix", f"{tag}_orders_daily"),
    ]
    assert got["results"][0]["id"] == dataset_id(client, ns, f"hive.x.{tag}_orders")
    (job,) = get(client, "/api/v1/search", q=f"{tag}_q0001")["results"]
    assert (job["type"], job["namespace"]) == ("job", ns)
    mine = {n["namespace"]: n for n in get(client, "/api/v1/namespaces")["namespaces"]}
    assert (mine[ns]["datasets"], mine[ns]["jobs"], mine[ns]["more_datasets"]) == (2, 1, False)
    one = get(client, "/api/v1/namespaces", limit=1)
    assert len(one["namespaces"]) == 1 and one["truncated"] is True


@pytest.mark.parametrize(
    ("path", "params", "status", "code"),
    [
        ("/api/v1/runs", {"limit": "0"}, 400, "22023"),
        ("/api/v1/runs", {"limit": "1001"}, 400, "22023"),
        ("/api/v1/runs", {"state": "DONE"}, 400, "22023"),
        ("/api/v1/runs", {"cursor": "garbage"}, 400, "22023"),
        ("/api/v1/runs", {"from": "2026-07-21", "to": "2026-07-20"}, 400, "22023"),
        ("/api/v1/runs", {"from": "soon"}, 400, "22007"),
        ("/api/v1/runs", {"dataset_id": "x"}, 400, None),
        ("/api/v1/runs", {"dataset_id": "99999999999999999999"}, 400, "22003"),
        ("/api/v1/runs", {"dataset_id": "999999999"}, 404, "P0002"),
        ("/api/v1/runs", {"user": ["a", "b"]}, 400, None),
        ("/api/v1/jobs", {"sort": "newest"}, 400, "22023"),
        ("/api/v1/jobs", {"state": "x"}, 400, "22023"),
        ("/api/v1/jobs", {"sort": "latest_run", "cursor": "WyJhIiwgImIiXQ"}, 400, "22023"),
        ("/api/v1/search", {}, 400, "22023"),
        ("/api/v1/search", {"q": "  "}, 400, "22023"),
        ("/api/v1/search", {"q": "x" * 1001}, 400, "22023"),
        ("/api/v1/search", {"q": "x", "limit": "101"}, 400, "22023"),
        ("/api/v1/search", {"q": "x", "limit": "0"}, 400, "22023"),
        ("/api/v1/namespaces", {"limit": "0"}, 400, "22023"),
        ("/api/v1/namespaces", {"limit": "1001"}, 400, "22023"),
        ("/api/v1/datasets/999999999/lineage", {"include": "jobs"}, 404, "P0002"),
        ("/api/v1/datasets/999999999/fields/x/lineage", {}, 404, "P0002"),
    ],
)
def test_bad_parameters(client: httpx.Client, path: str, params: dict[str, Any], status: int, code: str | None) -> None:
    assert_error(client.get(path, params=params), status, code)


def test_bad_parameters_of_a_dataset_s_routes(client: httpx.Client) -> None:
    tag = f"b{uuid.uuid4().hex[:8]}"
    post(client, query(tag, 1, inputs=["a"], outputs=["b"]))
    ds = dataset_id(client, f"trino://{tag}:8080", "a")
    assert_error(client.get(f"/api/v1/datasets/{ds}/lineage", params={"include": "all"}), 400, "22023")
    fields = f"/api/v1/datasets/{ds}/fields"
    for params in ({"direction": "sideways"}, {"depth": "0"}, {"depth": "11"}, {"limit": "0"}, {"limit": "1001"}):
        assert_error(client.get(f"{fields}/x/lineage", params=params), 400, "22023")
    assert_error(client.get(f"{fields}/x/lineage", params={"depth": "two"}), 400)
    assert_error(client.get(f"{fields}/{'x' * 1001}/lineage"), 400, "22023")
    assert_error(client.get(f"{fields}/a%00b/lineage"), 400, "22021")
    assert_error(client.get(f"{fields}/%FF%FE/lineage"), 400, "22021")


def metastore_db(*args: str, dsn: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    env["METASTORE_ADMIN_DATABASE_URL"] = dsn
    return subprocess.run(
        [sys.executable, "-m", "metastore", "db", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_hidden_by_the_cli_it_is_gone_from_every_read_route_and_stays_so_after_a_backfill(
    client: httpx.Client, module_db: Database
) -> None:
    tag = f"h{uuid.uuid4().hex[:8]}"
    ns = f"trino://{tag}:8080"
    field = {"x": {"inputFields": [{"namespace": ns, "name": "a", "field": "x"}]}}
    post(client, query(tag, 1, inputs=["a"], outputs=["secret"], fields={"x": field["x"]}))
    post(
        client,
        query(
            tag,
            2,
            inputs=["secret"],
            outputs=["b"],
            fields={"x": {"inputFields": [{"namespace": ns, "name": "secret", "field": "x"}]}},
        ),
    )
    a, secret = dataset_id(client, ns, "a"), dataset_id(client, ns, "secret")
    job1 = get(client, "/api/v1/jobs", namespace=ns, q="q0001")["jobs"][0]
    run1 = get(client, f"/api/v1/jobs/{job1['id']}")["runs"][0]["id"]
    job2 = get(client, "/api/v1/jobs", namespace=ns, q="q0002")["jobs"][0]
    run2 = get(client, f"/api/v1/jobs/{job2['id']}")["runs"][0]["id"]

    def visible() -> dict[str, Any]:
        runs = get(client, "/api/v1/runs", job_namespace=ns)["runs"]
        return {
            "datasets": {d["name"] for d in get(client, "/api/v1/datasets", namespace=ns)["datasets"]},
            "summary": {
                n["namespace"]: n["datasets"] for n in get(client, "/api/v1/datasets/summary")["namespaces"]
            }.get(ns),
            "namespaces": {n["namespace"] for n in get(client, "/api/v1/namespaces")["namespaces"]},
            "a downstream": {d["name"] for d in get(client, f"/api/v1/datasets/{a}")["downstream"]},
            "lineage": {n["name"] for n in get(client, f"/api/v1/datasets/{a}/lineage", include="jobs")["nodes"]},
            "fields": {n["name"] for n in get(client, f"/api/v1/datasets/{a}/fields/x/lineage")["nodes"]},
            "search": {r.get("name") for r in get(client, "/api/v1/search", q=tag, limit=100)["results"]},
            "runs": {(r["job"]["name"], tuple(d["name"] for d in r["inputs"] + r["outputs"])) for r in runs},
            "jobs": {j["name"] for j in get(client, "/api/v1/jobs", namespace=ns, sort="latest_run")["jobs"]},
            "job1 outputs": {d["name"] for d in get(client, f"/api/v1/jobs/{job1['id']}")["outputs"]},
            "run1 outputs": {d["name"] for d in get(client, f"/api/v1/runs/{run1}")["outputs"]},
            "a runs": {r["job"]["name"] for r in get(client, f"/api/v1/datasets/{a}/runs")["runs"]},
            "secret": client.get(f"/api/v1/datasets/{secret}").status_code,
            "secret runs": client.get(f"/api/v1/datasets/{secret}/runs").status_code,
            "job2": client.get(f"/api/v1/jobs/{job2['id']}").status_code,
            "run2": client.get(f"/api/v1/runs/{run2}").status_code,
        }

    before = visible()
    assert "secret" in before["datasets"] and before["secret"] == 200 and before["job2"] == 200
    result = metastore_db("hide", "--dataset", ns, "secret", "--reason", "demo data", dsn=module_db.owner_dsn)
    assert result.returncode == 0, result.stderr
    assert '"hidden_by": "metastore_owner"' in result.stdout and '"demo data"' in result.stdout
    result = metastore_db("hide", "--job", ns, f"{tag}_q0002", dsn=module_db.owner_dsn)
    assert result.returncode == 0, result.stderr
    hidden = visible()
    assert hidden == {
        "datasets": {"a", "b"},
        "summary": 2,
        "namespaces": before["namespaces"],
        "a downstream": set(),
        "lineage": {"a", f"{tag}_q0001"},
        "fields": {"a"},
        "search": before["search"] - {"secret", f"{tag}_q0002"},
        "runs": {(f"{tag}_q0001", ("a",))},
        "jobs": {f"{tag}_q0001"},
        "job1 outputs": set(),
        "run1 outputs": set(),
        "a runs": {f"{tag}_q0001"},
        "secret": 404,
        "secret runs": 404,
        "job2": 404,
        "run2": 404,
    }
    # The events stay, and the feed serves them.
    feed = get(client, "/api/v1/events", dataset_namespace=ns, dataset_name="secret")["events"]
    assert len(feed) == 2
    # A rebuild of the derived tables keeps the hide list.
    result = metastore_db("backfill", dsn=module_db.owner_dsn)
    assert result.returncode == 0, result.stderr
    assert visible() == hidden
    listed = metastore_db("hide", "--list", dsn=module_db.owner_dsn)
    assert listed.returncode == 0 and f"{tag}_q0002" in listed.stdout
    for args in (("--dataset", ns, "secret"), ("--job", ns, f"{tag}_q0002")):
        result = metastore_db("unhide", *args, dsn=module_db.owner_dsn)
        assert result.returncode == 0, result.stderr
    assert visible() == before
    again = metastore_db("unhide", "--dataset", ns, "secret", dsn=module_db.owner_dsn)
    assert again.returncode == 1 and "P0002" in again.stderr and "Traceback" not in again.stderr
    # The service's own role cannot hide.
    refused = metastore_db("hide", "--namespace", ns, dsn=module_db.service_dsn)
    assert refused.returncode == 1 and "42501" in refused.stderr and "Traceback" not in refused.stderr


def test_the_new_routes_are_documented(client: httpx.Client) -> None:
    spec = client.get("/api/v1/openapi.json").json()
    for path in (
        "/api/v1/runs",
        "/api/v1/search",
        "/api/v1/namespaces",
        "/api/v1/datasets/{id}/fields/{field}/lineage",
    ):
        assert "get" in spec["paths"][path], path
    jobs = {p.get("name") for p in spec["paths"]["/api/v1/jobs"]["get"]["parameters"]}
    assert {"sort", "state", "user"} <= jobs
    lineage = {p.get("name") for p in spec["paths"]["/api/v1/datasets/{id}/lineage"]["get"]["parameters"]}
    assert "include" in lineage
    runs = {p.get("name") for p in spec["paths"]["/api/v1/runs"]["get"]["parameters"]}
    assert {"state", "user", "source", "job_namespace", "dataset_id", "from", "to", "limit", "cursor"} <= runs
