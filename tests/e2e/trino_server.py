"""A real single-node Trino whose OpenLineage event listener posts to our service over HTTPS.

Trino comes from Maven Central (tests/e2e/fetch_trino.sh, cached under ~/.cache/metastore-e2e/)
and needs Java 24.0.1 or newer. Every Trino started here runs in its own process group, is
recorded under the cache's `running/` folder while it lives, and is stopped with SIGTERM then
SIGKILL to the whole group; `python -m tests.e2e.trino_server reap` kills what a killed test
run left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from devtools.localpg import free_port

if TYPE_CHECKING:
    import trino.dbapi

# The `trino` client package is imported where it is used: a plain test run collects this folder
# (and deselects it) without needing it.

HERE = Path(__file__).resolve().parent
TRINO_VERSION = os.environ.get("TRINO_VERSION", "476")
CACHE = Path(os.environ.get("METASTORE_E2E_CACHE", Path.home() / ".cache" / "metastore-e2e"))
RUNNING = CACHE / "running"
TEMURIN = Path("/usr/lib/jvm/temurin-25-jdk-amd64")
MIN_JAVA = (24, 0, 1)  # TrinoSystemRequirements of 476
TRUSTSTORE_PASSWORD = "metastore-e2e"  # a throwaway trust store of a test CA

TEMP_PREFIX = "metastore-e2e-trino-"
# SELECT is not among the listener's default query types.
QUERY_TYPES = "SELECT,INSERT,DELETE,UPDATE,MERGE,ALTER_TABLE_EXECUTE,DATA_DEFINITION"


class E2ESetupError(RuntimeError):
    """Trino or Java cannot be had: the message says what is missing and how to get it."""


# --- Java ---------------------------------------------------------------------------------------


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def java_version(home: Path) -> tuple[int, ...] | None:
    """The version of the JDK at home, or None when it is not one."""
    java = home / "bin" / "java"
    if not java.is_file() or not (home / "bin" / "keytool").is_file():
        return None
    release = home / "release"
    if release.is_file():
        match = re.search(r'^JAVA_VERSION="([^"]+)"', release.read_text(errors="replace"), re.MULTILINE)
        if match:
            return _version_tuple(match.group(1))
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "([^"]+)"', out)
    return _version_tuple(match.group(1)) if match else None


def jdk_homes(*after_java_home: Path) -> list[Path]:
    """Where a JDK may be, each once, in the order to try: JAVA_HOME, `after_java_home`, then the
    JDKs under /usr/lib/jvm, newest first."""
    candidates: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    candidates += after_java_home
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        found = [(v, p) for p in jvm.iterdir() if p.is_dir() and not p.is_symlink() and (v := java_version(p))]
        candidates += [p for _, p in sorted(found, reverse=True)]
    return list(dict.fromkeys(candidates))


def find_java() -> Path:
    """JAVA_HOME if it is 24.0.1+, else Temurin 25 at its usual path, else the newest JDK 24.0.1+ under
    /usr/lib/jvm."""
    tried: list[str] = []
    for home in jdk_homes(TEMURIN):
        version = java_version(home)
        tried.append(f"{home} ({'.'.join(map(str, version)) if version else 'no JDK'})")
        if version and version >= MIN_JAVA:
            return home
    need = ".".join(map(str, MIN_JAVA))
    raise E2ESetupError(
        f"Trino {TRINO_VERSION} needs Java {need} or newer and none was found; tried {', '.join(tried)}. "
        f"Install Temurin 25 at {TEMURIN} or set JAVA_HOME to a JDK {need}+."
    )


# --- Trino installation ---------------------------------------------------------------------------


def fetch_trino() -> Path:
    """The unpacked Trino installation, downloaded from Maven Central on first use."""
    proc = subprocess.run(
        ["bash", str(HERE / "fetch_trino.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "TRINO_VERSION": TRINO_VERSION, "METASTORE_E2E_CACHE": str(CACHE)},
        check=False,
    )
    if proc.returncode != 0:
        raise E2ESetupError(
            f"could not get Trino {TRINO_VERSION} from Maven Central (tests/e2e/fetch_trino.sh exited "
            f"{proc.returncode}):\n{proc.stderr.strip()}"
        )
    sys.stderr.write(proc.stderr)
    return Path(proc.stdout.strip().splitlines()[-1])


def make_truststore(java_home: Path, ca_pem: Path, directory: Path) -> Path:
    """A PKCS12 trust store holding only our test CA, for the JVM's default SSL context."""
    store = directory / "truststore.p12"
    store.unlink(missing_ok=True)
    subprocess.run(
        [
            str(java_home / "bin" / "keytool"),
            "-importcert",
            "-noprompt",
            "-alias",
            "metastore-test-ca",
            "-file",
            str(ca_pem),
            "-keystore",
            str(store),
            "-storetype",
            "PKCS12",
            "-storepass",
            TRUSTSTORE_PASSWORD,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return store


# --- Process bookkeeping ---------------------------------------------------------------------------


def _register(pgid: int, marker: str) -> Path:
    RUNNING.mkdir(parents=True, exist_ok=True)
    entry = RUNNING / f"{pgid}.json"
    entry.write_text(json.dumps({"pgid": pgid, "owner": os.getpid(), "marker": marker}))
    return entry


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int, grace: float = 20) -> None:
    """SIGTERM to the process group, SIGKILL to what is left after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            # Reap the group leader if it is our child, else it stays a zombie member of the group.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pgid, os.WNOHANG)
            if not _group_alive(pgid):
                return
            time.sleep(0.1)


def _cmdlines_of_group(pgid: int) -> Iterator[str]:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                yield (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def reap() -> list[int]:
    """Kill the process groups recorded by test runs that are gone (killed before their cleanup)."""
    killed: list[int] = []
    for entry in sorted(RUNNING.glob("*.json")) if RUNNING.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            info = json.loads(entry.read_text())
            pgid, owner, marker = int(info["pgid"]), int(info["owner"]), str(info["marker"])
            try:
                os.kill(owner, 0)
                owner_alive = owner != os.getpid()
            except ProcessLookupError:
                owner_alive = False
            if owner_alive:
                continue
            # A recycled process group id would not carry our marker (the run's own folder).
            if any(marker in cmd for cmd in _cmdlines_of_group(pgid)):
                kill_group(pgid, grace=5)
                killed.append(pgid)
            if Path(marker).name.startswith(TEMP_PREFIX):
                shutil.rmtree(marker, ignore_errors=True)
            entry.unlink(missing_ok=True)
    return killed


# --- The server ------------------------------------------------------------------------------------


@dataclass
class TrinoServer:
    home: Path
    java_home: Path
    base: Path
    port: int
    listener_url: str | None  # None: no event listener at all
    process: subprocess.Popen[bytes] | None = None
    entry: Path | None = None
    warmup_query_ids: set[str] = field(default_factory=set)
    _own_base: bool = field(default=False, repr=False)

    @property
    def uri(self) -> str:
        """What Trino calls itself: the listener's namespace is this with the scheme `trino`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def namespace(self) -> str:
        return f"trino://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.base / "trino.log"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def write_config(self, truststore: Path) -> Path:
        etc = self.base / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        data = self.base / "data"
        data.mkdir(exist_ok=True)
        files = {
            "node.properties": f"node.environment=e2e\nnode.id=metastore-e2e\nnode.data-dir={data}\n",
            "jvm.config": "\n".join(
                [
                    "-server",
                    "-Xmx1G",
                    "-XX:+ExplicitGCInvokesConcurrent",
                    "-XX:+ExitOnOutOfMemoryError",
                    "-XX:-OmitStackTraceInFastThrow",
                    "-XX:ReservedCodeCacheSize=256M",
                    "-XX:PerMethodRecompilationCutoff=10000",
                    "-XX:PerBytecodeRecompilationCutoff=10000",
                    "-Djdk.attach.allowAttachSelf=true",
                    "-Djdk.nio.maxCachedBufferSize=2000000",
                    "-Dfile.encoding=UTF-8",
                    "-XX:+EnableDynamicAgentLoading",
                    # The listener's HTTPS client uses the JVM's default trust: our test CA only.
                    f"-Djavax.net.ssl.trustStore={truststore}",
                    f"-Djavax.net.ssl.trustStorePassword={TRUSTSTORE_PASSWORD}",
                    "-Djavax.net.ssl.trustStoreType=PKCS12",
                    "",
                ]
            ),
            "config.properties": "\n".join(
                [
                    "coordinator=true",
                    "node-scheduler.include-coordinator=true",
                    f"http-server.http.port={self.port}",
                    f"discovery.uri={self.uri}",
                    "node.internal-address=127.0.0.1",
                    "query.max-memory=512MB",
                    "query.max-memory-per-node=256MB",
                    "",
                ]
            ),
            "log.properties": "io.trino=INFO\n",
            "catalog/tpch.properties": "connector.name=tpch\n",
            "catalog/memory.properties": "connector.name=memory\nmemory.max-data-per-node=64MB\n",
            "openlineage-event-listener.properties": "\n".join(
                [
                    "event-listener.name=openlineage",
                    "openlineage-event-listener.transport.type=HTTP",
                    f"openlineage-event-listener.transport.url={self.listener_url}",
                    f"openlineage-event-listener.trino.uri={self.uri}",
                    f"openlineage-event-listener.trino.include-query-types={QUERY_TYPES}",
                    "",
                ]
            ),
        }
        if self.listener_url is None:
            del files["openlineage-event-listener.properties"]
        else:
            files["config.properties"] += (
                f"event-listener.config-files={etc / 'openlineage-event-listener.properties'}\n"
            )
        for name, text in files.items():
            (etc / name).write_text(text)
        return etc

    def start(self, truststore: Path, timeout: float = 180) -> TrinoServer:
        etc = self.write_config(truststore)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JAVA_", "_JAVA_", "JDK_"))}
        env["JAVA_HOME"] = str(self.java_home)
        env["PATH"] = f"{self.java_home / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    str(self.home / "bin" / "launcher"),
                    "run",
                    f"--etc-dir={etc}",
                    f"--data-dir={self.base / 'data'}",
                ],
                cwd=self.base,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.entry = _register(self.process.pid, str(self.base))
        try:
            self._wait_until_started(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_started(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.uri, timeout=5) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise E2ESetupError(
                        f"Trino exited with {self.process.returncode} while starting:\n{self.log_text()[-6000:]}"
                    )
                with contextlib.suppress(httpx.TransportError, ValueError):
                    response = client.get("/v1/info")
                    if response.status_code == 200 and response.json().get("starting") is False:
                        break
                time.sleep(0.5)
            else:
                raise E2ESetupError(f"Trino did not start within {timeout} s:\n{self.log_text()[-6000:]}")
        # Started is not yet schedulable: until the coordinator sees itself as an active node, queries
        # fail with "No nodes available".
        import trino.exceptions

        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with self.connect() as conn:
                    cur = conn.cursor()
                    cur.execute("SHOW CATALOGS")
                    catalogs = {row[0] for row in cur.fetchall()}
                if not {"tpch", "memory"} <= catalogs:
                    raise E2ESetupError(f"Trino lacks the tpch or memory catalog: {sorted(catalogs)}")
                # Catalogs reach the node a moment later: scan a tpch table until splits can be
                # scheduled. These queries send lineage too; the tests know their ids and leave them out.
                with self.connect() as conn:
                    cur = conn.cursor()
                    try:
                        cur.execute("SELECT count(*) FROM tpch.tiny.region")
                        cur.fetchall()
                    finally:
                        if cur.query_id:
                            self.warmup_query_ids.add(cur.query_id)
                return
            except trino.exceptions.TrinoQueryError as exc:
                last = exc
                time.sleep(0.5)
        raise E2ESetupError(f"Trino started but ran no query within {timeout} s ({last}):\n{self.log_text()[-6000:]}")

    def stop(self) -> None:
        """Always safe: SIGTERM, then SIGKILL, to Trino's whole process group."""
        if self.process is not None:
            kill_group(self.process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        if self.entry is not None:
            self.entry.unlink(missing_ok=True)
            self.entry = None
        if self._own_base:
            shutil.rmtree(self.base, ignore_errors=True)

    def connect(self, user: str = "e2e") -> trino.dbapi.Connection:
        import trino.dbapi

        return trino.dbapi.Connection(
            host="127.0.0.1", port=self.port, user=user, http_scheme="http", catalog="tpch", schema="tiny"
        )

    def listener_failures(self) -> list[str]:
        """Trino's WARN lines for events its listener could not deliver."""
        return [line for line in self.log_text().splitlines() if "Failed to publish Query" in line]


def start_trino(
    java_home: Path, home: Path, listener_url: str | None, ca_pem: Path, base: Path | None = None, timeout: float = 180
) -> TrinoServer:
    own = base is None
    base = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX)) if base is None else base
    base.mkdir(parents=True, exist_ok=True)
    server = TrinoServer(home, java_home, base, free_port(), listener_url, _own_base=own)
    truststore = make_truststore(java_home, ca_pem, base)
    return server.start(truststore, timeout)


