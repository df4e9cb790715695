"""The datasets view in a real Chromium (Debian's), against the real server and PostgreSQL:
what a person sees when they search, filter, page and open a dataset."""

from __future__ import annotations

import io
import itertools
import json
import re
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import FIXTURES, Database, load_fixture
from tests.support.browser import ARTIFACTS
from tests.support.certs import TLSFiles
from tests.support.servers import Server, start_server


@pytest.fixture(scope="module")
def seeded(server: Server) -> Server:
    with server.client() as http:
        for name in ("03-ctas-start.json", "04-ctas-complete.json", "02-select-complete.json"):
            assert http.post("/api/v1/lineage", json=load_fixture(FIXTURES / "trino" / name)).status_code in (200, 201)
        spark = FIXTURES / "openlineage" / "compatibility-tests" / "spark_dataproc_simple_producer_test" / "4.json"
        assert http.post("/api/v1/lineage", json=load_fixture(spark)).status_code in (200, 201)
        tables = [{"namespace": "postgres://warehouse:5432", "name": f"sales.public.table_{i:03d}"} for i in range(120)]
        hostile = {"namespace": "postgres://warehouse:5432", "name": "<img src=x onerror=alert(1)>\u202eevil"}
        batch = {
            "eventTime": "2024-03-01T10:00:00Z",
            "eventType": "COMPLETE",
            "run": {"runId": "ui-seed"},
            "job": {"namespace": "ui", "name": "seed"},
            "inputs": [*tables, hostile],
        }
        assert http.post("/api/v1/lineage", json=batch).status_code == 201
    return server


def rows(page: Page) -> list[str]:
    return page.locator("#datasets tbody tr[data-name]").evaluate_all("rs => rs.map(r => r.dataset.name)")


def open_by_keyboard(page: Page, search: str, name: str) -> None:
    """Search the list for a dataset, and open it with the keyboard from its button."""
    page.goto("/ui/")
    page.get_by_label("Search by name").fill(search)
    button = page.get_by_role("button", name=name)
    expect(button).to_be_visible()
    button.focus()
    page.keyboard.press("Enter")


def test_the_list_shows_every_dataset_with_its_facts(page: Page) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/ui/$"))
    expect(page.locator("#status")).to_contain_text("Showing 50 datasets")
    keys = page.locator("#datasets tbody tr[data-name]").evaluate_all(
        "rs => rs.map(r => [r.dataset.namespace, r.dataset.name])"
    )
    assert len(keys) == 50 and keys == sorted(keys)  # keyset order: namespace, then name
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "datasets-list.png"), full_page=True)
    page.get_by_label("Namespace").select_option("trino://localhost:8080")
    nation = page.locator('#datasets tbody tr[data-name="tpch.tiny.nation"]')
    expect(nation).to_contain_text("trino://localhost:8080")
    expect(nation.locator("td").nth(2)).to_have_text("trino")
    expect(nation.locator("td").nth(4)).to_have_text("2")  # read by the CTAS and the SELECT
    expect(nation.locator("td").nth(5)).to_have_text("0")
    copy = page.locator('#datasets tbody tr[data-name="memory.default.nation_copy"]')
    expect(copy.locator("td").nth(5)).to_have_text("1")  # written by the CTAS
    page.screenshot(path=str(ARTIFACTS / "datasets-trino.png"), full_page=True)


def test_hostile_names_are_text_not_markup(page: Page) -> None:
    page.goto("/ui/")
    page.get_by_label("Search by name").fill("onerror")
    expect(page.locator("#datasets tbody tr[data-name]")).to_have_count(1)
    assert page.locator("#datasets img").count() == 0
    expect(page.locator("#datasets tbody td.name button")).to_contain_text("<img src=x onerror=alert(1)>")


