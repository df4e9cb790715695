"""A real HTTP server for the tests of forwarding, replay, export and import: http.server in a
thread of the test, answering as the test's script says (any status, redirects, bodies of any
size, streams that trickle or never end), and keeping every request it got."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Got:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    body: bytes = b'{"status": "stored"}'
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    chunks: Iterable[bytes] | None = None  # streamed until exhausted (or the client leaves), then closed


Script = Callable[[Got], Reply]


def accept_all(got: Got) -> Reply:
    return Reply()


class Receiver:
    """Listens on 127.0.0.1 until close(); `script` may be replaced while it runs."""

    def __init__(self, script: Script = accept_all) -> None:
        self.script = script
        self.got: list[Got] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                got = Got(self.command, self.path, dict(self.headers.items()), body)
                with receiver.lock:
                    receiver.got.append(got)
                reply = receiver.script(got)
                try:
                    self.answer(reply)
                except OSError:
                    self.close_connection = True  # the client left

            def answer(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.chunks is None:
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                    return
                self.send_header("Connection", "close")  # the body ends when the connection does
                self.end_headers()
                self.close_connection = True
                for chunk in reply.chunks:
                    if receiver.stopping.is_set():
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()

            do_GET = do_POST = do_PUT = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def requests(self, method: str | None = None, path: str | None = None) -> list[Got]:
        with self.lock:
            return [g for g in self.got if (method is None or g.method == method) and (path is None or g.path == path)]

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def trickle(data: bytes, pause: float, stop: threading.Event | None = None) -> Iterator[bytes]:
    """data a byte at a time, `pause` seconds apart, for ever."""
    while stop is None or not stop.is_set():
        for byte in data:
            yield bytes([byte])
            time.sleep(pause)


def endless(chunk: bytes, total: int | None = None) -> Iterator[bytes]:
    """chunk again and again (up to `total` bytes when given)."""
    sent = 0
    while total is None or sent < total:
        yield chunk
        sent += len(chunk)
