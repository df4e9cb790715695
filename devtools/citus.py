"""A throwaway Citus cluster on 127.0.0.1 (a coordinator and workers), for tests and benchmarks.

Citus comes from tests/citus/build_citus.sh: built once from the vendored source against
Debian's PostgreSQL 15 and cached, in a private copy of that installation. Each node is a
devtools.localpg.LocalPostgres started with `citus` preloaded. The cluster object is the
coordinator (what clients connect to) and knows its workers: a database exists on every node
under one name, and the coordinator reaches the workers' copy by that name.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from devtools.localpg import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tests" / "citus" / "build_citus.sh"

# Few shards, so that a test's partitions stay few; four over two workers still puts rows on both.
OPTIONS = (
    "-c shared_preload_libraries=citus -c max_worker_processes=64 -c max_connections=300 "
    "-c citus.shard_count=4 -c max_prepared_transactions=200 -c max_locks_per_transaction=256"
)


def citus_bin() -> Path:
    """The bin directory of PostgreSQL 15 with Citus: METASTORE_CITUS_BIN, or built (once) now."""
    explicit = os.environ.get("METASTORE_CITUS_BIN")
    if explicit:
        return Path(explicit)
    done = subprocess.run(["bash", str(BUILD)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(done.stdout.strip().splitlines()[-1])


class Node(LocalPostgres):
    """A node's server runs with its own folder as HOME: libpq, which Citus uses between nodes,
    reads ~/.postgresql/ and fails on a HOME the server's user may not read (root's, when root
    starts it as an unprivileged user)."""

    def _run(self, *args: str, timeout: float = 60) -> None:
        cmd = [str(self.bin / args[0]), *args[1:]]
        env = {**os.environ, "HOME": str(self.base)}
        subprocess.run(cmd, check=True, user=self.run_as, timeout=timeout, capture_output=True, cwd=self.base, env=env)


class CitusCluster(Node):
    """The coordinator, with `workers` beside it. Durable or not like LocalPostgres."""

    def __init__(self, workers: int = 2, bin_path: Path | None = None, options: str = "") -> None:
        binaries = bin_path or citus_bin()
        super().__init__(bin_path=binaries)
        self.options = f"{OPTIONS} {options}"
        self.workers: list[LocalPostgres] = [Node(bin_path=binaries) for _ in range(workers)]

    @property
    def nodes(self) -> list[LocalPostgres]:
        return [self, *self.workers]

    def start(self, durable: bool = False, options: str = "") -> CitusCluster:
        for worker in self.workers:
            LocalPostgres.start(worker, durable, f"{self.options} {options}")
        super().start(durable, f"{self.options} {options}")
        return self

    def cleanup(self) -> None:
        for worker in self.workers:
            worker.cleanup()
        super().cleanup()

    def __enter__(self) -> CitusCluster:
        return self.start()

    def create_database(self, name: str) -> None:
        """What a DBA does for a database of the store on Citus (docs/operations.md): the database
        on every node with the citus extension in it, and the workers added on the coordinator."""
        for node in self.nodes:
            with psycopg.connect(node.dsn, autocommit=True) as conn:
                if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                    # CREATE DATABASE takes no parameters: the name goes in as a quoted identifier.
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            with psycopg.connect(node.dsn_for("postgres", name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        with psycopg.connect(self.dsn_for("postgres", name), autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.port,))
            for worker in self.workers:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (worker.port,))

    def provision(self, name: str, owner: str, service: str, roles: tuple[str, str] | None = None) -> None:
        """The database (create_database), then the roles of docs/operations.md, made in it on the
        coordinator so that Citus makes them on every node: the owner (which then owns the
        database), the installation's group roles (`roles`, by default <name>_app and
        <name>_reader), the cluster's metastore_app and metastore_reader, and the service's
        login role in the app role. Roles that exist already are left as they are."""
        from metastore import migrations

        app, reader = roles or migrations.default_group_roles(name)
        self.create_database(name)
        with psycopg.connect(self.dsn_for("postgres", name), autocommit=True) as conn:
            for role, login in (
                (owner, True),
                ("metastore_app", False),
                ("metastore_reader", False),
                (app, False),
                (reader, False),
                (service, True),
            ):
                if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(
                        sql.SQL("CREATE ROLE {} " + ("LOGIN" if login else "NOLOGIN")).format(sql.Identifier(role))
                    )
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(app), sql.Identifier(service)))
            conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(owner)))

    def copy_database(self, template: str, name: str, owner: str) -> None:
        """CREATE DATABASE name TEMPLATE template on every node: a copy of a whole Citus database,
        shards and metadata alike, so the copies form a cluster of their own (the coordinator
        reaches the workers' databases by its own database's name). Citus refuses to propagate
        such a CREATE DATABASE, so each node makes its own."""

        def copy(node: LocalPostgres) -> None:
            with psycopg.connect(node.dsn, autocommit=True) as conn:
                release_template(conn, template)
                # FILE_COPY: a copy of the files, much quicker than WAL_LOG's page by page when the
                # test servers run without fsync (hundreds of shards and partitions per database).
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {} OWNER {} STRATEGY FILE_COPY").format(
                        sql.Identifier(name), sql.Identifier(template), sql.Identifier(owner)
                    )
                )

        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(copy, self.nodes))

    def drop_database(self, name: str) -> None:
        """The coordinator's copy first: its sessions hold connections to the workers' copies."""

        def drop(node: LocalPostgres) -> None:
            with psycopg.connect(node.dsn, autocommit=True) as conn:
                for attempt in range(10):
                    try:
                        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
                        return
                    except psycopg.errors.ObjectInUse:
                        # A background worker of Citus, which FORCE does not end, still leaving.
                        if attempt == 9:
                            raise

        drop(self)
        with ThreadPoolExecutor(len(self.workers)) as pool:
            list(pool.map(drop, self.workers))


def release_template(conn: psycopg.Connection[Any], template: str) -> None:
    """A database can be copied only while nobody is connected to it: Citus's maintenance daemon
    of that database and connections cached by the other nodes are. New connections are refused
    from now on (the template is only ever copied), and those there are ended."""
    conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(sql.Identifier(template)))
    for _ in range(50):
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (template,),
            )
        left = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (template,)
        ).fetchone()
        if left and left[0] == 0:
            return
    raise RuntimeError(f"sessions of database {template} did not end")