# --- Queries ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    label: str
    sql: str
    fails: bool = False


@dataclass
class QueryRun:
    query: Query
    query_id: str
    seconds: float
    error: str | None = None


def query_set(table: str) -> list[Query]:
    """What the tests run and the measurement times: a join, a CTAS, an INSERT, a run-time failure."""
    return [
        Query(
            "select_join",
            "SELECT r.name AS region, count(*) AS nations FROM tpch.tiny.nation n "
            "JOIN tpch.tiny.region r ON n.regionkey = r.regionkey GROUP BY r.name ORDER BY r.name",
        ),
        Query(
            "ctas",
            f"CREATE TABLE {table} AS SELECT n.nationkey, n.name, r.name AS region FROM tpch.tiny.nation n "
            "JOIN tpch.tiny.region r ON n.regionkey = r.regionkey",
        ),
        Query("insert", f"INSERT INTO {table} SELECT nationkey + 100, name, 'copy' FROM tpch.tiny.nation"),
        # nationkey - nationkey is zero on every row: the division fails while reading the table's data.
        Query("select_fails", f"SELECT name, 100 / (nationkey - nationkey) FROM {table}", fails=True),
    ]


def run_query(conn: trino.dbapi.Connection, query: Query) -> QueryRun:
    import trino.exceptions

    cur = conn.cursor()
    started = time.perf_counter()
    try:
        cur.execute(query.sql)
        cur.fetchall()
    except trino.exceptions.TrinoQueryError as exc:
        seconds = time.perf_counter() - started
        if not query.fails:
            raise
        return QueryRun(query, str(exc.query_id), seconds, f"{exc.error_name}: {exc.message}")
    seconds = time.perf_counter() - started
    if query.fails:
        raise AssertionError(f"{query.label} was expected to fail: {query.sql}")
    assert cur.query_id is not None
    return QueryRun(query, cur.query_id, seconds)


def run_queries(conn: trino.dbapi.Connection, queries: Iterable[Query]) -> list[QueryRun]:
    return [run_query(conn, q) for q in queries]


def run_id_of(query_id: str) -> str:
    """Trino 476's OpenLineage run id: Java's UUID.nameUUIDFromBytes(queryId), a version 3 UUID."""
    digest = bytearray(hashlib.md5(query_id.encode()).digest())  # what Java computes
    digest[6] = (digest[6] & 0x0F) | 0x30
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


def main(argv: list[str]) -> int:
    if argv[1:] == ["reap"]:
        killed = reap()
        print(f"reaped {len(killed)} leftover Trino process group(s)" + (f": {killed}" if killed else ""))
        return 0
    if argv[1:] == ["fetch"]:
        print(fetch_trino())
        return 0
    print(f"usage: {argv[0]} reap|fetch", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
