"""The helm binary the chart's tests run: on PATH or where helm/check.sh caches it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("METASTORE_TOOLS_CACHE", Path.home() / ".cache" / "metastore-tools"))


def helm() -> str:
    found = shutil.which("helm") or next((str(p) for p in sorted(CACHE.glob("helm-*/helm"))), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI runs helm/check.sh first, which provides helm")
        pytest.skip("no helm: run helm/check.sh once")
    return found
