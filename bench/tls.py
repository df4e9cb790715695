"""A throwaway CA and a localhost certificate for the benchmark runs (the service serves TLS)."""

from __future__ import annotations

from pathlib import Path

import trustme


def throwaway_certificates(work: Path) -> tuple[Path, Path, Path]:
    """(CA, certificate chain with key, key) files under work, for 127.0.0.1 and localhost."""
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    files = (work / "ca.pem", work / "cert.pem", work / "key.pem")
    ca.cert_pem.write_to_path(str(files[0]))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(files[1]))
    leaf.private_key_pem.write_to_path(str(files[2]))
    return files