def test_search_filter_and_empty_state(page: Page) -> None:
    page.goto("/ui/")
    page.get_by_label("Search by name").fill("NATION")
    expect(page.locator("#datasets tbody tr[data-name]")).to_have_count(2)
    expect(page.locator('#datasets tbody tr[data-name="memory.default.nation_copy"]')).to_be_visible()
    assert set(rows(page)) == {"tpch.tiny.nation", "memory.default.nation_copy"}
    page.get_by_label("Search by name").fill("")
    page.get_by_label("Scheme").select_option("hive")
    expect(page.locator('#datasets tbody tr[data-name="default.t1"]')).to_be_visible()
    expect(page.locator("#datasets tbody tr[data-name]")).to_have_count(2)
    assert set(rows(page)) == {"default.t1", "default.t2"}
    expect(page.locator("#datasets tbody .badge.symlink").first).to_have_text("symlink")
    page.get_by_label("Scheme").select_option("")
    page.get_by_label("Search by name").fill("no dataset is called this")
    expect(page.locator("#datasets tbody")).to_contain_text("No datasets match these filters.")


def test_paging_through_the_list(page: Page) -> None:
    page.goto("/ui/")
    page.get_by_label("Namespace").select_option("postgres://warehouse:5432")
    page.get_by_label("Per page").select_option("25")
    expect(page.locator("#datasets tbody tr[data-name]")).to_have_count(25)
    seen = rows(page)
    for number in range(2, 6):
        page.get_by_role("button", name="Next →").click()
        expect(page.locator("#page-label")).to_have_text(f"Page {number}")
        expect(page.locator("#datasets tbody tr[data-name]").first).not_to_have_attribute("data-name", seen[-25])
        seen += rows(page)
    assert len(seen) == 121 and len(set(seen)) == 121
    expect(page.get_by_role("button", name="Next →")).to_be_disabled()
    page.get_by_role("button", name="← Previous").click()
    expect(page.locator("#page-label")).to_have_text("Page 4")
    assert rows(page) == seen[75:100]


def test_opening_a_dataset_by_keyboard_shows_symlinks_and_events(page: Page) -> None:
    open_by_keyboard(page, "warehouse/t1", "/user/hive/warehouse/t1")
    expect(page).to_have_url(re.compile(r"#/datasets/\d+$"))
    expect(page.locator("#detail-heading")).to_have_text("/user/hive/warehouse/t1")
    expect(page.locator("#detail-heading")).to_be_focused()
    expect(page.locator("#symlinks")).to_contain_text("hive://dataproc-producer-test-m:9083 · default.t1")
    expect(page.locator("#events tbody tr")).to_have_count(1)
    expect(page.locator("#events tbody tr")).to_contain_text("COMPLETE")
    expect(page.locator("#events tbody tr")).to_contain_text("read")
    # The picture joins both tables to their Hive names with dashed symlink lines.
    expect(page.locator("#lineage-svg path.edge.symlink")).to_have_count(2)
    expect(page.locator("#lineage-svg path.edge.lineage")).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "dataset-detail.png"), full_page=True)

    page.locator("#symlinks").get_by_role("link", name=re.compile("default.t1")).click()
    expect(page.locator("#detail-heading")).to_have_text("default.t1")
    expect(page.locator("#symlink-of")).to_contain_text("/user/hive/warehouse/t1")
    page.keyboard.press("Escape")
    expect(page.locator("#list-view")).to_be_visible()


def test_dark_mode(browser: Browser, seeded: Server) -> None:
    context = browser.new_context(base_url=seeded.url, color_scheme="dark", viewport={"width": 1280, "height": 700})
    page = context.new_page()
    page.goto("/ui/")
    expect(page.locator("#datasets tbody tr[data-name]").first).to_be_visible()
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 22, 28)"
    page.screenshot(path=str(ARTIFACTS / "datasets-list-dark.png"))
    context.close()


def test_the_page_loads_nothing_from_elsewhere(page: Page, seeded: Server) -> None:
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto("/ui/")
    expect(page.locator("#datasets tbody tr[data-name]").first).to_be_visible()
    assert requested and all(url.startswith(seeded.url) for url in requested)
    with httpx.Client(verify=False) as http:  # headers only
        headers = http.get(f"{seeded.url}/ui/").headers
    assert "default-src 'self'" in headers["content-security-policy"]


