"""The server's TLS context, reloaded when the certificate or key file changes.

Kubernetes rotates mounted Secrets by swapping the files; SSLContext.load_cert_chain on the
live context makes new handshakes use the new pair, with no restart and no dropped connection.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

from metastore import metrics

log = logging.getLogger("metastore.tls")


def _stamp(*paths: Path) -> tuple[tuple[int, int], ...]:
    out = []
    for path in paths:
        st = path.stat()
        out.append((st.st_mtime_ns, st.st_size))
    return tuple(out)


class ReloadingContext:
    def __init__(self, cert: Path, key: Path) -> None:
        self.cert, self.key = cert, key
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.set_alpn_protocols(["http/1.1"])
        self.context.load_cert_chain(cert, key)
        self._stamp = _stamp(cert, key)

    def reload_if_changed(self) -> bool:
        try:
            stamp = _stamp(self.cert, self.key)
            if stamp == self._stamp:
                return False
            self.context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            # Mid-rotation the pair can be inconsistent for a moment: keep serving the old one.
            metrics.TLS_RELOADS.labels("failed").inc()
            log.warning("certificate reload failed, keeping the current one: %s", exc)
            return False
        self._stamp = stamp
        metrics.TLS_RELOADS.labels("ok").inc()
        log.info("reloaded the TLS certificate from %s", self.cert)
        return True

    async def watch(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            self.reload_if_changed()
