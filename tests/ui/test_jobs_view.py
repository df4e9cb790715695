"""The jobs view in a real Chromium, against the real server and PostgreSQL: the jobs list with
their latest run, a job's page with its runs and SQL (copied with a button), by keyboard."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import FIXTURES, load_fixture
from tests.support.browser import ARTIFACTS
from tests.support.servers import Server


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    with server.client() as http:
        for name in ("04-ctas-complete.json", "03-ctas-start.json", "05-select-runtime-fail.json"):
            assert http.post("/api/v1/lineage", json=load_fixture(FIXTURES / "trino" / name)).status_code in (200, 201)
        for i in range(3):
            event = {
                "eventTime": f"2024-03-0{i + 1}T10:00:00Z",
                "eventType": "COMPLETE",
                "run": {"runId": f"nightly-{i}"},
                "job": {"namespace": "airflow", "name": "nightly.<b>load</b>"},
            }
            assert http.post("/api/v1/lineage", json=event).status_code == 201
    return server


def test_jobs_list_shows_latest_run_state(page: Page) -> None:
    page.goto("/ui/#/jobs")
    expect(page.locator("#jobs-view")).to_be_visible()
    expect(page.locator("#list-view")).to_be_hidden()
    expect(page.locator("#jobs tbody tr[data-name]")).to_have_count(3)
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    fail = load_fixture(FIXTURES / "trino" / "05-select-runtime-fail.json")
    expect(page.locator(f'#jobs tr[data-name="{ctas["job"]["name"]}"] .badge.state')).to_have_text("COMPLETE")
    expect(page.locator(f'#jobs tr[data-name="{fail["job"]["name"]}"] .badge.state')).to_have_text("FAIL")
    expect(page.locator(f'#jobs tr[data-name="{ctas["job"]["name"]}"]')).to_contain_text("alice")
    expect(page.locator(".nav a[aria-current=page]")).to_have_text("Jobs")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "jobs-list.png"), full_page=True)
    # Names are text, never markup.
    page.get_by_label("Search jobs by name").fill("NIGHTLY")
    expect(page.locator("#jobs tbody tr[data-name]")).to_have_count(1)
    assert page.locator("#jobs tbody b").count() == 0
    expect(page.locator("#jobs tbody td.name button")).to_have_text("nightly.<b>load</b>")
    page.get_by_label("Search jobs by name").fill("no job is called this")
    expect(page.locator("#jobs tbody")).to_contain_text("No jobs match these filters.")


def test_a_job_by_keyboard_with_runs_and_sql_to_copy(page: Page) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    page.goto("/ui/#/jobs")
    button = page.get_by_role("button", name=ctas["job"]["name"])
    expect(button).to_be_visible()
    button.focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#/jobs/\d+$"))
    expect(page.locator("#job-heading")).to_be_focused()
    sql = ctas["job"]["facets"]["sql"]["query"]
    expect(page.locator("#job-sql pre.sql")).to_have_text(sql)
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    expect(page.locator("#runs tbody tr .badge.state")).to_have_text("COMPLETE")
    expect(page.locator("#runs tbody tr")).to_contain_text("trino-python-client")
    # Tab to the copy button and press it.
    copy = page.get_by_role("button", name="Copy SQL")
    for _ in range(20):
        if copy.evaluate("b => b === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(copy).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#job-sql .copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == sql
    page.screenshot(path=str(ARTIFACTS / "job-detail.png"), full_page=True)
    page.keyboard.press("Escape")
    expect(page.locator("#jobs-view")).to_be_visible()


def test_failed_run_shows_its_error(page: Page) -> None:
    fail = load_fixture(FIXTURES / "trino" / "05-select-runtime-fail.json")
    page.goto("/ui/#/jobs")
    page.get_by_role("button", name=fail["job"]["name"]).click()
    expect(page.locator("#runs tbody tr td.error-text")).to_have_text("Division by zero")


def test_a_dataset_page_lists_the_queries_that_wrote_and_read_it(page: Page) -> None:
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    page.goto("/ui/")
    page.get_by_label("Search by name").fill("nation_copy")
    page.get_by_role("button", name="memory.default.nation_copy").click()
    section = page.locator("#dataset-runs")
    expect(section).to_contain_text("wrote it")
    expect(section.locator("pre.sql")).to_have_text(ctas["job"]["facets"]["sql"]["query"])
    page.screenshot(path=str(ARTIFACTS / "dataset-queries.png"), full_page=True)
    section.get_by_role("link", name=ctas["job"]["name"]).click()
    expect(page.locator("#job-heading")).to_have_text(ctas["job"]["name"])


def test_a_job_page_leads_with_what_it_read_and_wrote(page: Page, seeded: Server) -> None:
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    with seeded.client() as http:
        job_id = next(j["id"] for j in http.get("/api/v1/jobs", params={"q": ctas["job"]["name"]}).json()["jobs"])
        job = http.get(f"/api/v1/jobs/{job_id}").json()
    assert [d["name"] for d in job["inputs"]] == ["tpch.tiny.nation"]
    assert [d["name"] for d in job["outputs"]] == ["memory.default.nation_copy"]
    page.goto(f"/ui/#/jobs/{job_id}")
    reads = page.locator("#job-inputs li")
    writes = page.locator("#job-outputs li")
    expect(reads).to_have_count(1)
    expect(writes).to_have_count(1)
    expect(reads.first.get_by_role("link").first).to_have_text("tpch.tiny.nation")
    expect(reads.first).to_contain_text("trino://localhost:8080")
    expect(reads.first).to_have_attribute("data-id", str(job["inputs"][0]["id"]))
    # Before the SQL: the page leads with them.
    order = page.locator("#job-detail > section").evaluate_all("ss => ss.map(s => s.id)")
    assert order.index("job-inputs") < order.index("job-outputs") < order.index("job-sql"), order
    # A job that read and wrote nothing says so.
    page.goto("/ui/#/jobs")
    page.get_by_role("button", name="nightly.<b>load</b>").click()
    expect(page.locator("#job-inputs")).to_contain_text("Its runs read no dataset.")
    expect(page.locator("#job-outputs")).to_contain_text("Its runs wrote no dataset.")
    # The written dataset opens its page, by keyboard.
    page.goto(f"/ui/#/jobs/{job_id}")
    link = writes.first.get_by_role("link", name="memory.default.nation_copy")
    link.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#detail-heading")).to_have_text("memory.default.nation_copy")


def test_jobs_by_latest_run_state_user_and_namespace(page: Page, seeded: Server) -> None:
    page.goto("/ui/#/jobs")
    rows = page.locator("#jobs tbody tr[data-name]")
    expect(rows).to_have_count(3)

    def names() -> list[str]:
        return rows.evaluate_all("rs => rs.map(r => r.dataset.name)")

    with_api = {}
    with seeded.client() as http:
        for key, params in {
            "name": {},
            "latest": {"sort": "latest_run"},
            "failed": {"state": "FAIL,ABORT"},
            "alice": {"user": "alice"},
            "airflow": {"namespace": "airflow"},
        }.items():
            with_api[key] = [j["name"] for j in http.get("/api/v1/jobs", params=params).json()["jobs"]]
    assert names() == with_api["name"]
    page.get_by_label("Order").select_option("latest_run")
    expect(rows.first).to_have_attribute("data-name", with_api["latest"][0])
    assert names() == with_api["latest"] and with_api["latest"] != with_api["name"]
    page.get_by_label("State of the latest run").select_option(label="Failed or aborted")
    expect(rows).to_have_count(1)
    fail = load_fixture(FIXTURES / "trino" / "05-select-runtime-fail.json")
    assert names() == with_api["failed"] == [fail["job"]["name"]]
    page.get_by_label("State of the latest run").select_option("")
    page.get_by_label("User of the latest run").fill("alice")
    expect(rows).to_have_count(2)
    assert sorted(names()) == sorted(with_api["alice"])
    page.get_by_label("User of the latest run").fill("")
    # The namespace is a choice of those with jobs, not a string to type.
    options = page.locator("#job-namespace option").evaluate_all("os => os.map(o => o.value)")
    assert options == ["", "airflow", "trino://localhost:8080"]
    page.get_by_label("Scheduler or engine").select_option("airflow")
    expect(rows).to_have_count(1)
    assert names() == with_api["airflow"] == ["nightly.<b>load</b>"]
