"""A site of another origin (http://127.0.0.1:<port>) that serves the pages a test puts in a dict
by path: the page of an attacker, or of a site that frames the view."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

from devtools.localpg import free_port


@contextlib.contextmanager
def another_origin() -> Iterator[dict[str, str]]:
    """The dict of pages by path; its "origin" is the site's origin. Served until the block ends."""
    pages: dict[str, str] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    pages["origin"] = f"http://127.0.0.1:{port}"
    try:
        yield pages
    finally:
        httpd.shutdown()
        httpd.server_close()
