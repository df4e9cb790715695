"""A page of another origin cannot make a visitor's browser post lineage.

A browser sends a cross-origin POST without asking the server first (no CORS preflight) only
with a "simple" media type: text/plain, a form encoding or multipart. The service takes JSON
media types only, so each such request gets a 415 and stores nothing. Run in Debian's
Chromium against the real server, from a page served by another origin (plain HTTP on
127.0.0.1, while the service is https://localhost)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

from tests.conftest import Database
from tests.support.checks import count_events
from tests.support.origins import another_origin
from tests.support.servers import Server

FORM_PAGE = """<!doctype html><html><body>
<form id="attack" method="POST" action="{target}" enctype="{enctype}">
  <input type="hidden" name='{field_name}' value='{field_value}'>
  <button type="submit">win a prize</button>
</form></body></html>"""


@pytest.fixture(scope="module")
def attacker() -> Iterator[dict[str, str]]:
    """Another origin: pages are put in the dict by path, served over plain HTTP."""
    with another_origin() as pages:
        yield pages


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    yield context.new_page()
    context.close()


def forged(name: str) -> str:
    return json.dumps(
        {"eventTime": "2024-01-01T00:00:00Z", "eventType": "COMPLETE", "job": {"namespace": "csrf", "name": name}}
    )


@pytest.mark.parametrize("enctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_cross_site_form_post_stores_nothing(
    page: Page, attacker: dict[str, str], server: Server, module_db: Database, enctype: str
) -> None:
    name = f"form-{uuid.uuid4().hex[:8]}"
    body = forged(name)
    # text/plain sends name=value: a name holding the JSON up to a last member, and a value that
    # closes it, make the body exactly a JSON event: {..., "pad": "="}.
    field_name, field_value = body[:-1] + ', "pad": "', '"}'
    attacker["/form.html"] = FORM_PAGE.format(
        target=f"{server.url}/api/v1/lineage", enctype=enctype, field_name=field_name, field_value=field_value
    )
    page.goto(attacker["origin"] + "/form.html")
    with page.expect_response(lambda r: r.url.endswith("/api/v1/lineage")) as answer:
        page.click("button")
    response = answer.value
    assert response.status == 415
    assert "application/json" in response.json()["error"]["message"]  # says what to send
    assert count_events(module_db, name) == 0


@pytest.mark.parametrize("content_type", ["text/plain", "text/plain;charset=UTF-8", None])
def test_a_cross_site_no_cors_fetch_stores_nothing(
    page: Page, attacker: dict[str, str], server: Server, module_db: Database, content_type: str | None
) -> None:
    name = f"fetch-{uuid.uuid4().hex[:8]}"
    attacker["/blank.html"] = "<!doctype html><title>nothing to see</title>"
    page.goto(attacker["origin"] + "/blank.html")
    with page.expect_response(lambda r: r.url.endswith("/api/v1/lineage")) as answer:
        page.evaluate(
            """([url, body, type]) => fetch(url, {method: 'POST', mode: 'no-cors', body,
                 headers: type ? {'Content-Type': type} : {}})""",
            [f"{server.url}/api/v1/lineage", forged(name), content_type],
        )
    assert answer.value.status == 415  # the request got there, and was refused
    assert count_events(module_db, name) == 0


def test_a_cross_site_json_fetch_is_stopped_by_the_browser(
    page: Page, attacker: dict[str, str], server: Server, module_db: Database
) -> None:
    """With application/json the browser must ask first (a preflight), and the service grants no
    other origin: the POST itself is never sent."""
    name = f"cors-{uuid.uuid4().hex[:8]}"
    attacker["/blank.html"] = "<!doctype html><title>nothing to see</title>"
    page.goto(attacker["origin"] + "/blank.html")
    outcome = page.evaluate(
        """([url, body]) => fetch(url, {method: 'POST', body, headers: {'Content-Type': 'application/json'}})
                 .then(r => 'answered ' + r.status, e => 'blocked: ' + e.name)""",
        [f"{server.url}/api/v1/lineage", forged(name)],
    )
    assert outcome.startswith("blocked")
    assert count_events(module_db, name) == 0


def test_the_same_event_from_a_real_client_is_stored(server: Server, module_db: Database) -> None:
    """The control: the forged body itself is a valid event, stored when posted as JSON."""
    name = f"control-{uuid.uuid4().hex[:8]}"
    with server.client() as http_client:
        answer = http_client.post("/api/v1/lineage", content=forged(name))
    assert answer.status_code == 201, answer.text
    assert count_events(module_db, name) == 1
    # And the +json media types are JSON too.
    name = f"control-{uuid.uuid4().hex[:8]}"
    with server.client(headers={"Content-Type": "Application/Vnd.OpenLineage+JSON; charset=utf-8"}) as plain:
        assert plain.post("/api/v1/lineage", content=forged(name)).status_code == 201
