"""The view in a Cockpit-sized panel, in a real Chromium against the real server and PostgreSQL:
from 700 px up no table is wider than its panel and no cell's content wider than its cell, the
name column keeps a readable width, names wrap only after separators (never inside a port or a
table name), timestamps move under the name when the panel is narrow, every page has its own
title and heading, what an event did not send is a dash, and the favicon loads.

Screenshots at 700, 900 and 1280 px go to test-artifacts/ (the README's are copies in docs/img/)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.conftest import FIXTURES, load_fixture
from tests.support.browser import ARTIFACTS
from tests.support.servers import Server

WIDTHS = (700, 900, 1280)
MIN_NAME_PX = 180
# Where a name may wrap: after what visibleName marks (separators, underscores in a long part) and
# where the browser itself may (a space, a hyphen).
BREAK_AFTER = set("./:@?&=,;_- ")

PG = "postgres://postgres:5432"
LAKE = "s3://data-lake-production-eu-central-1"
SCHEDULER = "airflow://scheduler.data-platform.svc.cluster.local:8080"
ROLLUP = "nightly_revenue_rollup.load_monthly_revenue_by_customer_segment"


def event(n: int, job: dict[str, Any], inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "eventTime": f"2024-03-0{n}T10:00:00Z",
        "eventType": "COMPLETE",
        "run": {"runId": f"01900000-0000-7000-8000-00000000000{n}"},
        "job": job,
        "inputs": inputs,
        "outputs": outputs,
    }


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    events = [load_fixture(FIXTURES / "trino" / n) for n in ("03-ctas-start.json", "04-ctas-complete.json")]
    events += [load_fixture(FIXTURES / "trino" / "05-select-runtime-fail.json")]
    events.append(
        event(
            1,
            {"namespace": SCHEDULER, "name": ROLLUP},
            [
                {"namespace": PG, "name": "analytics.public.monthly_revenue_by_customer_segment"},
                {"namespace": PG, "name": "analytics.public.customers"},
            ],
            [{"namespace": LAKE, "name": "/warehouse/reports/monthly_revenue_by_customer_segment/2024/03"}],
        )
    )
    # No scheme, no authority, no job type, no user: the view shows dashes.
    events.append(
        event(2, {"namespace": "manual", "name": "untyped"}, [], [{"namespace": "warehouse", "name": "orders"}])
    )
    with server.client() as http:
        for body in events:
            response = http.post("/api/v1/lineage", json=body)
            assert response.status_code in (200, 201), response.text
    return server


def dataset_id(server: Server, namespace: str, name: str) -> int:
    with server.client() as http:
        found = http.get("/api/v1/datasets", params={"namespace": namespace}).json()["datasets"]
    return next(d["id"] for d in found if d["name"] == name)


def job_id(server: Server, name: str) -> int:
    with server.client() as http:
        found = http.get("/api/v1/jobs", params={"q": name}).json()["jobs"]
    return next(j["id"] for j in found if j["name"] == name)


def assert_fits(view: Page) -> None:
    """Nothing wider than the window, no table wider than its frame, no cell's content wider than the cell."""
    facts = view.evaluate(
        """() => {
            const visible = (e) => e.getClientRects().length > 0;
            const cells = [...document.querySelectorAll('table th, table td')].filter(visible);
            return {
                page: [document.documentElement.scrollWidth, window.innerWidth],
                wraps: [...document.querySelectorAll('.table-wrap')].filter(visible)
                    .map((w) => [w.scrollWidth, w.clientWidth]),
                cells: cells.filter((c) => c.scrollWidth > c.clientWidth + 1)
                    .map((c) => `${c.closest('table').id}: ${c.textContent} (${c.scrollWidth} > ${c.clientWidth})`),
            };
        }"""
    )
    assert facts["page"][0] <= facts["page"][1], facts["page"]
    assert all(scroll <= client for scroll, client in facts["wraps"]), facts["wraps"]
    assert facts["cells"] == []


BREAKS = """(root) => {
    // Each place a line ends inside the element: [the character before, the one after].
    const chars = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.data.length; i += 1) {
            const range = document.createRange();
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const rect = range.getClientRects()[0];
            if (rect && rect.width > 0) chars.push([node.data[i], rect.top]);
        }
    }
    const breaks = [];
    for (let i = 1; i < chars.length; i += 1) {
        if (chars[i][1] > chars[i - 1][1] + 2) breaks.push([chars[i - 1][0], chars[i][0]]);
    }
    return breaks;
}"""


def breaks(names: Locator) -> list[tuple[str, str, str]]:
    """Every line break inside the names given: (the name, the character before, the one after)."""
    found = []
    for i in range(names.count()):
        name = names.nth(i)
        found += [(name.text_content() or "", a, b) for a, b in name.evaluate(BREAKS)]
    return found


