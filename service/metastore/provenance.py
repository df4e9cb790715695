"""Where a request comes from, as the service itself knows it: the source_kind and
source_principal stored with every event.

The service claims `authenticated` only for a client certificate that the TLS handshake
verified against METASTORE_TLS_CLIENT_CA (tlsctx.py asks for one; a certificate that fails
verification never gets this far); the principal is the certificate's subject as an RFC 4514
string. Everything else is `unauthenticated` with no principal. Nothing the client sends in a
header or body changes this.
"""

from __future__ import annotations

import ssl
from typing import Any

from cryptography import x509
from sanic import Request

UNAUTHENTICATED: tuple[str, str | None] = ("unauthenticated", None)


def _from_certificate(der: bytes) -> tuple[str, str | None]:
    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    # An empty subject (identity only in the SAN) names nobody: stay unauthenticated.
    return ("authenticated", subject) if subject else UNAUTHENTICATED


def source_of(request: Request) -> tuple[str, str | None]:
    """(source_kind, source_principal) of the request's connection."""
    transport: Any = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket) or ssl_object.context.verify_mode == ssl.CERT_NONE:
        # Plain HTTP, or no client CA configured: no certificate was asked for or verified.
        return UNAUTHENTICATED
    ctx = request.conn_info.ctx if request.conn_info is not None else None
    cached = getattr(ctx, "metastore_source", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    # getpeercert() returns a certificate only when the handshake verified it.
    der = ssl_object.getpeercert(binary_form=True)
    source = _from_certificate(der) if der else UNAUTHENTICATED
    if ctx is not None:
        ctx.metastore_source = source  # one parse per connection, not per request
    return source
