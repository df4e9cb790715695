"""The mission's acceptance check: datasets of real Trino queries are on the Cockpit view, in a
real Chromium, over TLS."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

from tests.e2e.conftest import LineageTarget
from tests.support.browser import ARTIFACTS, CHROMIUM, leaf_pem, spki_pin
from tests.support.certs import TLSFiles


def test_trino_datasets_are_on_the_view(e2e_lineage_target: LineageTarget, tls_files: TLSFiles) -> None:
    target = e2e_lineage_target
    assert Path(CHROMIUM).exists(), f"Chromium is needed at {CHROMIUM}"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", f"--ignore-certificate-errors-spki-list={spki_pin(leaf_pem(tls_files))}"],
        )
        try:
            page = browser.new_page(base_url=target.service_url, viewport={"width": 1280, "height": 800})
            page.goto("/ui/")
            page.get_by_label("Namespace").select_option(target.namespace)
            for name in ("tpch.tiny.nation", "tpch.tiny.region", target.table):
                row = page.locator(f'#datasets tbody tr[data-name="{name}"]')
                expect(row).to_be_visible()
                expect(row).to_contain_text(target.namespace)
            written = page.locator(f'#datasets tbody tr[data-name="{target.table}"] td').nth(5)
            expect(written).not_to_have_text("0")  # the CTAS and the INSERT wrote it
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "trino-datasets.png"), full_page=True)

            page.get_by_role("button", name=target.table).click()
            expect(page).to_have_url(re.compile(r"#/datasets/\d+$"))
            expect(page.locator("#events tbody tr", has_text="written").first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "trino-dataset-detail.png"), full_page=True)
        finally:
            browser.close()
