"""Events ingested as the service role: all at once, or by a writer thread while the test does
something else (a rebuild, a retention run), each one of them stored."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg

from tests.conftest import ingest


def ingest_all(service_dsn: str, events: list[Any]) -> None:
    with psycopg.connect(service_dsn, autocommit=True) as service:
        for event in events:
            ingest(service, event)


@contextlib.contextmanager
def ingesting_meanwhile(service_dsn: str, events: list[Any], timeout: float) -> Iterator[None]:
    """A writer stores `events` while the block runs; after it, the writer has ended within
    `timeout` seconds with every event stored."""
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with psycopg.connect(service_dsn, autocommit=True) as conn:
                for event in events:
                    assert ingest(conn, event)[0] == "stored"
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    yield
    thread.join(timeout)
    assert not thread.is_alive() and not errors