def assert_no_token_broken(names: Locator) -> list[tuple[str, str, str]]:
    found = breaks(names)
    assert names.count() > 0
    assert [b for b in found if b[1] not in BREAK_AFTER] == [], found
    return found


def lead_width(view: Page, table: str) -> float:
    return float(view.locator(f"{table} th.col-lead").evaluate("th => th.getBoundingClientRect().width"))


@pytest.mark.parametrize("width", WIDTHS)
def test_the_lists_fit_the_panel(page: Page, seeded: Server, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/ui/")
    rows = page.locator("#datasets tbody tr[data-name]")
    expect(rows.first).to_be_visible()
    expect(page.locator(f'#datasets tbody tr[data-namespace="{PG}"]').first).to_be_visible()
    assert_fits(page)
    assert lead_width(page, "#datasets") >= MIN_NAME_PX
    found = assert_no_token_broken(page.locator("#datasets tbody .name-text:visible"))
    if width == 700:
        # Not vacuous: the namespace and the long names do wrap here, at their separators.
        assert any(name == PG for name, _, _ in found), found
        pg_breaks = [(a, b) for name, a, b in found if name == PG]
        assert all(a in "/:" for a, _ in pg_breaks), pg_breaks  # postgres:// | postgres: | 5432, never 543 | 2
    # Timestamps: their own columns when there is room, else under the name.
    first_seen = page.locator("#datasets thead th", has_text="First seen")
    facts = page.locator(f'#datasets tbody tr[data-namespace="{PG}"] td.name .facts').first
    if width >= 1200:
        expect(first_seen).to_be_visible()
        expect(facts).to_be_hidden()
    else:
        expect(first_seen).to_be_hidden()
        expect(facts).to_contain_text("Last seen: 2024-03-01")
    # The counts say what they count.
    expect(page.locator("#datasets thead th.col-count")).to_have_text(["Events reading it", "Events writing it"])
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"panel-datasets-{width}.png"), full_page=True)

    page.goto("/ui/#/jobs")
    expect(page.locator(f'#jobs tbody tr[data-name="{ROLLUP}"]')).to_be_visible()
    assert_fits(page)
    assert lead_width(page, "#jobs") >= MIN_NAME_PX
    assert_no_token_broken(page.locator("#jobs tbody .name-text:visible"))
    page.screenshot(path=str(ARTIFACTS / f"panel-jobs-{width}.png"), full_page=True)

    page.goto("/ui/#/queries")
    rollup = page.locator(f'#queries tbody tr[data-job="{ROLLUP}"]')
    expect(rollup).to_be_visible()
    expect(page.locator("#queries tbody tr[data-run]")).to_have_count(4)
    assert_fits(page)
    assert lead_width(page, "#queries") >= MIN_NAME_PX
    assert_no_token_broken(page.locator("#queries tbody .name-text:visible"))
    # The datasets it read and wrote keep their column; user and duration move under the name.
    expect(rollup.locator("td.io").nth(1)).to_contain_text("/warehouse/reports/monthly_revenue_by_customer_segment")
    user = page.locator("#queries thead th", has_text="User")
    if width >= 960:
        expect(user).to_be_visible()
    else:
        expect(user).to_be_hidden()
        expect(rollup.locator("td.name .facts")).to_contain_text("User:")
    page.screenshot(path=str(ARTIFACTS / f"panel-queries-{width}.png"), full_page=True)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_dataset_and_a_job_fit_the_panel(page: Page, seeded: Server, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    segment = dataset_id(seeded, LAKE, "/warehouse/reports/monthly_revenue_by_customer_segment/2024/03")
    page.goto(f"/ui/#/datasets/{segment}")
    expect(page.locator("#lineage-svg a.node")).to_have_count(3)
    expect(page.locator("#dataset-runs .query")).to_have_count(1)
    assert_fits(page)
    assert_no_token_broken(page.locator("#detail-heading .name-text, #detail dl.props .name-text, #events .name-text"))
    page.screenshot(path=str(ARTIFACTS / f"panel-dataset-{width}.png"), full_page=True)

    # A field traced, the jobs drawn, the search's results: within the panel too.
    page.goto(f"/ui/#/datasets/{dataset_id(seeded, 'trino://localhost:8080', 'memory.default.nation_copy')}")
    page.locator('#fields-table button[data-field="regionkey"]').click()
    expect(page.locator("#field-trace-edges tbody tr")).to_have_count(1)
    page.get_by_label("Draw the jobs between them").check()
    expect(page.locator("#lineage-svg a.node.job")).to_have_count(1)
    page.get_by_label("Search datasets, jobs and fields").fill("nation")
    expect(page.locator("#search-results > li.hit").first).to_be_visible()
    assert_fits(page)
    panel = page.locator("#search-panel").evaluate(
        "p => [p.getBoundingClientRect().left, p.getBoundingClientRect().right]"
    )
    assert panel[0] >= 0 and panel[1] <= width, panel
    page.screenshot(path=str(ARTIFACTS / f"panel-field-trace-{width}.png"), full_page=True)

    page.goto(f"/ui/#/jobs/{job_id(seeded, ROLLUP)}")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    assert_fits(page)
    assert_no_token_broken(page.locator("#job-heading .name-text, #runs .name-text:visible"))
    page.screenshot(path=str(ARTIFACTS / f"panel-job-{width}.png"), full_page=True)


def test_every_page_has_its_own_title(page: Page, seeded: Server) -> None:
    heading = page.locator("h1")
    current = page.locator(".nav a[aria-current=page]")

    page.goto("/ui/")
    expect(page).to_have_title("Datasets · Metadata Store")
    expect(heading).to_have_text("Datasets")
    expect(current).to_have_text("Datasets")

    page.goto("/ui/#/jobs")
    expect(page).to_have_title("Jobs · Metadata Store")
    expect(heading).to_have_text("Jobs")
    expect(current).to_have_text("Jobs")

    page.goto("/ui/#/queries")
    expect(page).to_have_title("Queries · Metadata Store")
    expect(heading).to_have_text("Queries")
    expect(current).to_have_text("Queries")

    page.goto(f"/ui/#/jobs/{job_id(seeded, ROLLUP)}")
    expect(page).to_have_title(f"{ROLLUP} · Jobs · Metadata Store")
    expect(heading).to_have_text("Jobs")
    expect(page.locator("#job-heading")).to_have_text(ROLLUP)

    orders = dataset_id(seeded, "warehouse", "orders")
    page.goto(f"/ui/#/datasets/{orders}")
    expect(page).to_have_title("orders · Datasets · Metadata Store")
    expect(heading).to_have_text("Datasets")
    expect(current).to_have_text("Datasets")

    # Back and forth: each page sets its own again.
    page.go_back()
    expect(page).to_have_title(f"{ROLLUP} · Jobs · Metadata Store")
    page.locator("h1 a").click()  # the heading leads to its list
    expect(page).to_have_url(re.compile(r"#/jobs$"))
    expect(page).to_have_title("Jobs · Metadata Store")


def dash(cell: Locator) -> None:
    """A dash to the eye, words to a screen reader, and not the word "none"."""
    expect(cell.locator(".missing [aria-hidden=true]")).to_have_text("—")
    expect(cell.locator(".missing .visually-hidden")).not_to_be_empty()
    assert "none" not in cell.inner_text().replace(cell.locator(".missing .visually-hidden").inner_text(), "")


def test_what_was_not_sent_is_a_dash(page: Page, seeded: Server) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto("/ui/")
    orders = page.locator('#datasets tbody tr[data-namespace="warehouse"][data-name="orders"]')
    dash(orders.locator("td.scheme"))
    orders.locator("td.name button").click()
    dash(page.locator("#detail-scheme"))
    dash(page.locator("#detail-authority"))
    expect(page.locator("#detail")).not_to_contain_text("none")

    page.goto("/ui/#/jobs")
    untyped = page.locator('#jobs tbody tr[data-name="untyped"]')
    dash(untyped.locator("td.user"))
    dash(untyped.locator("td").nth(2))  # type
    untyped.locator("td.name button").click()
    dash(page.locator("#job-type"))
    dash(page.locator("#runs tbody td.user"))
    expect(page.locator("#job-detail")).not_to_contain_text("not sent")

    page.goto("/ui/#/queries")
    untyped = page.locator('#queries tbody tr[data-job="untyped"]')
    dash(untyped.locator("td.user"))
    dash(untyped.locator("td.num"))  # no START: no duration
    dash(untyped.locator("td.io").nth(0))  # read nothing


def test_the_favicon_loads(page: Page, seeded: Server) -> None:
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto("/ui/")
    expect(page.locator("#datasets tbody tr[data-name]").first).to_be_visible()
    href = page.locator("link[rel=icon]").evaluate("l => l.href")
    assert href == f"{seeded.url}/ui/favicon.svg"
    icon = page.evaluate(
        """async (href) => {
            const response = await fetch(href);
            const image = new Image();
            image.src = href;
            await image.decode();
            return [response.status, response.headers.get('content-type'), image.naturalWidth];
        }""",
        href,
    )
    assert icon == [200, "image/svg+xml", 32]
    assert failed == []
