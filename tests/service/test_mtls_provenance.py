"""Optional mTLS identification, over real TLS against the real server.

A client certificate verified against METASTORE_TLS_CLIENT_CA makes the event `authenticated`
with the certificate's subject as principal; no certificate keeps it `unauthenticated`; a
certificate that does not verify is refused at the handshake; nothing the client writes in a
header changes what is stored."""

from __future__ import annotations

import datetime
import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import trustme

from tests.conftest import Database, create_database, drop_database
from tests.support.certs import TLSFiles
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server


@dataclass
class ClientCerts:
    ca: Path  # what the server is given
    good: trustme.LeafCert  # issued by that CA
    foreign: trustme.LeafCert  # issued by another CA
    expired: trustme.LeafCert  # issued by that CA, expired


@pytest.fixture(scope="module")
def client_certs(tmp_path_factory: pytest.TempPathFactory) -> ClientCerts:
    ca, other = trustme.CA(organization_name="Platform"), trustme.CA()
    base = tmp_path_factory.mktemp("client-ca")
    ca.cert_pem.write_to_path(str(base / "client-ca.pem"))
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    return ClientCerts(
        base / "client-ca.pem",
        ca.issue_cert(
            "trino.lineage.svc", common_name="trino", organization_name="Platform", organization_unit_name="lineage"
        ),
        other.issue_cert("trino.lineage.svc", common_name="trino", organization_name="Platform"),
        ca.issue_cert("trino.lineage.svc", common_name="trino", not_before=past, not_after=past.replace(month=2)),
    )


@pytest.fixture(scope="module", params=["sync", "async"])
def mtls_server(
    request: pytest.FixtureRequest,
    pg_server: Any,
    tls_files: TLSFiles,
    client_certs: ClientCerts,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Server, Database]]:
    db = create_database(pg_server)
    server = start_server(
        db.service_dsn,
        tls_files,
        tmp_path_factory.mktemp("mtls") / "server.log",
        METASTORE_TLS_CLIENT_CA=str(client_certs.ca),
        METASTORE_INGEST_MODE=request.param,
    )
    try:
        yield server, db
    finally:
        assert server.stop() == 0, server.log.read_text()
        drop_database(db)


def tls_context(server: Server, cert: trustme.LeafCert | None, max_version: ssl.TLSVersion | None = None) -> Any:
    context = ssl.create_default_context(cafile=str(server.ca))
    if cert is not None:
        cert.configure_cert(context)
    if max_version is not None:
        context.maximum_version = max_version
    return context


def post(server: Server, cert: trustme.LeafCert | None, **headers: str) -> str:
    """Posts a fresh event; returns its job name."""
    name = f"job-{uuid.uuid4().hex[:8]}"
    event = {"eventTime": "2024-01-01T00:00:00Z", "eventType": "COMPLETE", "job": {"namespace": "mtls", "name": name}}
    with httpx.Client(base_url=server.url, verify=tls_context(server, cert), timeout=10) as http:
        answer = http.post("/api/v1/lineage", json=event, headers=headers)
    assert answer.status_code in (201, 202), answer.text
    return name


def stored_source(db: Database, job_name: str) -> tuple[str, str | None] | None:
    with psycopg.connect(db.owner_dsn) as owner:
        row = owner.execute(
            "SELECT source_kind, source_principal FROM metastore.events WHERE job_name = %s", (job_name,)
        ).fetchone()
    return None if row is None else (row[0], row[1])


def wait_stored(db: Database, job_name: str) -> tuple[str, str | None]:
    # Async mode answers 202 before the writer commits.
    return eventually(lambda: stored_source(db, job_name), timeout=5, interval=0.05, what=f"{job_name} stored")


def test_a_verified_certificate_is_authenticated_by_its_subject(
    mtls_server: tuple[Server, Database], client_certs: ClientCerts
) -> None:
    server, db = mtls_server
    name = post(server, client_certs.good)
    assert wait_stored(db, name) == ("authenticated", "CN=trino,OU=lineage,O=Platform")


def test_no_certificate_stays_unauthenticated(mtls_server: tuple[Server, Database]) -> None:
    server, db = mtls_server
    name = post(server, None)
    assert wait_stored(db, name) == ("unauthenticated", None)


def test_headers_claim_nothing(mtls_server: tuple[Server, Database]) -> None:
    server, db = mtls_server
    name = post(
        server,
        None,
        **{"X-Forwarded-Client-Cert": "Subject=CN=admin", "X-SSL-Client-S-DN": "CN=admin", "Authorization": "x"},
    )
    assert wait_stored(db, name) == ("unauthenticated", None)


def test_the_batch_route_records_the_certificate_too(
    mtls_server: tuple[Server, Database], client_certs: ClientCerts
) -> None:
    server, db = mtls_server
    name = f"batch-{uuid.uuid4().hex[:8]}"
    batch = [{"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "mtls", "name": name}}]
    with httpx.Client(base_url=server.url, verify=tls_context(server, client_certs.good), timeout=10) as http:
        assert http.post("/api/v1/lineage/batch", json=batch).status_code == 200
    assert stored_source(db, name) == ("authenticated", "CN=trino,OU=lineage,O=Platform")


@pytest.mark.parametrize("which", ["foreign", "expired"])
def test_a_certificate_that_fails_verification_is_refused_at_the_handshake(
    mtls_server: tuple[Server, Database], client_certs: ClientCerts, which: str
) -> None:
    server, db = mtls_server
    cert = getattr(client_certs, which)
    port = int(server.url.rsplit(":", 1)[1])
    # TLS 1.2: the server's verdict comes within the handshake (asyncio closes the connection
    # there rather than sending an alert, so the client sees the handshake cut short).
    good = tls_context(server, client_certs.good, ssl.TLSVersion.TLSv1_2)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        good.wrap_socket(raw, server_hostname="localhost").close()  # the control: this one completes
    context = tls_context(server, cert, ssl.TLSVersion.TLSv1_2)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        pytest.raises((ssl.SSLError, ConnectionError)),
    ):
        context.wrap_socket(raw, server_hostname="localhost")
    # TLS 1.3: the client's handshake ends before the server's verdict, which arrives as an alert
    # instead of an answer; no request is ever read.
    name = f"refused-{uuid.uuid4().hex[:8]}"
    event = {"eventTime": "2024-01-01T00:00:00Z", "job": {"namespace": "m", "name": name}}
    with (
        httpx.Client(base_url=server.url, verify=tls_context(server, cert), timeout=10) as http,
        pytest.raises(httpx.TransportError),
    ):
        http.post("/api/v1/lineage", json=event)
    assert stored_source(db, name) is None
    # The server is still serving everyone else.
    assert wait_stored(db, post(server, None)) == ("unauthenticated", None)


def test_without_a_client_ca_a_certificate_is_not_asked_for(
    server: Server, module_db: Database, client_certs: ClientCerts
) -> None:
    """The default server (no METASTORE_TLS_CLIENT_CA): a client certificate is neither asked
    for nor trusted, so even a good one leaves the event unauthenticated."""
    name = post(server, client_certs.good)
    assert stored_source(module_db, name) == ("unauthenticated", None)
