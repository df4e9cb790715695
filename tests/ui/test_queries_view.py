"""The Queries page in a real Chromium, against the real server and PostgreSQL: the runs timeline
newest first in keyset pages, each run with its job, state, start, duration, Trino user and the
datasets it read and wrote (links to their pages); filters by state, user, source, job namespace
(a choice from those that exist) and time; hostile names as text with their look-alike markers."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import FIXTURES, load_fixture
from tests.support.browser import ARTIFACTS
from tests.support.servers import Server

SCHEDULER = "airflow://scheduler:8080"
HOSTILE_JOB = "<img src=x onerror=alert(1)>\u202eload"
HOSTILE_USER = "<b>eve</b>\u200b"
HOSTILE_TABLE = "warehouse.public.orders\u200b"


def run_event(n: int, **overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "eventTime": f"2024-03-{1 + n // 24:02d}T{n % 24:02d}:00:00Z",
        "eventType": "COMPLETE",
        "run": {
            "runId": f"01900000-0000-7000-8000-{n:012d}",
            "facets": {"trino_query_context": {"user": "bob", "source": "airflow", "serverAddress": "x"}},
        },
        "job": {"namespace": SCHEDULER, "name": f"daily.load_{n:03d}"},
        "inputs": [{"namespace": "postgres://db:5432", "name": "warehouse.public.orders"}],
        "outputs": [{"namespace": "postgres://db:5432", "name": f"warehouse.public.daily_{n:03d}"}],
    }
    event.update(overrides)
    return event


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    events = [
        load_fixture(FIXTURES / "trino" / f)
        for f in (
            "01-select-start.json",
            "02-select-complete.json",
            "03-ctas-start.json",
            "04-ctas-complete.json",
            "05-select-runtime-fail.json",
            "06-ctas-analysis-fail.json",
        )
    ]
    events += [run_event(n) for n in range(55)]
    hostile = run_event(60, eventType="ABORT")
    hostile["run"]["facets"]["trino_query_context"]["user"] = HOSTILE_USER
    hostile["job"] = {"namespace": SCHEDULER, "name": HOSTILE_JOB}
    hostile["inputs"] = [{"namespace": "postgres://db:5432", "name": HOSTILE_TABLE}]
    events.append(hostile)
    with server.client() as http:
        for body in events:
            response = http.post("/api/v1/lineage", json=body)
            assert response.status_code in (200, 201), response.text
    return server


def api_runs(server: Server, **params: str) -> list[dict[str, Any]]:
    """Every run the API answers for these filters, following next_cursor."""
    runs: list[dict[str, Any]] = []
    cursor = None
    with server.client() as http:
        while True:
            query = {**params, **({"cursor": cursor} if cursor else {})}
            answer = http.get("/api/v1/runs", params=query).json()
            runs += answer["runs"]
            cursor = answer["next_cursor"]
            if not cursor:
                return runs


def shown(page: Page) -> list[str]:
    return page.locator("#queries tbody tr[data-run]").evaluate_all("rs => rs.map(r => r.dataset.run)")


def test_the_timeline_newest_first_with_what_each_run_read_and_wrote(page: Page, seeded: Server) -> None:
    page.goto("/ui/#/queries")
    expect(page).to_have_title("Queries · Metadata Store")
    expect(page.locator("h1")).to_have_text("Queries")
    expect(page.locator(".nav a[aria-current=page]")).to_have_text("Queries")
    rows = page.locator("#queries tbody tr[data-run]")
    expect(rows).to_have_count(50)
    everything = api_runs(seeded)
    assert len(everything) == 60  # 4 Trino queries, 55 scheduled loads, 1 aborted
    assert shown(page) == [r["run_id"] for r in everything[:50]]  # the API's order: newest first
    # The Trino CTAS: its job, state, user, duration, and the datasets it read and wrote.
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    row = page.locator(f'#queries tr[data-run="{ctas["run"]["runId"]}"]')
    expect(row.locator(".badge.state")).to_have_text("COMPLETE")
    expect(row.locator("td.user")).to_have_text("alice")
    expect(row.locator("td.num")).to_have_text(re.compile(r"^\d+ ms$"))
    expect(row.locator("td.io").nth(0).locator("a")).to_have_text(["tpch.tiny.nation"])
    expect(row.locator("td.io").nth(1).locator("a")).to_have_text(["memory.default.nation_copy"])
    # A failed one is marked, with its error.
    fail = load_fixture(FIXTURES / "trino" / "05-select-runtime-fail.json")
    failed = page.locator(f'#queries tr[data-run="{fail["run"]["runId"]}"]')
    expect(failed).to_have_class(re.compile(r"\bfailed\b"))
    expect(failed.locator(".badge.state")).to_have_text("FAIL")
    expect(failed.locator(".run-error")).to_have_text("Division by zero")
    expect(page.locator("#queries-status")).to_contain_text("failed")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "queries.png"), full_page=True)
    # Older runs on the next page (keyset), and back.
    page.get_by_role("button", name="Older →").click()
    expect(rows).to_have_count(10)
    assert shown(page) == [r["run_id"] for r in everything[50:]]
    expect(page.get_by_role("button", name="Older →")).to_be_disabled()
    page.get_by_role("button", name="← Newer").click()
    expect(rows).to_have_count(50)
    # A dataset opens its page; the job opens its page.
    row.locator("td.io").nth(1).get_by_role("link", name="memory.default.nation_copy").click()
    expect(page.locator("#detail-heading")).to_have_text("memory.default.nation_copy")
    page.go_back()
    page.locator(f'#queries tr[data-run="{ctas["run"]["runId"]}"] a.job-link').click()
    expect(page.locator("#job-heading")).to_have_text(ctas["job"]["name"])


def test_the_filters(page: Page, seeded: Server) -> None:
    page.goto("/ui/#/queries")
    rows = page.locator("#queries tbody tr[data-run]")
    expect(rows).to_have_count(50)
    # Failed ones, one choice away.
    page.get_by_label("State", exact=True).select_option(label="Failed or aborted")
    want = [r["run_id"] for r in api_runs(seeded, state="FAIL,ABORT")]
    assert len(want) == 3
    expect(rows).to_have_count(3)
    assert shown(page) == want
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.state)")) == {"FAIL", "ABORT"}
    page.get_by_label("State", exact=True).select_option("")
    # The Trino user, exactly.
    page.get_by_label("User", exact=True).fill("alice")
    expect(rows).to_have_count(4)
    assert shown(page) == [r["run_id"] for r in api_runs(seeded, user="alice")]
    page.get_by_label("User", exact=True).fill("")
    page.get_by_label("Source").fill("airflow")
    expect(page.locator("#queries-status")).to_contain_text("Showing 50 queries")
    page.get_by_label("Source").fill("")
    # The job namespace: a choice of those that have jobs, from GET /namespaces.
    with seeded.client() as http:
        listed = http.get("/api/v1/namespaces").json()["namespaces"]
    options = page.locator("#run-namespace option").evaluate_all("os => os.map(o => o.value)")
    assert options == ["", *[n["namespace"] for n in listed if n["jobs"] > 0]]
    assert "postgres://db:5432" not in options  # a namespace of datasets only
    page.get_by_label("Engine or scheduler").select_option("trino://localhost:8080")
    expect(rows).to_have_count(4)
    assert shown(page) == [r["run_id"] for r in api_runs(seeded, job_namespace="trino://localhost:8080")]
    page.get_by_label("Engine or scheduler").select_option("")
    # A time range, in UTC: runs that started on 2024-03-02.
    page.get_by_label("Started from (UTC)").fill("2024-03-02T00:00:00")
    page.get_by_label("Started before (UTC)").fill("2024-03-03T00:00:00")
    want = [r["run_id"] for r in api_runs(seeded, **{"from": "2024-03-02T00:00:00Z", "to": "2024-03-03T00:00:00Z"})]
    assert len(want) == 24
    expect(rows).to_have_count(24)
    assert shown(page) == want
    page.get_by_label("State", exact=True).select_option(label="Failed or aborted")
    expect(page.locator("#queries tbody")).to_contain_text("No queries match these filters.")


def test_hostile_names_are_text_with_their_markers(page: Page, seeded: Server) -> None:
    page.goto("/ui/#/queries")
    page.get_by_label("State", exact=True).select_option("ABORT")
    row = page.locator("#queries tbody tr[data-run]")
    expect(row).to_have_count(1)
    assert page.locator("#queries tbody img, #queries tbody b").count() == 0
    expect(row.locator("a.job-link")).to_have_text("<img src=x onerror=alert(1)>⟨U+202E⟩load")
    expect(row.locator("a.job-link .cp")).to_have_attribute("title", re.compile("RIGHT-TO-LEFT OVERRIDE"))
    expect(row.locator("td.user")).to_have_text("<b>eve</b>⟨U+200B⟩")
    expect(row.locator("td.io").nth(0).locator("a")).to_have_text("warehouse.public.orders⟨U+200B⟩")
    # Not the same as the table without the invisible character.
    page.get_by_label("State", exact=True).select_option("")
    page.get_by_label("User", exact=True).fill("bob")
    expect(page.locator("#queries tbody tr[data-run]").first.locator("td.io").nth(0).locator("a")).to_have_text(
        "warehouse.public.orders"
    )


def test_the_jobs_part_lands_on_the_queries_by_keyboard(page: Page, seeded: Server) -> None:
    page.goto("/ui/")
    link = page.get_by_role("link", name="Queries", exact=True)
    link.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#/queries$"))
    expect(page.locator("#queries tbody tr[data-run]")).to_have_count(50)
    page.get_by_label("State", exact=True).focus()
    page.keyboard.press("Tab")
    expect(page.get_by_label("User", exact=True)).to_be_focused()


def test_from_a_dataset_to_every_query_that_read_or_wrote_it(page: Page, seeded: Server) -> None:
    with seeded.client() as http:
        found = http.get("/api/v1/datasets", params={"q": "daily_007"}).json()["datasets"]
    daily = next(d for d in found if d["name"] == "warehouse.public.daily_007")
    page.goto(f"/ui/#/datasets/{daily['id']}")
    page.locator("#dataset-all-queries").click()
    expect(page).to_have_url(re.compile(rf"#/queries/dataset/{daily['id']}$"))
    rows = page.locator("#queries tbody tr[data-run]")
    want = [r["run_id"] for r in api_runs(seeded, dataset_id=str(daily["id"]))]
    assert len(want) == 1
    expect(rows).to_have_count(1)
    assert shown(page) == want
    note = page.locator("#queries-dataset")
    expect(note).to_contain_text("Only the queries that read or wrote warehouse.public.daily_007")
    # Combined with the other filters; "Show all" lifts it.
    page.get_by_label("User", exact=True).fill("alice")
    expect(page.locator("#queries tbody")).to_contain_text("No queries match these filters.")
    page.get_by_label("User", exact=True).fill("")
    expect(rows).to_have_count(1)
    note.get_by_role("link", name="Show all").click()
    expect(rows).to_have_count(50)
    expect(note).to_be_hidden()
