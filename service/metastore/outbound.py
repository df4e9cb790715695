"""Requests to other services: the forwarding target, the targets of `replay` and `import`, and the
store `export` reads from.

- What may be shown of a URL: never its credentials. User info (`user:password@`) and every query
  value (`?token=...`) may be a secret; `redact` shows a URL without them, `target_key` names a
  forwarding target without them (metastore.forward_key computes the same in SQL), and
  `Redactor.scrub` takes them out of any text a library or a receiver wrote, log records included.
- Requests that end: each has a budget that holds on its sockets (a receiver that answers a byte
  at a time cannot hold a send past it), and answers are read up to ANSWER_BYTES.
- What an answer says about the event it carried (`Answer.verdict`): a 2xx stored it; a 400 or a
  422 judges it (refused: it will never pass); any other answer, or none, says that the target is
  wrong or unwell (401, 403, 404, 408, 413, 429, 5xx, a redirect): retried, never skipped.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import re
import socket
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

INGEST_PATH = "api/v1/lineage"
ANSWER_BYTES = 64 * 1024  # of an answer's body, read at most
SHOWN_CHARS = 2000  # of an answer's body, kept and shown
# A receiver that takes an event at a megabyte a second or more is working: a send's budget is its
# timeout plus a second per MiB, so a large event gets the time it needs and a small one fails fast.
MIN_RATE = 1 << 20
REDIRECTS = 5
JUDGING = frozenset({400, 422})
_SUFFIX = re.compile(r"(/api/v1/lineage)?/*$")
# Loggers of the HTTP libraries, whose debug records quote request paths (query strings included).
_LIBRARY_LOGGERS = (
    "urllib3.connectionpool",
    "urllib3.connection",
    "urllib3.poolmanager",
    "urllib3.response",
    "urllib3.util.retry",
    "requests",
    "openlineage.client.transport.http",
)


def _parts(url: str) -> tuple[str, str | None, str, list[str]]:
    """(scheme://, user info or None, authority and path, query parts) of url, without its fragment."""
    base, _, query = url.partition("#")[0].partition("?")
    scheme, sep, rest = base.partition("://")
    if not sep:
        return "", None, base, [p for p in query.split("&") if p]
    authority, slash, path = rest.partition("/")
    userinfo = None
    if "@" in authority:
        userinfo, _, authority = authority.rpartition("@")
    return scheme + sep, userinfo, authority + slash + path, [p for p in query.split("&") if p]


def _shown_query(parts: list[str]) -> str:
    shown = "&".join(p.partition("=")[0] + "=***" if "=" in p else "***" for p in parts)
    return "?" + shown if shown else ""


def redact(url: str) -> str:
    """url without user info, fragment and query values: what logs, errors and files may show."""
    scheme, _, rest, query = _parts(url)
    return scheme + rest + _shown_query(query)


def target_key(url: str) -> str:
    """The name of a forwarding target (metastore.forward_key): its redacted URL without the ingest
    path and trailing slashes, so that another password, another token, or the ingest URL given
    instead of the base URL name the same target."""
    scheme, _, rest, query = _parts(url)
    while (cut := _SUFFIX.sub("", rest, count=1)) != rest:
        rest = cut
    return scheme + rest + _shown_query(query)


def ingest_url(url: str, endpoint: str = INGEST_PATH) -> str:
    """Where events go: url itself when it already ends with the endpoint's path (the ingest URL
    was given), otherwise the endpoint under it (a base URL was given). The query string is kept."""
    base, question, query = url.partition("#")[0].partition("?")
    path = "/" + endpoint.strip("/")
    base = base.rstrip("/")
    if path != "/" and not base.endswith(path):
        base += path
    return base + question + query


def secrets(url: str) -> list[str]:
    """The parts of url that may be secrets: user name, password, query values (raw and decoded)."""
    _, userinfo, _, query = _parts(url)
    found: list[str] = []
    if userinfo:
        found += userinfo.split(":", 1)
        # As basic auth sends them: a receiver may quote its Authorization header.
        found.append(base64.b64encode(unquote(userinfo).encode()).decode())
    found += [p.partition("=")[2] if "=" in p else p for p in query]
    return [s for value in found for s in {value, unquote(value)} if s]


def one_line(text: str) -> str:
    """text on one line, without NUL (which PostgreSQL's text refuses)."""
    return " ".join(text.replace("\x00", "\ufffd").split())


class Redactor:
    """Takes the credentials of some URLs out of any text: each URL (and its path and query, as
    libraries quote them) becomes its redacted form, then any secret of three characters or more
    becomes ***."""

    def __init__(self, *urls: str) -> None:
        pairs: dict[str, str] = {}
        for url in urls:
            pairs[url] = redact(url)
            split = urlsplit(url)
            if split.query:
                pairs[f"{split.path}?{split.query}"] = redact(f"{split.path}?{split.query}")
        self.pairs = sorted(pairs.items(), key=lambda p: len(p[0]), reverse=True)
        found = {s for url in urls for s in secrets(url) if len(s) >= 3}
        self.secrets = sorted(found, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for raw, shown in self.pairs:
            text = text.replace(raw, shown)
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


_REDACTORS: weakref.WeakSet[Redactor] = weakref.WeakSet()  # those in use in this process


class _ScrubRecords(logging.Filter):
    """Scrubs the records of the HTTP libraries with every Redactor in use in this process."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _REDACTORS:
            message = record.getMessage()
            for redactor in list(_REDACTORS):
                message = redactor.scrub(message)
            record.msg, record.args = message, None
        return True


_SCRUB = _ScrubRecords()
for _name in _LIBRARY_LOGGERS:
    logging.getLogger(_name).addFilter(_SCRUB)


def watch_logs(redactor: Redactor) -> Redactor:
    """Scrub the HTTP libraries' log records with redactor for as long as it is in use."""
    _REDACTORS.add(redactor)
    return redactor


class _Sockets:
    """The sockets a session opened: a budget shuts them down, which ends any read or write
    blocked on them at once, whatever the socket's own timeout."""

    def __init__(self) -> None:
        self.live: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self.lock = threading.Lock()

    def add(self, sock: socket.socket | None) -> None:
        if sock is not None:
            with self.lock:
                self.live.add(sock)

    def shut(self) -> None:
        with self.lock:
            live = list(self.live)
        for sock in live:
            with contextlib.suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_RDWR)


def _pool_classes(sockets: _Sockets) -> dict[str, type[HTTPConnectionPool]]:
    class Plain(HTTPConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    class Tls(HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    class PlainPool(HTTPConnectionPool):
        ConnectionCls = Plain

    class TlsPool(HTTPSConnectionPool):
        ConnectionCls = Tls

    return {"http": PlainPool, "https": TlsPool}


class _Adapter(HTTPAdapter):
    def __init__(self, sockets: _Sockets) -> None:
        self.sockets = sockets  # before HTTPAdapter.__init__, which makes the pool manager
        super().__init__(max_retries=0)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _pool_classes(self.sockets)

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS has connection classes of its own
            manager.pool_classes_by_scheme = _pool_classes(self.sockets)
        return manager


class Watch:
    expired = False


class GuardedSession(requests.Session):
    """A requests session without retries of its own, whose requests end at a budget. Pass
    verify=session.verify with each request: requests prefers REQUESTS_CA_BUNDLE to the session's."""

    def __init__(self, verify: bool | str) -> None:
        super().__init__()
        self.sockets = _Sockets()
        adapter = _Adapter(self.sockets)
        self.mount("http://", adapter)
        self.mount("https://", adapter)
        self.verify = verify

    @contextmanager
    def budget(self, seconds: float | None) -> Iterator[Watch]:
        """Shut every socket of the session down when `seconds` have passed (None: never);
        watch.expired says whether they did."""
        watch = Watch()
        if seconds is None:
            yield watch
            return

        def expire() -> None:
            watch.expired = True
            self.sockets.shut()

        timer = threading.Timer(max(seconds, 0.001), expire)
        timer.daemon = True
        timer.start()
        try:
            yield watch
        finally:
            timer.cancel()


def reason(exc: BaseException, redactor: Redactor) -> str:
    """Why a request got no answer, from the innermost cause (urllib3 wraps causes in messages
    that quote the request's path and query), with the credentials taken out."""
    inner: BaseException = exc
    for _ in range(10):
        cause = getattr(inner, "reason", None)
        if not isinstance(cause, BaseException) and inner.args and isinstance(inner.args[0], BaseException):
            cause = inner.args[0]
        if not isinstance(cause, BaseException) or cause is inner:
            break
        inner = cause
    text = re.sub(r"^<[^>]*>: ", "", str(inner))  # urllib3's "<HTTPSConnection(host=..., port=...)>: "
    return redactor.scrub(one_line(f"{type(inner).__name__}: {text}"))


@dataclass(frozen=True)
class Answer:
    """What a receiver answered (its status and the start of its body), or why it did not."""

    url: str  # the URL that answered, redacted
    status: int | None  # None: no answer
    body: str = ""
    problem: str = ""  # why there was no answer, or why a redirect was not followed
    retry_after: float | None = None

    @property
    def verdict(self) -> str:
        """sent (stored), refused (judged: 400, 422) or failed (says nothing about the event)."""
        if self.status is not None and not self.problem:
            if 200 <= self.status < 300:
                return "sent"
            if self.status in JUDGING:
                return "refused"
        return "failed"

    @property
    def label(self) -> str:
        """The answer for a metric label: its status, or "none"."""
        return "none" if self.status is None else str(self.status)

    @property
    def transient(self) -> bool:
        """Worth trying again soon: no answer, 408, 429 or 5xx."""
        return self.status is None or self.status in (408, 429) or self.status >= 500

    def describe(self) -> str:
        if self.status is None:
            return f"{self.url}: no answer ({self.problem})"
        text = f"{self.url} answered {self.status}"
        if self.problem:
            text += f" ({self.problem})"
        if self.body:
            text += f": {self.body[:300]}"
        return text


def read_answer(response: requests.Response, shown: str, redactor: Redactor, data: bytes | None = None) -> Answer:
    """The status and the first ANSWER_BYTES of the body (decoded; a body that inflates stops
    there), or of `data` when the caller read the body already."""
    if data is None:
        data = response.raw.read(ANSWER_BYTES, decode_content=True) or b""
    data = data[:ANSWER_BYTES]
    body = redactor.scrub(one_line(data.decode("utf-8", "replace")))[:SHOWN_CHARS]
    retry_after = None
    header = response.headers.get("Retry-After", "").strip()
    if header.isdigit():
        retry_after = min(float(header), 300.0)
    return Answer(shown, response.status_code, body, retry_after=retry_after)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    split = urlsplit(url)
    return split.scheme, split.hostname, split.port


def _redirected(url: str, target: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The request a 307 or 308 asks for: to the same origin with the URL's user info (basic auth);
    to another without it, nor any Authorization header."""
    if _origin(target) != _origin(url):
        return target, {k: v for k, v in headers.items() if k.lower() != "authorization"}
    userinfo, split = _parts(url)[1], urlsplit(target)
    if userinfo and split.username is None:
        target = urlunsplit(split._replace(netloc=f"{userinfo}@{split.netloc}"))
    return target, headers


class Poster:
    """Posts events, one request each, to an OpenLineage endpoint, with openlineage-python's HTTP
    transport building each request (its headers and compression). Redirects: 307 and 308 are
    followed with the method and the body (not from https to http); any other is an answer that
    says nothing about the event. The credentials of the URL are sent (basic auth, the query
    string) and shown nowhere."""

    def __init__(self, url: str, verify: bool | str, timeout: float, compress: bool = False) -> None:
        from openlineage.client.transport.http import HttpCompression, HttpConfig, HttpTransport

        class Builder(HttpTransport):
            def _prepare_session(self, session: requests.Session) -> None:
                pass  # GuardedSession: no retries of the transport's own; this poster answers for them

        self.url, self.shown, self.timeout = url, redact(url), timeout
        self.redactor = watch_logs(Redactor(url))
        self.session = GuardedSession(verify)
        # Made with the redacted URL: the transport logs its URL (at debug level) and sends nothing itself.
        config = HttpConfig(
            url=self.shown,
            timeout=timeout,
            verify=verify is not False,
            compression=HttpCompression.GZIP if compress else None,
            session=self.session,
        )
        self.builder = Builder(config)

    def budget(self, size: int) -> float:
        return self.timeout + size / MIN_RATE

    def post(self, payload: str, cap: float | None = None) -> Answer:
        """Post one event; the answer comes within budget(size), or within cap if that is shorter."""
        body, headers = self.builder._prepare_request(payload)
        data = body.encode() if isinstance(body, str) else body
        budget = self.budget(len(data)) if cap is None else max(min(self.budget(len(data)), cap), 0.001)
        url, shown, redactor = self.url, self.shown, self.redactor
        with self.session.budget(budget) as watch:
            for _ in range(REDIRECTS + 1):
                try:
                    response = self.session.post(
                        url,
                        data=data,
                        headers=headers,
                        timeout=(min(self.timeout, budget), budget),
                        allow_redirects=False,
                        stream=True,
                        verify=self.session.verify,
                    )
                    try:
                        answer = read_answer(response, shown, redactor)
                    finally:
                        response.close()
                except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
                    why = f"no complete answer within {budget:.1f} s" if watch.expired else reason(exc, redactor)
                    return Answer(shown, None, problem=why)
                if watch.expired:  # an answer cut short (its end may have looked like the end of the body)
                    return Answer(shown, None, problem=f"no complete answer within {budget:.1f} s")
                if not 300 <= response.status_code < 400:
                    return answer
                location = response.headers.get("Location", "")
                target = urljoin(url, location) if location else ""
                problem = self._unfollowed(url, target, response.status_code)
                if problem:
                    return Answer(shown, answer.status, answer.body, problem)
                url, headers = _redirected(url, target, headers)
                shown, redactor = redact(url), watch_logs(Redactor(self.url, url))
        return Answer(shown, None, problem=f"more than {REDIRECTS} redirects")

    @staticmethod
    def _unfollowed(url: str, target: str, status: int) -> str:
        """Why a redirect is not followed ("" when it is)."""
        if not target:
            return f"a {status} without Location"
        shown = redact(target)
        if status not in (307, 308):
            return f"redirect to {shown} not followed: only 307 and 308 keep the method and the body"
        if urlsplit(url).scheme == "https" and urlsplit(target).scheme != "https":
            return f"redirect to {shown} not followed: it leaves https"
        return ""

    def close(self) -> None:
        self.session.close()
