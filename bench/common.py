"""Small pieces every benchmark needs: running workers in threads, writing the results."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


def in_threads(target: Callable[..., None], each: Iterable[tuple[Any, ...]], daemon: bool = False) -> None:
    """Runs target(*args) for each args in its own thread, waits for all, and re-raises the first
    error any of them raised (a worker's failure must fail the benchmark, not vanish in its thread)."""
    errors: list[BaseException] = []

    def guarded(*args: Any) -> None:
        try:
            target(*args)
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=args, daemon=daemon) for args in each]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def emit(results: Any, out: Path | None) -> None:
    """Prints the results as JSON and, when `out` is given, writes them there too."""
    text = json.dumps(results, indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(text)
