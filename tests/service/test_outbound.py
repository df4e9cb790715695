"""metastore.outbound against real HTTP servers started in the test: what each answer says about the
event (only 400 and 422 judge it), which redirects are followed and how, the budget of a send (its
timeout plus a second per MiB, held on the socket even against a server that trickles), and the
credentials of a URL taken out of everything shown."""

from __future__ import annotations

import base64
import threading
import time

import pytest

from metastore.outbound import Poster, Redactor, ingest_url, redact, secrets, target_key
from tests.service.receivers import Got, Receiver, Reply, trickle

EVENT = '{"eventType": "COMPLETE", "run": {"runId": "r"}}'


def answering(status: int, headers: dict[str, str] | None = None) -> Receiver:
    def script(got: Got) -> Reply:
        return Reply(status, b'{"said": "so"}', {"Content-Type": "application/json", **(headers or {})})

    return Receiver(script)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [(200, "sent"), (201, "sent"), (202, "sent"), (204, "sent"), (400, "refused"), (422, "refused")]
    + [(s, "failed") for s in (401, 403, 404, 405, 408, 409, 413, 415, 429, 500, 502, 503, 504)],
)
def test_only_a_400_or_a_422_judges_the_event(status: int, verdict: str) -> None:
    with answering(status) as receiver:
        answer = Poster(receiver.url + "/api/v1/lineage", verify=True, timeout=5).post(EVENT)
        [got] = receiver.requests()
    assert answer.verdict == verdict and answer.status == status
    assert (got.method, got.path, got.body) == ("POST", "/api/v1/lineage", EVENT.encode())
    assert answer.transient == (status in (408, 429) or status >= 500)


@pytest.mark.parametrize("status", [301, 302, 303, 300, 304])
def test_a_redirect_that_would_drop_the_method_or_the_body_is_not_followed(status: int) -> None:
    with answering(status, {"Location": "/elsewhere?token=s3cr3t-token"}) as receiver:
        answer = Poster(receiver.url, verify=True, timeout=5).post(EVENT)
        assert [g.method for g in receiver.requests()] == ["POST"]  # nothing else, no GET
    assert answer.verdict == "failed" and answer.status == status
    assert "not followed: only 307 and 308 keep the method and the body" in answer.describe()
    assert f"{receiver.url}/elsewhere?token=***" in answer.describe() and "s3cr3t" not in answer.describe()


@pytest.mark.parametrize("status", [307, 308])
def test_a_307_or_308_is_followed_with_the_body_and_the_basic_auth_on_the_same_origin_only(status: int) -> None:
    with Receiver(lambda got: Reply(201)) as other:

        def script(got: Got) -> Reply:
            if got.path == "/api/v1/lineage":
                return Reply(status, b"", {"Location": "/moved"})
            if got.path == "/moved":
                return Reply(status, b"", {"Location": other.url + "/final"})
            return Reply(500)

        with Receiver(script) as receiver:
            url = receiver.url.replace("http://", "http://bot:pw-77@") + "/api/v1/lineage"
            answer = Poster(url, verify=True, timeout=5).post(EVENT)
            first, moved = receiver.requests()
        [final] = other.requests()
    assert answer.verdict == "sent" and answer.url == f"{other.url}/final"
    assert [(g.method, g.path, g.body) for g in (first, moved, final)] == [
        ("POST", "/api/v1/lineage", EVENT.encode()),
        ("POST", "/moved", EVENT.encode()),
        ("POST", "/final", EVENT.encode()),
    ]
    basic = "Basic " + base64.b64encode(b"bot:pw-77").decode()
    assert first.headers["Authorization"] == moved.headers["Authorization"] == basic
    assert "Authorization" not in final.headers  # another origin


def test_redirects_that_leave_https_or_never_end_are_not_followed() -> None:
    with Receiver(lambda got: Reply(307, b"", {"Location": got.path + "x"})) as receiver:
        looping = Poster(receiver.url, verify=True, timeout=5).post(EVENT)
    assert looping.verdict == "failed" and looping.problem == "more than 5 redirects"
    leaving = Poster._unfollowed("https://h/a", "http://h/b", 307)
    assert leaving == "redirect to http://h/b not followed: it leaves https"


def test_a_send_gets_its_timeout_plus_a_second_per_mib_and_no_more() -> None:
    """A receiver that answers after 2.5 s: a small event (budget 1 s) gets no answer, an event of
    2 MiB (budget 3 s) gets its answer. One that trickles its answer for ever is cut at the budget,
    whatever the socket's own timeout."""

    def slow(got: Got) -> Reply:
        time.sleep(2.5)
        return Reply(201)

    with Receiver(slow) as receiver:
        poster = Poster(receiver.url, verify=True, timeout=1)
        started = time.monotonic()
        small = poster.post(EVENT)
        assert 0.9 < time.monotonic() - started < 2.4
        large = poster.post(EVENT[:-1] + ', "pad": "' + "x" * (2 << 20) + '"}')
    assert small.verdict == "failed" and small.problem == "no complete answer within 1.0 s"
    assert large.verdict == "sent"

    stop = threading.Event()
    try:
        headers = {"Content-Type": "application/json"}
        with Receiver(lambda got: Reply(201, b"", headers, chunks=trickle(b"{}", 0.3, stop))) as receiver:
            started = time.monotonic()
            trickled = Poster(receiver.url, verify=True, timeout=2).post(EVENT)
            elapsed = time.monotonic() - started
    finally:
        stop.set()
    # The status came at once; the body's bytes 0.3 s apart never end: cut at 2 s.
    assert 1.9 < elapsed < 4 and trickled.status is None and "within 2.0 s" in trickled.problem


def test_the_credentials_of_a_url_are_taken_out_of_what_is_shown() -> None:
    url = "https://lineage%2Dbot:p%40ss-w0rd@marquez:5000/base/?token=t0k3n-value&flag&x=1#frag"
    assert redact(url) == "https://marquez:5000/base/?token=***&***&x=***"
    assert target_key(url) == "https://marquez:5000/base?token=***&***&x=***"
    assert (
        ingest_url(url)
        == "https://lineage%2Dbot:p%40ss-w0rd@marquez:5000/base/api/v1/lineage?token=t0k3n-value&flag&x=1"
    )
    assert ingest_url("https://m:5000/api/v1/lineage/") == "https://m:5000/api/v1/lineage"
    found = set(secrets(url))
    assert {"p%40ss-w0rd", "p@ss-w0rd", "t0k3n-value", "flag", "lineage-bot"} <= found
    text = (
        "HTTPSConnectionPool(host='marquez', port=5000): Max retries exceeded with url: "
        "/base/api/v1/lineage?token=t0k3n-value&flag&x=1 (p@ss-w0rd, Basic "
        + base64.b64encode(b"lineage-bot:p@ss-w0rd").decode()
        + ")"
    )
    scrubbed = Redactor(url, ingest_url(url)).scrub(text)
    assert scrubbed == (
        "HTTPSConnectionPool(host='marquez', port=5000): Max retries exceeded with url: "
        "/base/api/v1/lineage?token=***&***&x=*** (***, Basic ***)"
    )
