"""The view's fixtures: one Chromium per module, a page per test that fails on any script error or
dialog. Each module seeds its own server (its `seeded` fixture), which `page` opens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.support.browser import CHROMIUM, leaf_pem, spki_pin
from tests.support.certs import TLSFiles
from tests.support.servers import Server
from tests.support.service_fixtures import client, module_db, module_serve, serve, server, tls_files  # noqa: F401


@pytest.fixture(scope="module")
def browser(tls_files: TLSFiles) -> Iterator[Browser]:  # noqa: F811 (tls_files: the fixture imported above)
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is needed at {CHROMIUM}: apt-get install chromium (or set METASTORE_CHROMIUM)")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", f"--ignore-certificate-errors-spki-list={spki_pin(leaf_pem(tls_files))}"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, seeded: Server) -> Iterator[Page]:
    context = browser.new_context(base_url=seeded.url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: errors.append(f"dialog: {dialog.message}"))
    yield page
    context.close()
    assert errors == [], errors
