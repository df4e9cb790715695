"""Whose fault a failed call is, and how a batch that failed as a whole is retried in parts."""

from __future__ import annotations

from typing import TypeVar

from metastore.errors import SCHEMA_MISMATCH, ApiError

T = TypeVar("T")

# Failures that say the database cannot write at all now (or its schema is not this release's:
# the deploy will fix it), not that one event is to blame. A missing grant is the service role's
# misconfiguration, never an event's.
_ENVIRONMENT = ("08", "53", "55", "57P", "40", "42501", *SCHEMA_MISMATCH)


def environmental(error: ApiError) -> bool:
    """The environment's fault (retry later, as is), not something an event holds.

    A data error (4xx) of a whole batch is some event's: split and set aside, never retried as is.
    A missed deadline (57014) is neither by itself: whoever waits decides (a group of requests
    cannot wait longer, the writers can split the batch and see)."""
    if error.code is None:
        return True  # no SQLSTATE: the pool or the connection failed
    return error.code.startswith(_ENVIRONMENT)


def timed_out(error: ApiError) -> bool:
    """The call ran out of time, or was cancelled by an operator (SQLSTATE class 57)."""
    return error.code is not None and error.code.startswith("57")


def halves(items: list[T]) -> tuple[list[T], list[T]]:
    """A batch that failed as a whole, in two: each half is tried on its own, so that an event
    that fails, fails alone."""
    half = len(items) // 2
    return items[:half], items[half:]
