"""Test certificates: a throwaway CA (trustme) and certificates it issues, written to files."""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

import trustme

from devtools.localpg import LocalPostgres

LOCAL_NAMES = ("localhost", "127.0.0.1")


@dataclass
class TLSFiles:
    ca: Path
    cert: Path  # the certificate chain, key first (what METASTORE_TLS_CERT takes)
    key: Path


def write_tls_files(directory: Path, ca: trustme.CA | None = None, names: tuple[str, ...] = LOCAL_NAMES) -> TLSFiles:
    """ca.pem, cert.pem and key.pem under directory: a certificate for names, by ca (a new one if none)."""
    ca = ca or trustme.CA()
    leaf = ca.issue_cert(*names)
    files = TLSFiles(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(files.cert))
    leaf.private_key_pem.write_to_path(str(files.key))
    return files


def postgres_tls(server: LocalPostgres, ca_file: Path, names: tuple[str, ...] = LOCAL_NAMES) -> str:
    """A certificate for a throwaway PostgreSQL, in its base directory and owned by its user (the
    key 0600, as PostgreSQL demands); ca_file gets the CA. Returns the server options that use it."""
    ca = trustme.CA()
    leaf = ca.issue_cert(*names)
    cert, key = server.base / "server.crt", server.base / "server.key"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    os.chmod(key, 0o600)
    if server.run_as:
        user = pwd.getpwnam(server.run_as)
        for path in (cert, key):
            os.chown(path, user.pw_uid, user.pw_gid)
    ca.cert_pem.write_to_path(str(ca_file))
    return f"-c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key}"
