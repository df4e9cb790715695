"""The view as Cockpit shows it: behind a real reverse proxy (Debian's nginx) under the path
prefix /api/services/metadata-store/, in Debian's Chromium, against the real server and PostgreSQL.

- Through a proxy that rewrites nothing but the prefix (not even a Location): the root and /ui
  lead to the view, and the list, a dataset, its lineage, the jobs, a job and a POST all work;
  nginx's own log shows no request left the prefix.
- Through a proxy that does what Cockpit's does (drops CSP, X-Frame-Options, Set-Cookie, the
  browser's Origin and Referer; adds its script to the HTML), from Cockpit's bookmark page, which
  frames it: the same.
- In a frame of a page of another origin: shown when METASTORE_FRAME_ANCESTORS names that origin,
  refused by the browser without it.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Frame, FrameLocator, Page, expect

from tests.conftest import FIXTURES, load_fixture
from tests.support.browser import ARTIFACTS
from tests.support.certs import TLSFiles
from tests.support.origins import another_origin
from tests.support.servers import Server
from tests.support.service_fixtures import Serve
from tests.ui import nginx

PREFIX = nginx.PREFIX


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    with server.client() as http_client:
        for name in ("03-ctas-start.json", "04-ctas-complete.json", "02-select-complete.json"):
            response = http_client.post("/api/v1/lineage", json=load_fixture(FIXTURES / "trino" / name))
            assert response.status_code in (200, 201), response.text
    return server


@pytest.fixture(scope="module")
def other_origin() -> Iterator[dict[str, str]]:
    """A site of another origin (http://127.0.0.1:<port>): pages by path, put in this dict."""
    with another_origin() as pages:
        yield pages


@pytest.fixture(scope="module")
def framed_store(module_serve: Serve, other_origin: dict[str, str]) -> Server:
    """The same store, run by an operator who lets the other origin frame the view."""
    return module_serve(METASTORE_FRAME_ANCESTORS=f"'self' {other_origin['origin']}")


@pytest.fixture(scope="module")
def proxy(
    seeded: Server, framed_store: Server, tls_files: TLSFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[nginx.Nginx]:
    upstream = f"https://127.0.0.1:{seeded.port}"
    sites = [
        nginx.Site("prefix", upstream),
        nginx.Site("cockpit", upstream),
        nginx.Site("framed", f"https://127.0.0.1:{framed_store.port}"),
    ]
    running = nginx.start(tmp_path_factory.mktemp("nginx"), sites, tls_files.ca)
    yield running
    running.stop()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield context
    context.close()
    assert errors == [], errors


def lineage_event(name: str) -> dict[str, Any]:
    return {
        "eventTime": "2024-05-01T10:00:00Z",
        "eventType": "COMPLETE",
        "run": {"runId": str(uuid.uuid4())},
        "job": {"namespace": "through-the-proxy", "name": name},
        "inputs": [{"namespace": "trino://localhost:8080", "name": "tpch.tiny.nation"}],
        "outputs": [{"namespace": "trino://localhost:8080", "name": f"memory.default.{name}"}],
    }


def watched_page(context: BrowserContext) -> tuple[Page, list[str], list[str]]:
    """A new page, the URL of every request it makes, and each answer of 400 or above it got."""
    page = context.new_page()
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return page, seen, failed


def walk_the_view(view: Page | FrameLocator, frame: Page | Frame, screenshot: str | None = None) -> None:
    """List, a dataset, its lineage (a box opens another dataset), the jobs, a job, a POST made by
    the page itself, which then shows up in the list, the Queries page and the search box."""
    rows = view.locator("#datasets tbody tr[data-name]")
    expect(view.locator("#status")).to_contain_text("Showing")
    expect(view.locator('#datasets tbody tr[data-name="tpch.tiny.nation"]')).to_be_visible()
    view.get_by_role("button", name="memory.default.nation_copy").click()
    expect(view.locator("#detail-heading")).to_have_text("memory.default.nation_copy")
    expect(view.locator("#fields-table tbody tr")).to_have_count(4)
    expect(view.locator("#lineage-svg a.node")).to_have_count(2)
    view.locator("#lineage-svg a.node:not(.current)").click()
    expect(view.locator("#detail-heading")).to_have_text("tpch.tiny.nation")
    expect(view.locator("#lineage-svg a.node.current")).to_have_count(1)
    if screenshot:
        ARTIFACTS.mkdir(exist_ok=True)
        (frame.page if isinstance(frame, Frame) else frame).screenshot(path=str(ARTIFACTS / screenshot), full_page=True)
    view.get_by_role("link", name="Jobs", exact=True).click()
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    view.get_by_role("button", name=ctas["job"]["name"]).click()
    expect(view.locator("#job-sql pre.sql")).to_have_text(ctas["job"]["facets"]["sql"]["query"])

    name = f"posted_{uuid.uuid4().hex[:8]}"
    status = frame.evaluate(
        """async (body) => (await fetch('../api/v1/lineage', { method: 'POST', body,
                 headers: { 'Content-Type': 'application/json' } })).status""",
        json.dumps(lineage_event(name)),
    )
    assert status == 201
    view.get_by_role("link", name="Datasets", exact=True).click()
    view.get_by_label("Search by name").fill(name)
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-name", f"memory.default.{name}")
    # The Queries page and the search box, as the rest.
    view.get_by_role("link", name="Queries", exact=True).click()
    expect(view.locator(f'#queries tr[data-run="{ctas["run"]["runId"]}"] .badge.state')).to_have_text("COMPLETE")
    view.get_by_label("Search datasets, jobs and fields").fill("nation_copy")
    view.locator('#search-results li[data-type="dataset"] a').click()
    expect(view.locator("#detail-heading")).to_have_text("memory.default.nation_copy")
    # Everything the page asks for answered before the walk ends (nginx logs a request cut short).
    expect(view.locator("#lineage-svg a.node.current")).to_have_count(1)
    expect(view.locator("#dataset-runs .query")).to_have_count(1)


def test_the_redirects_are_relative_and_not_html(seeded: Server) -> None:
    """A proxy keeps its prefix on a relative Location; Cockpit's also rewrites it, into the same
    URL, because the answer is not marked as HTML."""
    with seeded.client() as http_client:
        for path in ("/", "/ui"):
            answer = http_client.get(path)
            assert answer.status_code == 302, path
            assert answer.headers["location"] == "ui/", path
            assert not answer.headers["content-type"].startswith("text/html"), path
    # Resolved as a browser does, under the prefix.
    for path in (PREFIX, PREFIX + "ui"):
        assert str(httpx.URL(f"http://proxy{path}").join("ui/")) == f"http://proxy{PREFIX}ui/"


def test_the_view_under_a_path_prefix(context: BrowserContext, proxy: nginx.Nginx) -> None:
    site = proxy.sites["prefix"]
    page, seen, failed = watched_page(context)
    # What the store answers, as this proxy passes it all on: nothing that Cockpit's would drop
    # and the view would miss (a cookie, a compressed body).
    headers: list[dict[str, str]] = []
    page.on("response", lambda r: headers.append(r.all_headers()))

    page.goto(f"{site.url}{PREFIX}")  # the root of the store, as Cockpit frames it
    expect(page).to_have_url(f"{site.url}{PREFIX}ui/")
    walk_the_view(page, page, screenshot="behind-a-proxy.png")
    page.goto(f"{site.url}{PREFIX}ui")  # /ui without its slash
    expect(page).to_have_url(f"{site.url}{PREFIX}ui/")
    expect(page.locator("#datasets tbody tr[data-name]").first).to_be_visible()

    assert failed == []
    assert headers and not [h for h in headers if "set-cookie" in h or "content-encoding" in h], headers
    assert seen and all(url.startswith(f"{site.url}{PREFIX}") for url in seen), seen
    # What nginx itself got: nothing outside the prefix, nothing refused.
    logged = proxy.requests("prefix")
    assert len(logged) >= len(seen)
    assert [r for r in logged if not r[1].startswith(PREFIX) or r[2] >= 400] == [], logged
    assert ("POST", f"{PREFIX}api/v1/lineage", 201) in logged


def test_the_view_in_cockpits_frame(context: BrowserContext, proxy: nginx.Nginx) -> None:
    """Cockpit's bookmark page frames /api/services/metadata-store/ from its own origin, through a
    proxy that drops the headers Cockpit's drops: the view depends on none of them."""
    site = proxy.sites["cockpit"]
    page = context.new_page()
    headers: dict[str, dict[str, str]] = {}
    page.on("response", lambda r: headers.setdefault(r.url, r.all_headers()))
    page.goto(f"{site.url}/cockpit/bookmark")
    view = page.frame_locator("#panel")
    expect(view.locator("#datasets tbody tr[data-name]").first).to_be_visible()
    frame = page.frame(url=re.compile(re.escape(PREFIX) + "ui/"))
    assert frame is not None
    index = headers[f"{site.url}{PREFIX}ui/"]
    assert "content-security-policy" not in index and "x-frame-options" not in index  # dropped, as Cockpit does
    assert frame.evaluate("document.head.firstElementChild.tagName") == "SCRIPT"  # Cockpit's, added to the HTML
    walk_the_view(view, frame, screenshot="cockpit-bookmark.png")


def test_another_origin_frames_the_view_only_when_allowed(
    context: BrowserContext, proxy: nginx.Nginx, other_origin: dict[str, str]
) -> None:
    allowed, refused = proxy.sites["framed"], proxy.sites["prefix"]
    other_origin["/panel.html"] = (
        "<!doctype html><title>another origin</title>"
        f"<iframe id=allowed src='{allowed.url}{PREFIX}' style='width:900px;height:600px'></iframe>"
        f"<iframe id=refused src='{refused.url}{PREFIX}' style='width:900px;height:600px'></iframe>"
    )
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.goto(other_origin["origin"] + "/panel.html")
    # Allowed: METASTORE_FRAME_ANCESTORS names this origin (the proxy passes the CSP on).
    shown = page.frame_locator("#allowed")
    expect(shown.locator('#datasets tbody tr[data-name="tpch.tiny.nation"]')).to_be_visible()
    shown.get_by_role("button", name="tpch.tiny.nation").click()
    expect(shown.locator("#detail-heading")).to_have_text("tpch.tiny.nation")
    expect(shown.locator("#lineage-svg a.node.current")).to_have_count(1)
    assert shown.locator("#lineage-svg a.node").count() >= 2
    # Refused: the default frame-ancestors 'self'; the browser shows its error page instead.
    frame = page.locator("#refused").element_handle().content_frame()
    assert frame is not None
    deadline = time.monotonic() + 10
    while not frame.url.startswith("chrome-error://") and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    assert frame.url.startswith("chrome-error://"), frame.url
    assert frame.locator("#datasets").count() == 0
    assert any("frame-ancestors" in line for line in console), console
    page.screenshot(path=str(ARTIFACTS / "framed-by-another-origin.png"))


def test_frame_ancestors_reach_the_browser_as_set(framed_store: Server, seeded: Server) -> None:
    with framed_store.client() as http_client:
        csp = http_client.get("/ui/").headers["content-security-policy"]
    assert re.search(r"frame-ancestors 'self' http://127\.0\.0\.1:\d+$", csp), csp
    with seeded.client() as http_client:
        assert http_client.get("/ui/").headers["content-security-policy"].endswith("frame-ancestors 'self'")


def test_the_queries_and_the_search_under_a_path_prefix(context: BrowserContext, proxy: nginx.Nginx) -> None:
    """The Queries page (its filters' namespaces, a page of runs, a dataset it wrote) and the search
    box (a typed hit that opens its page), with nothing asked outside the prefix."""
    site = proxy.sites["prefix"]
    page, seen, failed = watched_page(context)
    before = len(proxy.requests("prefix"))

    page.goto(f"{site.url}{PREFIX}")
    page.get_by_role("link", name="Queries", exact=True).click()
    rows = page.locator("#queries tbody tr[data-run]")
    expect(rows.first).to_be_visible()
    ctas = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
    row = page.locator(f'#queries tr[data-run="{ctas["run"]["runId"]}"]')
    expect(row.locator(".badge.state")).to_have_text("COMPLETE")
    expect(page.locator('#run-namespace option[value="trino://localhost:8080"]')).to_have_count(1)
    page.get_by_label("Engine or scheduler").select_option("trino://localhost:8080")
    page.get_by_label("User", exact=True).fill("alice")
    expect(row).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "queries-behind-a-proxy.png"), full_page=True)
    row.get_by_role("link", name="memory.default.nation_copy").click()
    expect(page.locator("#detail-heading")).to_have_text("memory.default.nation_copy")

    page.get_by_label("Search datasets, jobs and fields").fill("nation_copy")
    hit = page.locator('#search-results li[data-type="dataset"]')
    expect(hit).to_have_count(1)
    page.get_by_label("Search datasets, jobs and fields").fill(ctas["job"]["name"])
    job = page.locator('#search-results li[data-type="job"] a')
    expect(job).to_have_text(ctas["job"]["name"])
    job.click()
    expect(page.locator("#job-heading")).to_have_text(ctas["job"]["name"])
    expect(page.locator("#job-outputs li")).to_have_count(1)

    assert failed == []
    assert seen and all(url.startswith(f"{site.url}{PREFIX}") for url in seen), seen
    logged = proxy.requests("prefix")[before:]
    assert [r for r in logged if not r[1].startswith(PREFIX) or r[2] >= 400] == [], logged
    asked = {r[1].split("?")[0] for r in logged}
    assert {f"{PREFIX}api/v1/runs", f"{PREFIX}api/v1/namespaces", f"{PREFIX}api/v1/search"} <= asked, asked
