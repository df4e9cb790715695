"""Chromium for the view's tests: where it is, how it trusts exactly the test certificate, where
screenshots go."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.support.certs import TLSFiles

CHROMIUM = os.environ.get("METASTORE_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def spki_pin(cert_pem: Path) -> str:
    """Chromium trusts exactly this test certificate (by its public key), not any certificate."""
    cert = x509.load_pem_x509_certificate(
        cert_pem.read_bytes().split(b"-----END CERTIFICATE-----")[0] + b"-----END CERTIFICATE-----\n"
    )
    der = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def leaf_pem(tls: TLSFiles) -> Path:
    # cert.pem holds the private key first, then the chain; keep the certificates.
    text = tls.cert.read_text()
    leaf = tls.cert.with_name("leaf.pem")
    leaf.write_text(text[text.index("-----BEGIN CERTIFICATE-----") :])
    return leaf
