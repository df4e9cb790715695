"""The ingest circuit breaker and the writers' sorting of failures (service/metastore/ingest.py)."""

from __future__ import annotations

import time

from metastore.errors import ApiError
from metastore.ingest import Breaker, _environmental


def test_a_probe_whose_client_left_lets_the_next_one_probe() -> None:
    """A probe cancelled mid-call (its client hung up) reported nothing: the breaker stayed open for
    good, answering every POST 503 while the database was well."""
    breaker = Breaker(threshold=3, cooldown_s=0.05)
    for _ in range(3):
        assert breaker.allow()
        breaker.done(ok=False)
    assert not breaker.allow()
    time.sleep(0.06)
    assert breaker.allow()  # the probe
    assert not breaker.allow()  # one at a time
    breaker.abandon()
    assert breaker.allow()  # another request finds out
    breaker.done(ok=True)
    assert all(breaker.allow() for _ in range(5))


def test_a_data_error_of_a_group_is_an_events_not_the_environments() -> None:
    """Sorted as environmental, a group that fails with 400 was retried as is, for ever: the
    writers stopped storing every event behind it."""
    assert not _environmental(ApiError(400, "cannot get array length of a non-array", "22023"))
    assert not _environmental(ApiError(409, "conflict", "23505"))
    for code in ("08006", "53300", "55P03", "57P01", "40001", "42501"):
        assert _environmental(ApiError(503, "down", code)), code
    assert _environmental(ApiError(503, "pool", None))
