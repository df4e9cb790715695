"""The newcomer's first minutes: from `git clone` to the first dataset listed by `make dev`.

`python -m bench.first_run [--user NAME] [--keep-cache]`: clones this repository (its committed
HEAD) into a fresh folder that only its owner may enter, as the current user or as NAME (run as
root), runs `make dev` there with pip's cache off (as on a clean machine: every wheel is
downloaded), waits for the service, posts a Trino fixture, lists the datasets, and stops the
service with Ctrl-C (SIGINT). It fails (exit 1, with `make dev`'s output) if any step does.
Prints, and with --out writes, the seconds from the clone to each step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from devtools.localpg import free_port

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = "tests/fixtures/openlineage/trino/04-ctas-complete.json"


def _as(user: str | None) -> dict[str, Any]:
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [], "env_home": entry.pw_dir}


def _http(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    # A local http:// URL this script made.
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        return response.status, response.read()


def run(user: str | None, keep_cache: bool) -> dict[str, Any]:
    who = _as(user)
    home = Path(who.pop("env_home", tempfile.gettempdir()))
    parent = Path(tempfile.mkdtemp(prefix="metastore-first-run-", dir=home if user else None))
    # A bundle, not the folder: the user may not be able to read this checkout.
    bundle = parent / "repo.bundle"
    subprocess.run(["git", "-C", str(ROOT), "bundle", "create", str(bundle), "HEAD"], check=True, capture_output=True)
    if user:
        shutil.chown(parent, user, user)
        shutil.chown(bundle, user, user)
    os.chmod(parent, 0o700)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "METASTORE_PORT": str(port := free_port()),
        "METASTORE_DEV_PG_PORT": str(free_port()),
    }
    if not keep_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    clone = parent / "metastore"
    log = parent / "make-dev.log"
    started = time.monotonic()
    subprocess.run(
        ["git", "-c", "advice.detachedHead=false", "clone", "-q", str(bundle), str(clone)], check=True, env=env, **who
    )
    times: dict[str, float] = {"cloned_s": time.monotonic() - started}
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["make", "dev"], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **who
        )
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"make dev exited with {process.returncode}:\n{log.read_text(errors='replace')}")
            try:
                if _http(f"{base}/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.5)
        times["serving_s"] = time.monotonic() - started
        status, _ = _http(f"{base}/api/v1/lineage", (clone / FIXTURE).read_bytes())
        _, listed = _http(f"{base}/api/v1/datasets")
        times["listed_s"] = time.monotonic() - started
        datasets = json.loads(listed)["datasets"]
        if status != 201 or not datasets:
            raise RuntimeError(f"posting the fixture gave {status}; datasets listed: {datasets}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(60)
    if process.returncode not in (0, -signal.SIGINT, 130):
        raise RuntimeError(f"make dev stopped with {process.returncode}:\n{log.read_text(errors='replace')}")
    subprocess.run(["make", "clean-dev"], cwd=clone, env=env, check=True, capture_output=True, **who)
    shutil.rmtree(parent)
    return {"user": user or pwd.getpwuid(os.getuid()).pw_name, "pip_cache": keep_cache, **times}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--user", action="append", help="run as this user too (as root); repeatable")
    parser.add_argument("--keep-cache", action="store_true", help="let pip use its cache")
    parser.add_argument("--out", type=Path, help="write the results here (JSON)")
    args = parser.parse_args()
    results = []
    for user in [None, *(args.user or [])]:
        result = run(user, args.keep_cache)
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.out:
        machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}
        args.out.write_text(json.dumps({"machine": machine, "runs": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
