"""metastore.reject_event: the service records an accepted event it could not store, with the reason."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import psycopg
import pytest

from tests.conftest import READER_ROLE


def reject(
    conn: psycopg.Connection[Any],
    body: bytes | None,
    sqlstate: str | None = "57014",
    reason: str | None = "statement timeout, alone",
    kind: str | None = None,
    principal: str | None = None,
) -> None:
    conn.execute(
        "SELECT metastore.reject_event(%s::bytea, %s::text, %s::text, %s::text, %s::text)",
        (body, sqlstate, reason, kind, principal),
    )


def kept(owner: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return owner.execute(
        "SELECT body_prefix, body_bytes, body_sha256, sqlstate, reason, source_kind, source_principal "
        "FROM metastore.rejected_events ORDER BY id"
    ).fetchall()


def test_the_app_role_records_an_event_with_its_reason(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    body = b'{"eventTime": "2024-01-01T00:00:00Z", "run": {"runId": "r"}, "job": {"namespace": "n", "name": "j"}}'
    reject(service, body, "57014", "canceling statement due to statement timeout", "authenticated", "CN=trino")
    assert kept(owner) == [
        (
            body.decode(),
            len(body),
            hashlib.sha256(body).digest(),
            "57014",
            "canceling statement due to statement timeout",
            "authenticated",
            "CN=trino",
        )
    ]


def test_a_large_body_keeps_its_first_4096_bytes_and_a_long_reason_is_cut(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    body = b'{"x": "' + b"a" * 5_000_000 + b'"}'
    reject(service, body, "XX000", "r" * 10_000)
    prefix, size, digest, _, reason, kind, principal = kept(owner)[0]
    assert (prefix, size, digest) == (body[:4096].decode(), len(body), hashlib.sha256(body).digest())
    assert (len(reason), kind, principal) == (2000, "unauthenticated", None)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"\xff\xfe{}", "\ufffd\ufffd{}"),  # not UTF-8
        (b"a\x00b", "a\ufffdb"),  # a NUL, which text cannot hold
        (b"\xe2\x82", "\ufffd\ufffd"),  # a character cut short
        (b"\xed\xa0\x80x", "\ufffd\ufffd\ufffdx"),  # a surrogate
        ("é€😀".encode() + b"\xc0\xaf", "é€😀\ufffd\ufffd"),  # an overlong form after valid ones
        (b"", ""),
    ],
)
def test_bodies_that_are_not_utf8_are_decoded_leniently(
    body: bytes, expected: str, service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    reject(service, body)
    assert kept(owner)[0][:3] == (expected, len(body), hashlib.sha256(body).digest())


def test_a_missing_body_is_recorded_without_one(
    service: psycopg.Connection[Any], owner: psycopg.Connection[Any]
) -> None:
    reject(service, None)
    assert kept(owner)[0][:4] == (None, None, None, "57014")


@pytest.mark.parametrize(
    ("sqlstate", "reason", "kind", "principal"),
    [
        (None, "x", None, None),
        ("5701", "x", None, None),
        ("57014'; --", "x", None, None),
        ("57014", None, None, None),
        ("57014", "", None, None),
        ("57014", "x", "root", None),
        ("57014", "x", "unauthenticated", "CN=someone"),
    ],
)
def test_bad_arguments_are_refused_with_22023(
    sqlstate: str | None,
    reason: str | None,
    kind: str | None,
    principal: str | None,
    service: psycopg.Connection[Any],
    owner: psycopg.Connection[Any],
) -> None:
    with pytest.raises(psycopg.Error) as caught:
        reject(service, b"{}", sqlstate, reason, kind, principal)
    assert caught.value.sqlstate == "22023"
    assert kept(owner) == []


def test_only_the_app_role_may_call_it(database: Any) -> None:
    tag = uuid.uuid4().hex[:8]
    reader, nobody = f"reader_{tag}", f"nobody_{tag}"
    with psycopg.connect(database.server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {reader} LOGIN IN ROLE {READER_ROLE}")
        admin.execute(f"CREATE ROLE {nobody} LOGIN")
        # CONNECT is the installation's roles' only: let it in, to see the function refuse it.
        admin.execute(f"GRANT CONNECT ON DATABASE {database.name} TO {nobody}")
    try:
        for role in (reader, nobody):
            with (
                psycopg.connect(database.server.dsn_for(role, database.name), autocommit=True) as conn,
                pytest.raises(psycopg.errors.InsufficientPrivilege),
            ):
                reject(conn, b"{}")
    finally:
        with psycopg.connect(database.server.dsn, autocommit=True) as admin:
            admin.execute(f"DROP ROLE {reader}")
            admin.execute(f"REVOKE CONNECT ON DATABASE {database.name} FROM {nobody}")
            admin.execute(f"DROP ROLE {nobody}")
