"""Certificate rotation against the real server.

A renewed certificate that lands before its key must not break handshakes: the old pair keeps
being served, the failure is logged and counted, and the new pair is served once its key is
there. The served certificate's expiry is a metric and is warned about ahead of time; a bad
pair at start is a configuration error naming the settings."""

from __future__ import annotations

import datetime
import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography import x509

from tests.conftest import Database
from tests.support.certs import TLSFiles
from tests.support.eventually import eventually
from tests.support.servers import Server, start_server


def served_certificate(server: Server, ca: trustme.CA) -> x509.Certificate:
    """A fresh handshake (no connection reuse); the leaf it was given."""
    port = int(server.url.rsplit(":", 1)[1])
    context = ssl.create_default_context()
    ca.configure_trust(context)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def metric(server: Server, ca_file: Path, name: str) -> float:
    with httpx.Client(base_url=server.url, verify=ssl.create_default_context(cafile=str(ca_file))) as http:
        text = http.get("/metrics").text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name)]
    return sum(values)


def log_messages(server: Server) -> list[dict[str, str]]:
    return [json.loads(line) for line in server.log_lines() if line.startswith("{")]


def test_a_certificate_before_its_key_keeps_the_old_pair(module_db: Database, tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    old = ca.issue_cert("localhost", "127.0.0.1")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    old.cert_chain_pems[0].write_to_path(str(cert))
    old.private_key_pem.write_to_path(str(key))
    tls = TLSFiles(ca_file, cert, key)
    server = start_server(module_db.service_dsn, tls, tmp_path / "server.log", METASTORE_TLS_RELOAD_S="1")
    try:
        old_serial = served_certificate(server, ca).serial_number
        old_leaf = x509.load_pem_x509_certificate(old.cert_chain_pems[0].bytes())
        assert metric(server, ca_file, "metastore_tls_certificate_expiry_timestamp_seconds") == pytest.approx(
            old_leaf.not_valid_after_utc.timestamp()
        )
        # With the start of its validity: the lifetime, which the certificate alert is relative to.
        assert metric(server, ca_file, "metastore_tls_certificate_not_before_timestamp_seconds") == pytest.approx(
            old_leaf.not_valid_before_utc.timestamp()
        )

        # The renewed certificate lands first; its key does not match the key on disk.
        new = ca.issue_cert("localhost", "127.0.0.1")
        new.cert_chain_pems[0].write_to_path(str(cert))
        eventually(
            lambda: metric(server, ca_file, 'metastore_tls_reloads_total{result="failed"}') >= 1,
            timeout=15,
            what="a failed reload counted",
        )
        for _ in range(5):  # handshakes keep working, with the old pair
            assert served_certificate(server, ca).serial_number == old_serial
        with httpx.Client(base_url=server.url, verify=ssl.create_default_context(cafile=str(ca_file))) as http:
            assert http.get("/healthz").status_code == 200
        failed = [m for m in log_messages(server) if "reload failed" in m["message"]]
        assert failed and "still serving the previous certificate" in failed[0]["message"]
        assert failed[0]["levelname"] == "WARNING"

        # Then the key arrives: the new pair is served.
        new.private_key_pem.write_to_path(str(key))
        new_serial = x509.load_pem_x509_certificate(new.cert_chain_pems[0].bytes()).serial_number
        eventually(
            lambda: served_certificate(server, ca).serial_number == new_serial, timeout=15, what="the new pair served"
        )
        assert metric(server, ca_file, 'metastore_tls_reloads_total{result="ok"}') >= 1
        new_leaf = x509.load_pem_x509_certificate(new.cert_chain_pems[0].bytes())
        assert metric(server, ca_file, "metastore_tls_certificate_not_before_timestamp_seconds") == pytest.approx(
            new_leaf.not_valid_before_utc.timestamp()
        )
    finally:
        assert server.stop() == 0, server.log.read_text()
    assert "Traceback" not in server.log.read_text()


def test_expiry_is_warned_about_ahead(module_db: Database, tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=3)
    leaf = ca.issue_cert("localhost", "127.0.0.1", not_after=soon)
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    server = start_server(module_db.service_dsn, TLSFiles(ca_file, cert, key), tmp_path / "server.log")
    try:
        expiry = metric(server, ca_file, "metastore_tls_certificate_expiry_timestamp_seconds")
        assert expiry == pytest.approx(soon.replace(microsecond=0).timestamp())
        warnings = [m for m in log_messages(server) if "expires at" in m["message"]]
        assert warnings and warnings[0]["levelname"] == "WARNING" and "in 3.0 days" in warnings[0]["message"]
    finally:
        assert server.stop() == 0
    # With a shorter lead time, the same certificate is not warned about.
    server = start_server(
        module_db.service_dsn,
        TLSFiles(ca_file, cert, key),
        tmp_path / "quiet.log",
        METASTORE_TLS_EXPIRY_WARNING_DAYS="2",
    )
    try:
        assert not [m for m in log_messages(server) if "expires at" in m["message"]]
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("case", ["mismatched", "not_pem", "bad_client_ca"])
def test_a_bad_pair_at_start_names_the_setting(tls_files: TLSFiles, tmp_path: Path, case: str) -> None:
    other = trustme.CA().issue_cert("localhost")
    key = tmp_path / "other.key"
    other.private_key_pem.write_to_path(str(key))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("METASTORE_")}
    env.update(
        METASTORE_DATABASE_URL="host=127.0.0.1 dbname=x",
        METASTORE_TLS_CERT=str(tls_files.cert),
        METASTORE_TLS_KEY=str(tls_files.key),
    )
    expected = "METASTORE_TLS_CERT"
    if case == "mismatched":
        env["METASTORE_TLS_KEY"] = str(key)
    elif case == "not_pem":
        env["METASTORE_TLS_CERT"] = str(garbage)
    else:
        env["METASTORE_TLS_CLIENT_CA"], expected = str(garbage), "METASTORE_TLS_CLIENT_CA"
    result = subprocess.run(
        [sys.executable, "-m", "metastore", "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr and "Traceback" not in result.stderr + result.stdout
