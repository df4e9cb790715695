"""Installations sharing a PostgreSQL cluster: each has its own group roles,
so one installation's login roles can neither connect to another's database nor, were they
let in, call its functions or read its views. Roles are set up as docs/operations.md says: a
superuser (the DBA) creates them, the owner deploys."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from devtools.localpg import LocalPostgres
from metastore import migrations
from tests.conftest import ROOT, ingest
from tests.support.checks import assert_each_refused
from tests.support.generated import allow_two_weeks_ahead, generated_events


@dataclass(frozen=True)
class Installation:
    server: LocalPostgres
    db: str
    owner: str
    service: str
    reader: str

    def dsn(self, role: str, db: str | None = None) -> str:
        return self.server.dsn_for(role, db or self.db)


def dba(server: LocalPostgres, *statements: str) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def install(server: LocalPostgres, app_role: str, reader_role: str, tag: str) -> Installation:
    """The DBA's part of docs/operations.md, Roles, for a database named <tag>_<random>."""
    suffix = uuid.uuid4().hex[:8]
    inst = Installation(server, f"{tag}_{suffix}", f"{tag}_owner_{suffix}", f"{tag}_svc_{suffix}", f"{tag}_rd_{suffix}")
    dba(
        server,
        f"CREATE ROLE {inst.owner} LOGIN",
        f"CREATE DATABASE {inst.db} OWNER {inst.owner}",
        f"CREATE ROLE {app_role} NOLOGIN",
        f"CREATE ROLE {reader_role} NOLOGIN",
        f"CREATE ROLE {inst.service} LOGIN IN ROLE {app_role}",
        f"CREATE ROLE {inst.reader} LOGIN IN ROLE {reader_role}",
    )
    return inst


