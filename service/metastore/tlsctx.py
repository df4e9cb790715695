"""The server's TLS context, reloaded when the certificate, key or client CA file changes.

Kubernetes rotates mounted Secrets by swapping the files, and the certificate may land before
its key. SSLContext.load_cert_chain on a live context is not safe for that: OpenSSL replaces
the certificate before it checks the key, so a mismatch leaves the context with the new
certificate and no usable key, and every handshake fails until the key arrives. So each
complete set is loaded into a fresh context and swapped in only when it loaded; the server
listens with a front context whose SNI callback (run for every ClientHello, with or without a
server name) hands each connection the current inner one.

Client certificates (METASTORE_TLS_CLIENT_CA) are optional: a client without one is served as
unauthenticated, a client whose certificate does not verify is refused at the handshake.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import time
from pathlib import Path

from cryptography import x509

from metastore import metrics
from metastore.config import ConfigError

log = logging.getLogger("metastore.tls")

_PEM_CERT = b"-----BEGIN CERTIFICATE-----"


def _stamp(*paths: Path | None) -> tuple[tuple[int, int, int], ...]:
    out = []
    for path in paths:
        if path is not None:
            st = path.stat()
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _validity(cert_file: Path) -> tuple[float, float]:
    """notBefore and notAfter of the first certificate in the file (the leaf), as Unix timestamps."""
    pem = cert_file.read_bytes()
    start = pem.find(_PEM_CERT)
    if start < 0:
        raise ValueError(f"no PEM certificate in {cert_file}")
    cert = x509.load_pem_x509_certificate(pem[start:])
    return cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()


def _context(client_ca: Path | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    if client_ca is not None:
        context.load_verify_locations(cafile=str(client_ca))
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


class ReloadingContext:
    def __init__(self, cert: Path, key: Path, client_ca: Path | None = None, expiry_warning_days: int = 7) -> None:
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self.warning_s = expiry_warning_days * 86_400
        self._warned: tuple[float, float] | None = None  # (not_after, when warned)
        try:
            # The front context: same verification settings (OpenSSL verifies the client with
            # the settings of the SSL object, copied from this context), never a certificate.
            self.context = _context(client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"METASTORE_TLS_CLIENT_CA={client_ca}: not a usable PEM CA bundle: {exc}") from None
        self.context.sni_callback = self._select
        self._stamp = _stamp(cert, key, client_ca)
        try:
            self.current, (self.not_before, self.not_after) = self._load()
        except (OSError, ValueError, ssl.SSLError) as exc:
            raise ConfigError(
                f"METASTORE_TLS_CERT={cert} and METASTORE_TLS_KEY={key} are not a usable certificate and key: {exc}"
            ) from None
        self._published()

    def _select(self, connection: ssl.SSLObject, server_name: str | None, front: ssl.SSLContext) -> None:
        connection.context = self.current

    def _load(self) -> tuple[ssl.SSLContext, tuple[float, float]]:
        context = _context(self.client_ca)
        context.load_cert_chain(self.cert, self.key)
        return context, _validity(self.cert)

    def _published(self) -> None:
        # Both ends: an alert can then ask how much of the lifetime is left, whatever it is.
        metrics.TLS_CERT_NOT_BEFORE.set(self.not_before)
        metrics.TLS_CERT_EXPIRY.set(self.not_after)
        self.warn_if_expiring()

    def warn_if_expiring(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        left = self.not_after - now
        if left > self.warning_s:
            return
        # Once a day per certificate: loud enough to be seen, not a line every reload tick.
        if self._warned and self._warned[0] == self.not_after and now - self._warned[1] < 86_400:
            return
        self._warned = (self.not_after, now)
        expiry = datetime.datetime.fromtimestamp(self.not_after, datetime.UTC).isoformat()
        if left <= 0:
            log.error("the served TLS certificate %s EXPIRED at %s", self.cert, expiry)
        else:
            log.warning("the served TLS certificate %s expires at %s, in %.1f days", self.cert, expiry, left / 86_400)

    def reload_if_changed(self) -> bool:
        try:
            stamp = _stamp(self.cert, self.key, self.client_ca)
            if stamp == self._stamp:
                return False
            context, validity = self._load()
        except (OSError, ValueError, ssl.SSLError) as exc:
            # Mid-rotation the files can disagree (a certificate before its key); the context in
            # use was never touched, and the next tick tries again.
            metrics.TLS_RELOADS.labels("failed").inc()
            log.warning("certificate reload failed, still serving the previous certificate: %s", exc)
            return False
        self.current, (self.not_before, self.not_after), self._stamp = context, validity, stamp
        metrics.TLS_RELOADS.labels("ok").inc()
        log.info("reloaded the TLS certificate from %s", self.cert)
        self._published()
        return True

    async def watch(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            self.reload_if_changed()
            self.warn_if_expiring()
