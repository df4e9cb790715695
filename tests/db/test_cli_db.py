"""`metastore db ...` as an operator meets it: bounded waits, no tracebacks for expected
failures, verify that fails unless the database is at the release's version, a guarded revert."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devtools.localpg import free_port
from metastore import ledger, migrations
from tests.conftest import Database
from tests.support.eventually import eventually
from tests.support.listeners import silent_listener
from tests.support.schema import schema_exists


def metastore_db(*args: str, dsn: str, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    env["METASTORE_ADMIN_DATABASE_URL"] = dsn
    env.update(kwargs.pop("env", {}))
    return subprocess.run(
        [sys.executable, "-m", "metastore", "db", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def test_verify_fails_on_a_database_where_nothing_is_deployed(empty_db: Database) -> None:
    result = metastore_db("verify", dsn=empty_db.owner_dsn)
    assert result.returncode == 1
    assert "nothing is deployed" in result.stdout and ledger.changes()[0].name in result.stdout
    no_traceback(result)


def test_verify_fails_when_the_database_is_ahead_of_the_release(database: Database) -> None:
    with psycopg.connect(database.owner_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO metastore_migrations.schema_version (version, description, installed_by) "
            "VALUES (9999, 'from the future', current_user)"
        )
    result = metastore_db("verify", dsn=database.owner_dsn)
    assert result.returncode == 1
    assert "[9999]" in result.stdout and "unknown to this release" in result.stdout
    # A deploy of this release refuses to put its older functions over the newer schema.
    deploy = metastore_db("deploy", dsn=database.owner_dsn)
    assert deploy.returncode == 1 and "newer than this release" in deploy.stderr
    no_traceback(deploy)


def test_verify_passes_at_the_release_version(database: Database) -> None:
    result = metastore_db("verify", dsn=database.owner_dsn)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "at this release's version" in result.stdout


def test_revert_without_yes_and_without_a_terminal_changes_nothing(database: Database) -> None:
    result = metastore_db("revert", "--to", "0", dsn=database.owner_dsn)
    assert result.returncode == 2
    assert "--yes" in result.stderr and "V0001" in result.stderr
    assert schema_exists(database)
    assert migrations.status(database.owner_dsn)["pending"] == []
    no_traceback(result)


def test_revert_with_yes_reverts(database: Database) -> None:
    result = metastore_db("revert", "--to", "0", "--yes", dsn=database.owner_dsn)
    assert result.returncode == 0, result.stderr
    assert not schema_exists(database)
    # Nothing left to revert: no confirmation needed.
    assert metastore_db("revert", "--to", "0", dsn=database.owner_dsn).returncode == 0


def run_on_a_terminal(args: list[str], dsn: str, answer: str) -> tuple[int, str]:
    """Run with stdin and stderr on a pseudo-terminal, type `answer` once asked."""
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    env["METASTORE_ADMIN_DATABASE_URL"] = dsn
    proc = subprocess.Popen(
        [sys.executable, "-m", "metastore", "db", *args], env=env, stdin=terminal, stderr=terminal, stdout=terminal
    )
    os.close(terminal)
    seen = b""
    deadline = time.monotonic() + 60
    while b"Type 'revert'" not in seen and time.monotonic() < deadline:
        try:
            seen += os.read(controller, 4096)
        except OSError:
            break
    os.write(controller, answer.encode() + b"\n")
    code = proc.wait(60)
    try:
        while chunk := os.read(controller, 4096):
            seen += chunk
    except OSError:
        pass
    os.close(controller)
    return code, seen.decode(errors="replace")


def test_revert_on_a_terminal_asks_and_does_only_what_was_confirmed(database: Database) -> None:
    code, output = run_on_a_terminal(["revert", "--to", "0"], database.owner_dsn, "no")
    assert code == 2 and "not confirmed" in output
    assert schema_exists(database)
    code, output = run_on_a_terminal(["revert", "--to", "0"], database.owner_dsn, "revert")
    assert code == 0, output
    assert not schema_exists(database)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP listener that accepts connections and never says a word."""
    with silent_listener() as port:
        yield port


@pytest.mark.parametrize("command", [["status"], ["verify"], ["deploy"], ["revert", "--to", "0", "--yes"]])
def test_an_unresponsive_server_ends_each_command_within_15_s(silent_server: int, command: list[str]) -> None:
    started = time.monotonic()
    result = metastore_db(
        *command, dsn=f"host=127.0.0.1 port={silent_server} dbname=metastore user=metastore_owner", timeout=30
    )
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed
    assert result.returncode == migrations.EXIT_UNREACHABLE
    assert "did not answer" in result.stderr or "timeout" in result.stderr, result.stderr
    no_traceback(result)