def deploy_cli(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "METASTORE_ADMIN_DATABASE_URL": dsn}
    env.pop("METASTORE_APP_ROLE", None)
    env.pop("METASTORE_READER_ROLE", None)
    return subprocess.run(
        [sys.executable, "-m", "metastore", "db", "deploy", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def recorded(inst: Installation) -> tuple[str, str]:
    with psycopg.connect(inst.dsn(inst.owner)) as conn:
        row = conn.execute("SELECT app_role, reader_role FROM metastore.group_roles WHERE chosen").fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.fixture
def two(pg_server: LocalPostgres) -> Iterator[tuple[Installation, Installation]]:
    # A takes the default names (<database>_app, _reader); B names its roles on the command line.
    a_db = f"inst_a_{uuid.uuid4().hex[:8]}"
    a_app, a_reader = migrations.default_group_roles(a_db)
    a = Installation(pg_server, a_db, f"{a_db}_owner", f"{a_db}_svc", f"{a_db}_rd")
    dba(
        pg_server,
        f"CREATE ROLE {a.owner} LOGIN",
        f"CREATE DATABASE {a.db} OWNER {a.owner}",
        f"CREATE ROLE {a_app} NOLOGIN",
        f"CREATE ROLE {a_reader} NOLOGIN",
        f"CREATE ROLE {a.service} LOGIN IN ROLE {a_app}",
        f"CREATE ROLE {a.reader} LOGIN IN ROLE {a_reader}",
    )
    migrations.deploy(a.dsn(a.owner))
    assert recorded(a) == (a_app, a_reader)

    tag = uuid.uuid4().hex[:8]
    b = install(pg_server, f"lineage_b_{tag}_app", f"lineage_b_{tag}_reader", "inst_b")
    done = deploy_cli(b.dsn(b.owner), "--app-role", f"lineage_b_{tag}_app", "--reader-role", f"lineage_b_{tag}_reader")
    assert done.returncode == 0, done.stderr
    assert recorded(b) == (f"lineage_b_{tag}_app", f"lineage_b_{tag}_reader")
    yield a, b
    dba(pg_server, f"DROP DATABASE {a.db} WITH (FORCE)", f"DROP DATABASE {b.db} WITH (FORCE)")


def test_one_installations_roles_cannot_use_another(two: tuple[Installation, Installation]) -> None:
    a, b = two
    for inst in (a, b):
        assert migrations.verify(inst.dsn(inst.owner)) == []
        with psycopg.connect(inst.dsn(inst.service), autocommit=True) as own:
            assert ingest(own, generated_events(1, inst.db)[0])[0] == "stored"
        with psycopg.connect(inst.dsn(inst.reader), autocommit=True) as own:
            assert own.execute("SELECT count(*) FROM metastore.datasets_view").fetchone() == (3,)

    for intruder, victim in ((a, b), (b, a)):
        for role in (intruder.service, intruder.reader):
            with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
                psycopg.connect(victim.dsn(role, victim.db)).close()

    # Were the database let in (a DBA's mistake), the schema still is not: nothing of B's is A's.
    dba(b.server, f"GRANT CONNECT ON DATABASE {b.db} TO {a.service}")
    with psycopg.connect(b.dsn(a.service), autocommit=True) as intruder_conn:
        assert_each_refused(
            intruder_conn,
            "SELECT metastore.ingest_event('{}'::bytea)",
            "SELECT metastore.list_datasets()",
            "SELECT count(*) FROM metastore.datasets_view",
            "SELECT count(*) FROM metastore.events",
        )
    # ... and verify names the stray grant.
    failures = migrations.verify(b.dsn(b.owner))
    assert len(failures) == 1 and "V0003" in failures[0] and a.service in failures[0]


def test_an_existing_installation_keeps_its_roles_and_can_move_to_its_own(pg_server: LocalPostgres) -> None:
    # Deployed before change 3 (at change 2): privileges on the cluster-wide metastore_app and metastore_reader.
    inst = install(pg_server, f"app_{uuid.uuid4().hex[:8]}", f"reader_{uuid.uuid4().hex[:8]}", "old")
    legacy_service = f"legacy_svc_{uuid.uuid4().hex[:8]}"
    dba(pg_server, f"CREATE ROLE {legacy_service} LOGIN IN ROLE metastore_app")
    migrations.deploy(inst.dsn(inst.owner), target=2, partial=True)  # before change 3
    allow_two_weeks_ahead(inst.dsn(inst.owner))
    with psycopg.connect(inst.dsn(legacy_service), autocommit=True) as conn:
        # This release's functions store events from change 5 on; refusing one needs change 2.
        assert ingest(conn, {**generated_events(1, "old")[0], "eventTime": "soon"})[0] == "rejected"

    # The upgrade records those names and keeps them: the running service goes on working.
    migrations.deploy(inst.dsn(inst.owner))
    assert recorded(inst) == ("metastore_app", "metastore_reader")
    assert migrations.verify(inst.dsn(inst.owner)) == []
    with psycopg.connect(inst.dsn(legacy_service), autocommit=True) as conn:
        assert ingest(conn, generated_events(2, "old")[1])[0] == "stored"
    with psycopg.connect(pg_server.dsn, autocommit=True) as su:
        row = su.execute("SELECT has_database_privilege('public', %s, 'CONNECT')", (inst.db,)).fetchone()
        assert row == (False,)

    # Moving to roles of its own (the service made a member first): metastore_app keeps nothing here.
    app, reader = migrations.default_group_roles(inst.db)
    dba(pg_server, f"CREATE ROLE {app} NOLOGIN", f"CREATE ROLE {reader} NOLOGIN", f"GRANT {app} TO {inst.service}")
    done = deploy_cli(inst.dsn(inst.owner), "--app-role", app, "--reader-role", reader)
    assert done.returncode == 0, done.stderr
    assert recorded(inst) == (app, reader)
    assert migrations.verify(inst.dsn(inst.owner)) == []
    with psycopg.connect(inst.dsn(inst.service), autocommit=True) as conn:
        assert ingest(conn, generated_events(3, "old")[2])[0] == "stored"
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(inst.dsn(legacy_service)).close()
    dba(pg_server, f"DROP DATABASE {inst.db} WITH (FORCE)")


@pytest.mark.parametrize(
    ("args", "setting"),
    [
        (["--app-role", "Robert'); DROP TABLE x; --"], "--app-role"),
        (["--reader-role", "pg_signal_backend"], "--reader-role"),
        (["--app-role", "a" * 64], "--app-role"),
    ],
)
def test_bad_role_names_are_refused_naming_the_setting(args: list[str], setting: str) -> None:
    done = deploy_cli("host=127.0.0.1 port=1 dbname=none", *args)
    assert done.returncode == 2 and setting in done.stderr


def test_a_login_role_cannot_become_a_group_role(database: Any) -> None:
    with (
        psycopg.connect(database.owner_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InvalidParameterValue),
    ):
        conn.execute("SELECT metastore.use_group_roles('metastore_service', NULL)")


@pytest.mark.parametrize(
    ("dbname", "roles"),
    [
        ("metastore", ("metastore_app", "metastore_reader")),
        ("Lineage-Prod", ("lineage_prod_app", "lineage_prod_reader")),
        ("1st", ("_1st_app", "_1st_reader")),
        ("pg_x", ("_pg_x_app", "_pg_x_reader")),
        ("d" * 63, ("d" * 59 + "_app", "d" * 56 + "_reader")),
    ],
)
def test_default_group_roles_are_valid_names(dbname: str, roles: tuple[str, str]) -> None:
    assert migrations.default_group_roles(dbname) == roles
    for role in roles:
        migrations.check_role_name(role, "test")


def test_the_deploy_command_fails_when_verify_does(two: tuple[Installation, Installation]) -> None:
    a, _ = two
    dba(a.server, f"GRANT CONNECT ON DATABASE {a.db} TO PUBLIC")
    assert deploy_cli(a.dsn(a.owner)).returncode == 0  # the deploy itself revokes it again
    with psycopg.connect(a.dsn(a.owner), autocommit=True) as owner:
        owner.execute(f"GRANT SELECT ON metastore.rejected_events TO {a.reader}")  # type: ignore[arg-type]
    done = deploy_cli(a.dsn(a.owner))
    assert done.returncode == 1 and "V0001" in done.stdout and "verify failed" in done.stdout
