"""Checks every request passes before a route sees it, and headers every response carries.

- Framing: header names must be RFC 9110 tokens. Sanic splits a header line at the first colon
  and keeps the rest of the name, so `Transfer-Encoding : chunked` arrives as a header named
  "transfer-encoding " that it ignores, framing the body by Content-Length instead: a proxy that
  honours the chunked encoding then disagrees with us on where the request ends (smuggling).
  Refused while the head is parsed, before any body is read, and the connection is closed.
- Host: an HTTP/1.1 request without one, any request with two, or one whose value is not a host
  (and port) is a 400, as RFC 9112 (3.2) requires of a server.
- Expect: 100-continue: a request answered before its body was asked for (a refusal: too large,
  wrong media type, a full budget, a failing database) gets its answer without a "100 Continue"
  first (Sanic would send one, inviting a body that nobody will read), and its connection closes.
- Request ids: X-Request-ID is echoed and logged, so only printable ASCII of bounded length is
  kept; anything else is replaced by a generated id (the response says which).
- Cross-site writes: a browser lets any page POST text/plain, form encodings or multipart to any
  origin without asking (no CORS preflight). POST needs a JSON media type, which a page of
  another origin can only send after a preflight this service never grants.
- A NUL in a query parameter cannot reach PostgreSQL (text holds none): a 400 here, not a
  driver error that would read as "database unavailable".
- Response headers: nosniff everywhere, HSTS when serving TLS, and a CSP on responses that set
  none (JSON is never to be framed or run).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from sanic import Request as SanicRequest
from sanic import Sanic
from sanic.exceptions import BadRequest
from sanic.http import Http
from sanic.response import BaseHTTPResponse

from metastore import metrics
from metastore.config import Config
from metastore.errors import ApiError

# RFC 9110 5.6.2: token = 1*tchar
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
# RFC 9112 3.2 / RFC 3986: uri-host [ ":" port ]; empty is allowed (a target without authority).
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]*)(:[0-9]*)?")
# Printable ASCII without space: safe in a header, a log line and a JSON string as it is.
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
# type "/" subtype, parameters ignored: application/json or application/<anything>+json.
_JSON_MEDIA_TYPE = re.compile(r"application/(json|[!#$%&'*+.^_`|~0-9a-z-]+\+json)")

HSTS = "max-age=31536000"
JSON_CSP = "default-src 'none'; frame-ancestors 'none'"


def clean_request_id(value: str | None) -> str:
    if value is not None and _REQUEST_ID.fullmatch(value):
        return value
    return str(uuid.uuid4())


class Request(SanicRequest):
    """Sanic's request, refusing ambiguous framing while the head is parsed (before the body)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = self.headers.keys()
        if not all(_TOKEN.fullmatch(name) for name in names):
            metrics.REFUSED.labels("bad_header_name").inc()
            raise BadRequest("a header name is not an RFC 9110 token (whitespace before the colon, or a folded line)")
        # RFC 9110 5.5: CR, LF and NUL never belong in a value. A bare LF there is a second header
        # line to the next hop that splits on it (Transfer-Encoding next to Content-Length).
        if any(_BAD_VALUE.search(value) for value in self.headers.values()):
            metrics.REFUSED.labels("bad_header_value").inc()
            raise BadRequest("a header value holds a CR, LF or NUL character")
        if not all(_DIGITS.fullmatch(v) for v in self.headers.getall("content-length", [])):
            metrics.REFUSED.labels("bad_content_length").inc()
            raise BadRequest("Content-Length must be ASCII digits")
        if "transfer-encoding" in names and "content-length" in names:
            metrics.REFUSED.labels("te_and_cl").inc()
            raise BadRequest("Transfer-Encoding and Content-Length together")
        hosts = self.headers.getall("host", [])
        # (Sanic's stand-in for a request whose head could not be read has no head, nor headers.)
        missing = not hosts and self.version == "1.1" and bool(self.head)
        if len(hosts) > 1 or missing or (hosts and not _HOST.fullmatch(hosts[0])):
            metrics.REFUSED.labels("bad_host").inc()
            raise BadRequest("an HTTP/1.1 request needs exactly one Host header naming a host, e.g. Host: example.com")

    @property
    def id(self) -> str:
        if not self._id:
            self._id = clean_request_id(self.headers.getone(self.app.config.REQUEST_ID_HEADER, None))
        return str(self._id)


def is_json_media_type(content_type: str) -> bool:
    return bool(_JSON_MEDIA_TYPE.fullmatch(content_type.split(";", 1)[0].strip().lower()))


def ui_csp(config: Config) -> str:
    # Everything comes from this server: no CDN, no inline script, nothing fetched elsewhere.
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        f"base-uri 'none'; form-action 'self'; frame-ancestors {config.frame_ancestors}"
    )


def install(app: Sanic[Any, Any], config: Config) -> None:
    async def check_request(request: SanicRequest) -> None:
        if request.method == "POST" and not is_json_media_type(request.headers.get("content-type", "")):
            metrics.REFUSED.labels("media_type").inc()
            raise ApiError(
                415,
                "send the body as JSON with Content-Type: application/json (or application/*+json); "
                f"got {ascii(request.headers.get('content-type', '(none)'))[:100]}",
            )
        for name, values in request.args.items():
            if "\x00" in name or any("\x00" in v for v in values):
                metrics.REFUSED.labels("nul_in_query").inc()
                raise ApiError(400, "a query parameter contains a NUL character", "22021")

    async def secure_headers(request: SanicRequest, response: BaseHTTPResponse) -> None:
        stream = request.stream
        if isinstance(stream, Http) and stream.expecting_continue:
            # Answered before the body was asked for: no "100 Continue" in front of the answer, no
            # wait for a body the client holds back, and so no reuse of the connection.
            stream.expecting_continue = False
            stream.keep_alive = False
            stream.request_body = None
        response.headers["X-Content-Type-Options"] = "nosniff"
        if config.tls:
            response.headers["Strict-Transport-Security"] = HSTS
        if "content-security-policy" not in response.headers:
            response.headers["Content-Security-Policy"] = JSON_CSP

    # Priority: before the service's own middleware, and on every response, errors included.
    app.register_middleware(check_request, "request", priority=100)
    app.register_middleware(secure_headers, "response", priority=100)