def test_a_missing_role_is_a_clear_message(database: Database) -> None:
    dsn = database.server.dsn_for("nobody_here", database.name)
    result = metastore_db("status", dsn=dsn)
    assert result.returncode == migrations.EXIT_UNREACHABLE
    assert 'role "nobody_here" does not exist' in result.stderr
    no_traceback(result)


def test_an_unreachable_host_is_a_clear_message() -> None:
    for dsn in (
        f"host=127.0.0.1 port={free_port()} dbname=metastore user=metastore_owner",  # refused
        "host=metastore-db.invalid dbname=metastore user=metastore_owner",  # no such name
    ):
        started = time.monotonic()
        result = metastore_db("deploy", dsn=dsn)
        assert time.monotonic() - started < 15
        assert result.returncode == migrations.EXIT_UNREACHABLE
        assert "cannot connect to the database" in result.stderr
        no_traceback(result)


def test_a_missing_privilege_is_a_clear_message(empty_db: Database) -> None:
    # The service's role may not create schemas: a deploy as that role is a misconfiguration.
    result = metastore_db("deploy", dsn=empty_db.service_dsn)
    assert result.returncode == 1
    assert "42501" in result.stderr and "METASTORE_ADMIN_DATABASE_URL" in result.stderr
    no_traceback(result)


def test_libpq_options_newer_than_psycopg2_knew_work_as_in_serve(empty_db: Database) -> None:
    # require_auth and load_balance_hosts (libpq 16), sslnegotiation (17): accepted by the
    # service's psycopg 3; pgmigrate's psycopg2 on Debian's libpq 15 crashed on them.
    server = empty_db.server
    url = (
        f"postgresql://metastore_owner@127.0.0.1:{server.port}/{empty_db.name}"
        "?load_balance_hosts=disable&sslnegotiation=postgres&require_auth=none"
    )
    assert metastore_db("deploy", dsn=url).returncode == 0
    result = metastore_db("verify", dsn=url)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_statement_deadline_bounds_a_stuck_deploy(database: Database) -> None:
    # Another session holds the migrations lock: the deploy waits at most its statement deadline.
    with psycopg.connect(database.owner_dsn) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(7262001)")
        started = time.monotonic()
        result = metastore_db("deploy", dsn=database.owner_dsn, env={"METASTORE_ADMIN_STATEMENT_TIMEOUT_S": "2"})
        elapsed = time.monotonic() - started
    assert result.returncode == 1 and "57014" in result.stderr, result.stderr
    assert elapsed < 15
    no_traceback(result)


def test_retention_runs_as_the_owner_and_reports_what_it_did(database: Database) -> None:
    result = metastore_db("retention", "--keep", "30 days", dsn=database.owner_dsn)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert "cutoff" in report
    too_short = metastore_db("retention", "--keep", "1 hour", dsn=database.owner_dsn)
    assert too_short.returncode == 1 and "22023" in too_short.stderr
    as_service = metastore_db("retention", dsn=database.service_dsn)
    assert as_service.returncode == 1 and "42501" in as_service.stderr
    no_traceback(as_service)


def test_status_reads_through_the_connection_string_only(database: Database, tmp_path: Path) -> None:
    result = metastore_db("status", dsn=database.owner_dsn, cwd=tmp_path)
    assert json.loads(result.stdout)["pending"] == []


def test_deploy_goes_to_the_latest_change_only(empty_db: Database) -> None:
    latest = ledger.latest_version()
    # This release's functions name the tables of every change: a store at 4 under them failed
    # at run time (ingest answered 500). Refused, with the reason, and nothing is changed.
    partial = metastore_db("deploy", "--to", "4", dsn=empty_db.owner_dsn)
    assert partial.returncode == 2, partial.stderr
    assert f"deploys to its latest change, {latest}, only" in partial.stderr
    assert "that release's image" in partial.stderr and "Nothing was changed" in partial.stderr
    assert not schema_exists(empty_db)
    assert migrations.status(empty_db.owner_dsn)["applied"] == []
    # No such change: refused, where it used to deploy to the latest.
    unknown = metastore_db("deploy", "--to", "99", dsn=empty_db.owner_dsn)
    assert unknown.returncode == 2 and "has no change 99" in unknown.stderr
    assert not schema_exists(empty_db)
    no_traceback(unknown)
    done = metastore_db("deploy", "--to", str(latest), dsn=empty_db.owner_dsn)
    assert done.returncode == 0, done.stderr
    again = metastore_db("deploy", dsn=empty_db.owner_dsn)
    assert again.returncode == 0 and "nothing to deploy" in again.stdout