def test_errors_are_shown_with_a_retry(browser: Browser, own_pg: Database, tls_files: TLSFiles, tmp_path: Path) -> None:
    server = start_server(own_pg.service_dsn, tls_files, tmp_path / "server.log", METASTORE_DB_TIMEOUT_MS="1000")
    context = browser.new_context(base_url=server.url)
    try:
        own_pg.server.stop("immediate")
        page = context.new_page()
        page.goto("/ui/")
        expect(page.locator("#status.error")).to_contain_text("retry later")
        expect(page.get_by_role("button", name="Retry")).to_be_visible()
        own_pg.server.start()
        # As a person would: retry until the service has reconnected (it does so by itself).
        deadline = time.monotonic() + 30
        empty = page.locator("#datasets tbody", has_text="No datasets match these filters.")
        while not empty.is_visible():
            assert time.monotonic() < deadline, "the view did not recover"
            retry = page.get_by_role("button", name="Retry")
            if retry.is_visible():
                retry.click()
            page.wait_for_timeout(500)
        expect(page.locator("#status")).not_to_have_class(re.compile("error"))
    finally:
        context.close()
        assert server.stop() == 0


def test_the_view_reads_the_json_api_cockpit_can_call(page: Page) -> None:
    # The list and detail are rendered from the JSON API, which is also what Cockpit can call directly.
    page.goto("/ui/")
    body = page.evaluate("fetch('../api/v1/datasets?limit=1').then(r => r.text())")
    assert json.loads(body)["datasets"][0]["id"] > 0


LOOK_ALIKES = {
    "nfc": "lookalike.café",
    "nfd": "lookalike.cafe\u0301",
    "plain": "lookalike.orders",
    "zwsp": "lookalike.or\u200bders",
    "rlo": "lookalike.\u202esredro",
    "bom": "lookalike.orders\ufeff",
    "trailing space": "lookalike.orders ",
    "nbsp": "lookalike.orders\u00a0",
    "literal marker": "lookalike.or\u27e8U+200B\u27e9ders",
}


def looks_same(png_a: bytes, png_b: bytes) -> bool:
    """Same size, and at most a few pixels differing by more than anti-aliasing noise."""
    from PIL import Image, ImageChops

    a, b = (Image.open(io.BytesIO(png)).convert("L") for png in (png_a, png_b))
    if a.size != b.size:
        return False
    return sum(ImageChops.difference(a, b).histogram()[65:]) <= 20


def test_look_alike_names_never_look_the_same(page: Page, seeded: Server) -> None:
    """Names kept as sent that differ only invisibly (NFC and NFD, zero-width, bidi override, other
    spaces) are drawn with markers, so no two rows render alike, in text or in pixels."""
    event = {
        "eventTime": "2024-03-02T10:00:00Z",
        "eventType": "COMPLETE",
        "run": {"runId": "ui-lookalike"},
        "job": {"namespace": "ui", "name": "lookalike"},
        "inputs": [{"namespace": "postgres://warehouse:5432", "name": n} for n in LOOK_ALIKES.values()],
    }
    with seeded.client() as http:
        assert http.post("/api/v1/lineage", json=event).status_code in (200, 201)
    page.goto("/ui/")
    page.get_by_label("Search by name").fill("lookalike.")
    names = page.locator("#datasets tbody tr[data-name] td.name button")
    expect(names).to_have_count(len(LOOK_ALIKES))
    stored = page.locator("#datasets tbody tr[data-name]").evaluate_all("rs => rs.map(r => r.dataset.name)")
    assert sorted(stored) == sorted(LOOK_ALIKES.values())  # kept as sent

    texts = {name: names.nth(i).inner_text() for i, name in enumerate(stored)}
    assert len(set(texts.values())) == len(LOOK_ALIKES), texts
    assert texts[LOOK_ALIKES["zwsp"]] == "lookalike.or\u27e8U+200B\u27e9ders"
    assert texts[LOOK_ALIKES["rlo"]] == "lookalike.\u27e8U+202E\u27e9sredro"
    assert texts[LOOK_ALIKES["nfd"]].endswith("\u27e8U+0301\u27e9\u27e8not NFC\u27e9")
    assert texts[LOOK_ALIKES["nfc"]] == "lookalike.café"
    assert texts[LOOK_ALIKES["literal marker"]] == "lookalike.or\u27e8U+27E8\u27e9U+200B\u27e9ders"
    rows_text = page.locator("#datasets tbody tr[data-name]").evaluate_all("rs => rs.map(r => r.innerText)")
    assert len(set(rows_text)) == len(LOOK_ALIKES)
    assert names.first.locator(".cp").count() + names.nth(1).locator(".cp").count() >= 1

    # In pixels: each name drawn alone. As plain text (the control) several pairs are
    # indistinguishable; as the view draws them, none is.
    def pixels(selector: str) -> dict[str, bytes]:
        cells = page.locator(selector)
        return {stored[i]: cells.nth(i).screenshot() for i in range(cells.count())}

    drawn = pixels("#datasets tbody tr[data-name] td.name button")
    for a, b in itertools.combinations(stored, 2):
        assert not looks_same(drawn[a], drawn[b]), (a, b)
    page.evaluate(
        """names => {
            const box = document.createElement("div");
            box.id = "plain-control";
            for (const name of names) {
                const span = document.createElement("span");
                span.style.cssText = "display:inline-block;font-weight:600;margin:4px";
                span.textContent = name;
                box.append(span, document.createElement("br"));
            }
            document.querySelector("main").prepend(box);
        }""",
        stored,
    )
    plain = pixels("#plain-control span")
    # E.g. (as drawn by this Chromium and its fonts): a zero-width space, or a trailing space.
    for kind in ("zwsp", "trailing space"):
        assert looks_same(plain[LOOK_ALIKES[kind]], plain[LOOK_ALIKES["plain"]]), kind
    page.evaluate("document.querySelector('#plain-control').remove()")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#datasets").screenshot(path=str(ARTIFACTS / "datasets-look-alike-names.png"))


