"""Whose fault a failed call is, and how a batch that failed as a whole is retried in parts."""

from __future__ import annotations

from typing import Literal, TypeVar

from metastore.errors import SCHEMA_MISMATCH, ApiError

T = TypeVar("T")
Fault = Literal["environment", "time", "event"]

# Failures that say the database cannot write at all now (or its schema is not this release's:
# the deploy will fix it), not that one event is to blame. A missing grant is the service role's
# misconfiguration, never an event's.
_ENVIRONMENT = ("08", "53", "55", "57P", "40", "42501", *SCHEMA_MISMATCH)


def fault(error: ApiError) -> Fault:
    """Whose fault a failed call is: the environment's (retry later, as is: a lock, a lost
    connection, a missing grant, the schema), time's (the call ran out of its deadline, or an
    operator cancelled it: whoever waits decides, since a group of requests cannot wait longer
    and the writers can split the batch and see), or the events' (a data error or a server error
    some event caused: split, and what fails alone is that event's)."""
    if error.code is None or error.code.startswith(_ENVIRONMENT):
        return "environment"  # no SQLSTATE: the pool or the connection failed
    if error.code.startswith("57"):
        return "time"
    return "event"


def environmental(error: ApiError) -> bool:
    """Nothing an event holds: retried as is, later. A data error (4xx) of a whole batch is some
    event's: split and set aside, never retried as is."""
    return fault(error) == "environment"


def halves(items: list[T]) -> tuple[list[T], list[T]]:
    """A batch that failed as a whole, in two: each half is tried on its own, so that an event
    that fails, fails alone."""
    half = len(items) // 2
    return items[:half], items[half:]