def test_revert_says_what_it_did_and_refuses_an_unknown_change(database: Database) -> None:
    versions = [c.version for c in ledger.changes()]
    latest, previous = versions[-1], versions[-2]
    unknown = metastore_db("revert", "--to", "99", "--yes", dsn=database.owner_dsn)
    assert unknown.returncode == 2 and "has no change 99" in unknown.stderr
    assert f"its changes are {ledger.describe_versions()}" in unknown.stderr
    # A number no change of this release has, between two that are (when one is left unused).
    gaps = sorted(set(range(1, latest)) - set(versions))
    if gaps:
        gap = metastore_db("revert", "--to", str(gaps[0]), "--yes", dsn=database.owner_dsn)
        assert gap.returncode == 2 and f"has no change {gaps[0]}" in gap.stderr, gap.stderr
    nothing = metastore_db("revert", "--to", str(latest), dsn=database.owner_dsn)
    assert nothing.returncode == 0, nothing.stderr
    assert f"nothing to revert: the schema is at version {latest}" in nothing.stdout
    assert migrations.status(database.owner_dsn)["applied"] == versions
    reverted = metastore_db("revert", "--to", str(previous), "--yes", dsn=database.owner_dsn)
    assert reverted.returncode == 0, reverted.stderr
    assert f"reverted V{latest:04d}; the schema is at version {previous}" in reverted.stdout
    assert "metastore db deploy with its image" in reverted.stdout
    below = metastore_db("revert", "--to", str(latest), dsn=database.owner_dsn)
    assert below.returncode == 0 and f"the schema is at version {previous}, which --to {latest} keeps" in below.stdout


@pytest.mark.parametrize(
    ("dsn", "words"),
    [
        ("host=127.0.0.1 dbname=metastore password=sec ret", 'not a valid connection string: missing "=" after "..."'),
        ("host=127.0.0.1 dbname=metastore frobnicate=1", 'invalid connection option "frobnicate"'),
        ("host=localhost port=abc dbname=metastore user=metastore_owner", "port 'abc' is not a TCP port"),
        ("postgresql://metastore_owner:secret@localhost:abc/metastore", "port 'abc' is not a TCP port"),
        ("host=127.0.0.1 port=5432,x dbname=metastore", "port 'x' is not a TCP port"),
        ("host=127.0.0.1 connect_timeout=soon dbname=metastore", "connect_timeout 'soon' is not a whole number"),
        ("host=127.0.0.1 sslmode=maybe dbname=metastore password=secret", 'invalid sslmode value: "maybe"'),
    ],
)
def test_a_bad_connection_string_is_a_setting_error(dsn: str, words: str) -> None:
    # Exit 2, as --help says for a wrong setting: not 1, nor 3 ("failed to resolve host").
    for command in (["status"], ["deploy"], ["verify"]):
        result = metastore_db(*command, dsn=dsn)
        assert result.returncode == 2, (command, result.stderr)
        assert words in result.stderr, result.stderr
        assert "sec ret" not in result.stderr and "secret" not in result.stderr  # a password is never echoed
        no_traceback(result)