def test_the_footer_shows_live_forwarding_and_its_lag(page: Page, module_db: Database) -> None:
    # Hidden while nothing is forwarded.
    page.goto("/ui/")
    expect(page.locator("#datasets tbody tr[data-name]").first).to_be_visible()
    expect(page.locator("#forwarding")).to_be_hidden()
    # A downstream that has acknowledged nothing yet and whose last attempt failed, as the
    # forwarder records it (metastore.forward_claim / forward_ack, as the service role).
    with psycopg.connect(module_db.service_dsn, autocommit=True) as conn:
        conn.execute("SELECT * FROM metastore.forward_claim('https://downstream.example:5000', 'ui-test', 60)")
        conn.execute(
            "SELECT metastore.forward_ack(%s, 'ui-test', NULL, 0, 0, 'connection refused')",
            ("https://downstream.example:5000",),
        )
    page.reload()
    footer = page.locator("#forwarding")
    expect(footer).to_be_visible()
    expect(footer).to_contain_text("Forwarding to https://downstream.example:5000:")
    expect(footer).to_contain_text("behind, 0 events sent · last error: connection refused")
    ARTIFACTS.mkdir(exist_ok=True)
    footer.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "forwarding-footer.png"))


def test_a_dataset_shows_its_fields_their_sources_and_its_lineage(page: Page) -> None:
    open_by_keyboard(page, "nation_copy", "memory.default.nation_copy")
    expect(page.locator("#detail-heading")).to_have_text("memory.default.nation_copy")
    fields = page.locator("#fields-table tbody tr")
    expect(fields).to_have_count(4)
    expect(fields.first).to_contain_text("nationkey")
    expect(fields.first).to_contain_text("bigint")
    expect(fields.first).to_contain_text("tpch.tiny.nation.nationkey")
    expect(page.locator("#upstream")).to_contain_text("trino://localhost:8080 · tpch.tiny.nation")
    expect(page.locator("#downstream")).to_contain_text("No job that read it wrote another dataset.")
    page.screenshot(path=str(ARTIFACTS / "dataset-lineage.png"), full_page=True)

    # Upstream by keyboard: its page lists the copy downstream.
    link = page.locator("#upstream").get_by_role("link", name=re.compile("tpch.tiny.nation"))
    link.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#detail-heading")).to_have_text("tpch.tiny.nation")
    expect(page.locator("#downstream")).to_contain_text("memory.default.nation_copy")
    expect(page.locator("#fields-table tbody tr")).to_have_count(4)
