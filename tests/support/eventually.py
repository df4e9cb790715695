"""The one way tests wait for something the service does in its own time (an async write, a
forwarder's progress, a log line): poll, and fail naming what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(predicate: Callable[[], T | None], timeout: float = 10, interval: float = 0.1, what: str = "") -> T:
    """predicate's first truthy answer, asked every `interval` seconds (at least once) for up to
    `timeout` seconds; AssertionError naming `what` if it never gave one."""
    deadline = time.monotonic() + timeout
    while True:
        answer = predicate()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what or 'the condition'} did not happen within {timeout} s (last: {answer!r})")
        time.sleep(interval)
