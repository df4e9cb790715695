"""The search box in a real Chromium, against the real server and PostgreSQL: one box on every page
(GET /search), typed hits in the API's order (exact, prefix, substring), each opening its page:
a dataset, a job, a field (its dataset, with the field traced); hostile names as text."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import FIXTURES, load_fixture
from tests.support.browser import ARTIFACTS
from tests.support.servers import Server

HOSTILE = "<img src=x onerror=alert(1)>\u202eevil"


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    events: list[dict[str, Any]] = [
        load_fixture(FIXTURES / "trino" / f) for f in ("03-ctas-start.json", "04-ctas-complete.json")
    ]
    events.append(
        {
            "eventTime": "2024-03-01T10:00:00Z",
            "eventType": "COMPLETE",
            "run": {"runId": "search-seed"},
            "job": {"namespace": "airflow", "name": "nation_report"},
            "inputs": [{"namespace": "trino://localhost:8080", "name": "memory.default.nation_copy"}],
            "outputs": [
                {
                    "namespace": "postgres://db:5432",
                    "name": "reports.public.nation",
                    "facets": {
                        "symlinks": {
                            "identifiers": [
                                {"namespace": "hive://metastore:9083", "name": "archive.r1", "type": "TABLE"}
                            ]
                        }
                    },
                },
                {"namespace": "postgres://db:5432", "name": HOSTILE},
            ],
        }
    )
    with server.client() as http:
        for body in events:
            response = http.post("/api/v1/lineage", json=body)
            assert response.status_code in (200, 201), response.text
    return server


def search(server: Server, q: str) -> list[dict[str, Any]]:
    with server.client() as http:
        response = http.get("/api/v1/search", params={"q": q})
        assert response.status_code == 200, response.text
        return response.json()["results"]


def hits(page: Page) -> list[tuple[str, str]]:
    return [
        tuple(h)
        for h in page.locator("#search-results > li.hit").evaluate_all(
            "hs => hs.map(h => [h.dataset.type, h.dataset.name])"
        )
    ]


def test_typed_hits_in_the_apis_order_each_opening_its_page(page: Page, seeded: Server) -> None:
    page.goto("/ui/#/jobs")
    box = page.get_by_label("Search datasets, jobs and fields")
    box.fill("nation")
    want = search(seeded, "nation")
    assert {r["type"] for r in want} == {"dataset", "job", "field"}  # nationkey is a field
    expect(page.locator("#search-results > li.hit")).to_have_count(len(want))
    assert hits(page) == [(r["type"], r["field"] if r["type"] == "field" else r["name"]) for r in want]
    assert want[0]["match"] == "exact"  # reports.public.nation: its last part is the word searched
    first = page.locator("#search-results > li.hit").first
    expect(first.locator(".badge.hit-type")).to_have_text("dataset")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "search.png"))
    # A dataset hit opens its page, and the results close.
    page.locator('#search-results li[data-type="dataset"][data-name="memory.default.nation_copy"] a').click()
    expect(page.locator("#detail-heading")).to_have_text("memory.default.nation_copy")
    expect(page.locator("#search-panel")).to_be_hidden()
    # A job hit, by keyboard.
    box.fill("nation_report")
    job = page.locator('#search-results li[data-type="job"] a')
    expect(page.locator("#search-results > li.hit")).to_have_count(1)
    expect(job).to_be_visible()
    expect(job).to_have_text("nation_report")
    box.focus()
    page.keyboard.press("Tab")
    expect(job).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#job-heading")).to_have_text("nation_report")
    # Its page leads with what it read and wrote, each with its other names (symlinks).
    expect(page.locator("#job-inputs li")).to_have_count(1)
    written = page.locator('#job-outputs li[data-name="reports.public.nation"]')
    expect(written.locator(".also-named")).to_have_text("also named hive://metastore:9083 · archive.r1 TABLE")
    written.locator(".also-named a").click()
    expect(page.locator("#detail-heading")).to_have_text("archive.r1")


def test_a_field_hit_opens_its_dataset_with_the_field_traced(page: Page, seeded: Server) -> None:
    page.goto("/ui/")
    page.get_by_label("Search datasets, jobs and fields").fill("regionkey")
    want = search(seeded, "regionkey")
    fields = [r for r in want if r["type"] == "field"]
    assert len(fields) == 1 and fields[0]["field"] == "regionkey"
    copy = next(d for d in fields[0]["datasets"] if d["name"] == "memory.default.nation_copy")
    hit = page.locator('#search-results li[data-type="field"][data-name="regionkey"]')
    expect(hit.locator(".badge.hit-type")).to_have_text("field")
    hit.locator(f'a[data-id="{copy["id"]}"]').click()
    expect(page).to_have_url(re.compile(rf"#/datasets/{copy['id']}/fields/regionkey$"))
    expect(page.locator("#detail-heading")).to_have_text("memory.default.nation_copy")
    expect(page.locator('#fields-table button[data-field="regionkey"]')).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#field-trace-edges tbody tr")).to_have_count(1)
    expect(page.locator("#field-trace-edges tbody tr")).to_contain_text("tpch.tiny.nation.regionkey")


def test_hostile_names_in_hits_are_text_and_escape_closes(page: Page, seeded: Server) -> None:
    page.goto("/ui/")
    box = page.get_by_label("Search datasets, jobs and fields")
    box.fill("onerror")
    hit = page.locator("#search-results > li.hit")
    expect(hit).to_have_count(1)
    assert page.locator("#search-results img").count() == 0
    expect(hit.locator("a")).to_have_text("<img src=x onerror=alert(1)>⟨U+202E⟩evil")
    expect(hit.locator(".hit-match")).to_have_text("contains it")
    # Down to the hit, up back to the box.
    box.press("ArrowDown")
    expect(hit.locator("a")).to_be_focused()
    page.keyboard.press("ArrowDown")  # the last stop: stays
    expect(hit.locator("a")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(box).to_be_focused()
    box.press("Escape")
    expect(page.locator("#search-panel")).to_be_hidden()
    expect(box).to_be_focused()
    box.fill("no such name anywhere")
    expect(page.locator("#search-status")).to_have_text("Nothing is named like that.")
