"""The one place that turns a PostgreSQL SQLSTATE into an HTTP status."""

from __future__ import annotations

# An undefined schema, table, column, function or type: the database's schema is not the one this
# release's functions were written for (not deployed, behind, or reverted under them). Never the
# client's doing, and it passes once the operator deploys: 503, with /readyz's reason.
SCHEMA_MISMATCH = frozenset({"3F000", "42P01", "42703", "42704", "42883"})

# Exact codes first, then by SQLSTATE class (the first two characters).
_EXACT = {
    **dict.fromkeys(SCHEMA_MISMATCH, 503),
    "P0002": 404,  # no_data_found: the thing asked for does not exist
    # insufficient_privilege: never the client's doing (there is no authentication), always the
    # service role's missing grant: a server-side misconfiguration, not a rejected event.
    "42501": 503,
    "54000": 413,  # program_limit_exceeded: a batch over metastore.settings.max_batch_events
    # feature_not_supported: what this installation cannot do (the event feed on Citus while the
    # feed's order there is not deployed). Not the client's doing, and retrying will not help.
    "0A000": 501,
}

_CLASS = {
    "22": 400,  # data_exception: the client's input
    "54": 400,  # program_limit_exceeded: input too large or too deep
    "23": 409,  # integrity_constraint_violation
    "08": 503,  # connection_exception
    "40": 503,  # transaction_rollback (serialization failure, deadlock): retry
    "53": 503,  # insufficient_resources
    "55": 503,  # object_not_in_prerequisite_state (lock not available)
    "57": 503,  # operator_intervention: statement deadline, shutdown
}


# Server-side answers whose message is the answer: the function says what cannot be done and
# where to read why. Other 5xx answers say only "retry later" (their text stays in the log).
EXPLAINED = frozenset({"0A000"})


def http_status(sqlstate: str | None) -> int:
    if not sqlstate:
        return 503  # no SQLSTATE: the connection itself failed
    return _EXACT.get(sqlstate) or _CLASS.get(sqlstate[:2], 500)


class ApiError(Exception):
    """An error answered to the client as {"error": {...}} with an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        retry_after: int | None = None,
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.retry_after = retry_after  # seconds, for a Retry-After header
        self.close = close  # the connection cannot be reused (e.g. a body left unread)

    @classmethod
    def from_sqlstate(cls, sqlstate: str | None, message: str) -> ApiError:
        return cls(http_status(sqlstate), message, sqlstate)


def whole_number(name: str, value: str) -> int:
    """A query parameter's value as a whole number, or the 400 that says it is not one."""
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"query parameter {name!r} must be a whole number, not {value!r}") from None