def test_the_exit_codes_are_in_the_help() -> None:
    for command in ([], ["deploy"], ["revert"]):
        result = subprocess.run(
            [sys.executable, "-m", "metastore", "db", *command, "--help"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0
        assert "exit status:" in result.stdout
        assert "2  a setting or an argument is wrong" in result.stdout
        assert "3  the database could not be reached" in result.stdout


LOCK_EVENTS = "LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE"


def test_each_command_names_itself_in_pg_stat_activity(database: Database) -> None:
    # Each waits behind a lock the test holds, long enough to be seen. The connection string's
    # own application_name does not hide which component a session is.
    dsn = f"{database.owner_dsn} application_name=metastore"
    cases = [
        (["deploy"], "SELECT pg_advisory_xact_lock(7262001)", "metastore-migrate"),
        (
            ["retention", "--keep", "30 days"],
            "LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE",
            "metastore-retention",
        ),
        (["backfill"], "LOCK TABLE metastore.events IN ACCESS EXCLUSIVE MODE", "metastore-backfill"),
        (["hide", "--namespace", "t://x"], "LOCK TABLE metastore.hidden IN ACCESS EXCLUSIVE MODE", "metastore-hide"),
    ]
    for args, lock, name in cases:
        with psycopg.connect(database.owner_dsn) as holder, psycopg.connect(database.owner_dsn, autocommit=True) as eye:
            holder.execute(lock)  # type: ignore[arg-type]
            proc = subprocess.Popen(
                [sys.executable, "-m", "metastore", "db", *args],
                env={
                    **{k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))},
                    "METASTORE_ADMIN_DATABASE_URL": dsn,
                    "PGAPPNAME": "from-the-environment",
                },
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:

                def named(wanted: str = name) -> set[str] | None:
                    rows = eye.execute(
                        "SELECT application_name FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                        (database.name,),
                    ).fetchall()
                    names = {r[0] for r in rows}
                    return names if wanted in names else None

                names = eventually(named, timeout=30, interval=0.1, what=f"a connection named {name!r}")
                assert name in names, (args, names)
                assert names & {"metastore", "from-the-environment"} == set(), names
            finally:
                holder.rollback()
                proc.wait(120)


def test_roles_the_operator_names_may_hold_connect(database: Database) -> None:
    su = database.server.dsn
    suffix = uuid.uuid4().hex[:8]
    backup, cdc = f"backup_{suffix}", f"cdc_{suffix}"
    with psycopg.connect(su, autocommit=True) as conn:
        for role in (backup, cdc):
            conn.execute(f"CREATE ROLE {role} LOGIN")  # type: ignore[arg-type]
        conn.execute(f"GRANT CONNECT ON DATABASE {database.name} TO {backup}")  # type: ignore[arg-type]
    named = {"METASTORE_ALLOWED_CONNECT_ROLES": f"{backup}, audit_{suffix}"}
    # Unnamed, the backup role's CONNECT fails verify (and so every deploy), as before.
    result = metastore_db("verify", dsn=database.owner_dsn)
    assert result.returncode == 1 and f"CONNECT database {database.name} to {backup}" in result.stdout
    # Named, it passes, for verify and for the deploy that ends with it.
    for command in ("verify", "deploy"):
        result = metastore_db(command, dsn=database.owner_dsn, env=named)
        assert result.returncode == 0, result.stdout + result.stderr
    with psycopg.connect(su, autocommit=True) as conn:
        row = conn.execute("SELECT has_database_privilege(%s, %s, 'CONNECT')", (backup, database.name)).fetchone()
        assert row == (True,)  # verify looked at the database without it, and changed nothing
        # Anything else is still reported: another role's CONNECT, and the named role's other privileges.
        conn.execute(f"GRANT CONNECT ON DATABASE {database.name} TO {cdc}")  # type: ignore[arg-type]
    result = metastore_db("verify", dsn=database.owner_dsn, env=named)
    assert result.returncode == 1 and f"to {cdc}" in result.stdout and f"to {backup}" not in result.stdout
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute(f"REVOKE CONNECT ON DATABASE {database.name} FROM {cdc}")  # type: ignore[arg-type]
        owner.execute(f"GRANT USAGE ON SCHEMA metastore TO {backup}")  # type: ignore[arg-type]
    result = metastore_db("verify", dsn=database.owner_dsn, env=named)
    assert result.returncode == 1 and f"USAGE schema metastore to {backup}" in result.stdout
    public = metastore_db("verify", dsn=database.owner_dsn, env={"METASTORE_ALLOWED_CONNECT_ROLES": "public"})
    assert public.returncode == 2 and "PUBLIC is never allowed" in public.stderr
    with psycopg.connect(database.owner_dsn, autocommit=True) as owner:
        owner.execute(f"REVOKE ALL ON SCHEMA metastore FROM {backup}")  # type: ignore[arg-type]
        owner.execute(f"REVOKE ALL ON DATABASE {database.name} FROM {backup}, {cdc}")  # type: ignore[arg-type]
    with psycopg.connect(su, autocommit=True) as conn:
        conn.execute(f"DROP ROLE {backup}, {cdc}")  # type: ignore[arg-type]


def test_lines_for_a_person_and_json_lines_for_a_job(empty_db: Database) -> None:
    """Text on request (a terminal's default), JSON lines otherwise: the same facts either way."""
    job = metastore_db("deploy", "--log-format", "json", dsn=empty_db.owner_dsn)
    assert job.returncode == 0, job.stderr
    records = [json.loads(line) for line in job.stdout.splitlines()]
    assert any("group roles" in r["message"] for r in records)
    assert not any("{" in r["message"] for r in records), "a structure printed inside a message"

    person = metastore_db("deploy", "--log-format", "text", dsn=empty_db.owner_dsn)
    assert person.returncode == 0, person.stderr
    lines = person.stdout.splitlines()
    assert lines and all(line.startswith("metastore: ") for line in lines)
    assert any("nothing to deploy" in line for line in lines)

    status = metastore_db("status", "--log-format", "text", dsn=empty_db.owner_dsn)
    assert status.returncode == 0
    assert "pending: none" in status.stdout.splitlines()
    machine = json.loads(metastore_db("status", dsn=empty_db.owner_dsn).stdout)
    assert machine["pending"] == [] and machine["applied"] == [c.version for c in ledger.changes()]


def test_on_a_terminal_the_lines_are_text(empty_db: Database) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PG"))}
    env["METASTORE_ADMIN_DATABASE_URL"] = empty_db.owner_dsn
    main, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "metastore", "db", "status"], env=env, stdout=follower, stderr=subprocess.DEVNULL
        )
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            out += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(main)
    text = out.decode().replace("\r\n", "\n")
    assert "pending: " in text and not text.lstrip().startswith("{")
