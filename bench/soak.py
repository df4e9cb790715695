"""`make soak`: sustained load for minutes with faults in the middle, the service under a
supervisor that restarts it. Counts every 2xx the clients received and every row stored.

Timeline (fractions of --minutes): 0.2 PostgreSQL restart (fast stop, start), 0.4 PostgreSQL
paused (SIGSTOP of every server process for 5 s), 0.6 SIGTERM of the service (the supervisor
starts it again on the same port). Run once per ingest mode. Loopback only; bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.tls import throwaway_certificates
from metastore.localpg import LocalPostgres, free_port, provision

ROOT = Path(__file__).resolve().parent.parent


class Supervisor:
    """Keeps one service process running on a fixed port, as Kubernetes would."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.exit_codes: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "metastore", "serve"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _watch(self) -> None:
        while not self._stop.is_set():
            if self.process is not None and self.process.poll() is not None:
                self.exit_codes.append(self.process.returncode)
                self.restarts += 1
                self._spawn()
            time.sleep(0.05)

    def terminate(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
            self.exit_codes.append(self.process.returncode)


def run(mode: str, seconds: float, clients: int, work: Path, tls: tuple[Path, Path, Path]) -> dict[str, Any]:
    pg = LocalPostgres().start(durable=True)
    try:
        provision(pg, "soak")
        port = free_port()
        ca, cert, key = tls
        env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "OTEL_"))}
        env.update(
            {
                "METASTORE_DATABASE_URL": pg.dsn_for("metastore_service", "soak"),
                "METASTORE_HOST": "127.0.0.1",
                "METASTORE_PORT": str(port),
                "METASTORE_TLS_CERT": str(cert),
                "METASTORE_TLS_KEY": str(key),
                "METASTORE_INGEST_MODE": mode,
                "METASTORE_DB_TIMEOUT_MS": "2000",
                "METASTORE_LOG_LEVEL": "WARNING",
            }
        )
        supervisor = Supervisor(env, work / f"soak-{mode}.log")
        supervisor.start()
        url = f"https://localhost:{port}"
        verify = ssl.create_default_context(cafile=str(ca))
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/readyz", verify=verify, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the service did not become ready")
            time.sleep(0.1)

        tag = f"soak-{mode}-{time.time_ns()}"
        lock = threading.Lock()
        acknowledged: set[str] = set()
        outcomes: dict[str, int] = {}
        timeline: list[tuple[float, str]] = []  # (time, outcome) of every request, for recovery times
        begin = time.monotonic()
        stop_at = begin + seconds

        def client(n: int) -> None:
            i = 0
            with httpx.Client(base_url=url, verify=verify, timeout=6) as http:
                while time.monotonic() < stop_at:
                    i += 1
                    run_id = f"{tag}-{n}-{i}"
                    event = {
                        "eventTime": "2024-05-01T12:00:00Z",
                        "eventType": "COMPLETE",
                        "producer": "soak",
                        "run": {"runId": run_id},
                        "job": {"namespace": "soak", "name": f"q{n}"},
                        "inputs": [{"namespace": "trino://soak:8080", "name": f"s.t{i % 50}"}],
                        "outputs": [{"namespace": "trino://soak:8080", "name": f"s.o{n}"}],
                    }
                    try:
                        code = http.post("/api/v1/lineage", json=event).status_code
                        outcome = str(code)
                    except httpx.TransportError as exc:
                        outcome = type(exc).__name__
                        time.sleep(0.05)
                    with lock:
                        outcomes[outcome] = outcomes.get(outcome, 0) + 1
                        timeline.append((time.monotonic() - begin, outcome))
                        if outcome in ("200", "201", "202"):
                            acknowledged.add(run_id)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        for t in threads:
            t.start()
        faults: list[dict[str, Any]] = []

        def at(fraction: float) -> None:
            time.sleep(max(0.0, begin + seconds * fraction - time.monotonic()))

        at(0.2)
        t0 = time.monotonic() - begin
        pg.stop("fast")
        pg.start(durable=True)
        faults.append(
            {"fault": "postgresql restart", "at_s": round(t0, 1), "ended_s": round(time.monotonic() - begin, 1)}
        )
        at(0.4)
        t0 = time.monotonic() - begin
        pg.signal_all(signal.SIGSTOP)
        time.sleep(5)
        pg.signal_all(signal.SIGCONT)
        faults.append(
            {"fault": "postgresql paused 5 s", "at_s": round(t0, 1), "ended_s": round(time.monotonic() - begin, 1)}
        )
        at(0.6)
        t0 = time.monotonic() - begin
        supervisor.terminate()
        faults.append({"fault": "SIGTERM of the service", "at_s": round(t0, 1), "ended_s": round(t0, 1)})
        for t in threads:
            t.join(seconds + 60)
        supervisor.stop()

        for fault in faults:
            after = sorted(t for t, o in timeline if t >= fault["ended_s"] and o in ("200", "201", "202"))
            fault["recovered_after_s"] = round(after[0] - fault["ended_s"], 2) if after else None
            fault["non_2xx_during"] = sum(
                1 for t, o in timeline if fault["at_s"] <= t <= fault["ended_s"] + 10 and o not in ("200", "201", "202")
            )
        # Async mode: stored by the writers after the answer; give them a moment.
        time.sleep(2)
        with psycopg.connect(pg.dsn_for("metastore_owner", "soak")) as conn:
            stored = {
                r[0] for r in conn.execute("SELECT run_id FROM metastore.events WHERE run_id LIKE %s", (f"{tag}-%",))
            }
        missing = acknowledged - stored
        return {
            "mode": mode,
            "seconds": seconds,
            "clients": clients,
            "requests": sum(outcomes.values()),
            "outcomes": outcomes,
            "acknowledged": len(acknowledged),
            "stored": len(stored & acknowledged),
            "missing": len(missing),
            "service_exit_codes": supervisor.exit_codes,
            "service_restarts": supervisor.restarts,
            "faults": faults,
        }
    finally:
        pg.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description="sustained load with faults")
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="metastore-soak-"))
    tls = throwaway_certificates(work)
    results = [run(mode, args.minutes * 60, args.clients, work, tls) for mode in ("sync", "async")]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    lost = sum(r["missing"] for r in results)
    if lost:
        print(f"soak: {lost} acknowledged events are not stored", file=sys.stderr)
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
