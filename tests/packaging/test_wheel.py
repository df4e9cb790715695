"""The container image's recipe, without a container engine.

The Dockerfile's build context becomes a wheel (`pip wheel --no-deps`), the wheel goes into a
clean virtualenv with its dependencies from PyPI, and that virtualenv's `metastore` deploys the
schema into an empty database and serves HTTPS. As in the image, bytecode writing is off, and the
installed files, the home and the working directory must be left untouched: the service writes
only to TMPDIR and its log file, as it must under a read-only root filesystem.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from devtools.localpg import LocalPostgres, free_port
from metastore import ledger
from tests.conftest import APP_ROLE, FIXTURES, OWNER, READER_ROLE, ROOT, Database, drop_database, load_fixture
from tests.support.certs import TLSFiles
from tests.support.servers import Server, wait_until_serving

DOCKERFILE = ROOT / "Dockerfile"
# What the builder stage of the Dockerfile copies from the build context (checked below).
BUILD_CONTEXT = ("pyproject.toml", "README.md", "service/", "db/")
SKIP = shutil.ignore_patterns("__pycache__", "*.pyc")


def run(*cmd: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a command to completion; its stdout, or a failure that shows both outputs."""
    args = [str(c) for c in cmd]
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def snapshot(*dirs: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under dirs, with size and modification time."""
    seen: dict[str, tuple[int, int]] = {}
    for top in dirs:
        for path in [top, *top.rglob("*")]:
            st = path.lstat()
            seen[str(path)] = (st.st_size, st.st_mtime_ns)
    return seen


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built as the image builds it: from the Dockerfile's build context alone (no .git, no
    .gitignore, no tests), with pip's isolated build of the pyproject's backend."""
    context = tmp_path_factory.mktemp("context")
    for name in BUILD_CONTEXT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, context / name, ignore=SKIP)
        else:
            shutil.copy2(source, context / name)
    out = tmp_path_factory.mktemp("wheels")
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", out, context)
    (built,) = out.glob("metastore-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv with the wheel and its dependencies, then without pip, as in the image."""
    path = tmp_path_factory.mktemp("venv")
    run(sys.executable, "-m", "venv", path)
    run(path / "bin" / "python", "-m", "pip", "install", "--quiet", wheel)
    run(path / "bin" / "python", "-m", "pip", "uninstall", "--yes", "--quiet", "pip")
    return path


@pytest.fixture
def empty_database(pg_server: LocalPostgres) -> Iterator[Database]:
    """A database owned by the owner role with nothing in it: the wheel's deploy builds the schema."""
    db = Database(pg_server, f"pkg_{uuid.uuid4().hex[:12]}")
    with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db.name} OWNER {OWNER}")
    yield db
    drop_database(db)


def test_the_dockerfile_copies_the_build_context() -> None:
    sources = []
    for line in DOCKERFILE.read_text("utf-8").splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            sources.extend(line.split()[1:-1])
    assert sorted(sources) == sorted(BUILD_CONTEXT)


def test_the_wheel_holds_the_package_and_the_database_changes(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    package = ROOT / "service" / "metastore"
    expected = {
        f"metastore/{path.relative_to(package).as_posix()}"
        for path in package.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    for kind in ("deploy", "revert", "verify", "functions"):
        sql_files = sorted((ROOT / "db" / kind).glob("*.sql"))
        assert sql_files, kind
        expected |= {f"metastore/db/{kind}/{path.name}" for path in sql_files}
    assert {"metastore/openapi.json", "metastore/queries.sql", "metastore/db/deploy/V0001__core_schema.sql"} <= expected
    assert sorted(expected - names) == []
    assert not [n for n in names if n.startswith(("tests/", "service/", "db/", "devtools/", "bench/"))]
    # The throwaway PostgreSQL and `make dev` are development tools (devtools/), not the product.
    assert not [n for n in names if Path(n).stem in ("localpg", "dev")]
    assert "metastore = metastore.cli:main" in entry_points


def test_the_installed_wheel_deploys_and_serves(
    venv: Path, empty_database: Database, tls_files: TLSFiles, tmp_path: Path
) -> None:
    home, workdir, scratch, logs = (tmp_path / name for name in ("home", "work", "tmp", "log"))
    for directory in (home, workdir, scratch, logs):
        directory.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PYTHON", "OTEL_", "PG"))}
    env.update({"HOME": str(home), "TMPDIR": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"})
    metastore = venv / "bin" / "metastore"
    untouched = snapshot(venv, home, workdir)

    # The code and the SQL files come from the virtualenv, not from this checkout.
    where = run(
        venv / "bin" / "python",
        "-c",
        "import metastore, metastore.migrations as m; print(metastore.__file__); print(m.db_dir())",
        env=env,
        cwd=workdir,
    ).split()
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert where == [str(site / "metastore" / "__init__.py"), str(site / "metastore" / "db")]

    # The group roles given by the environment: those the test service role is a member of.
    admin = {
        **env,
        "METASTORE_ADMIN_DATABASE_URL": empty_database.owner_dsn,
        "METASTORE_APP_ROLE": APP_ROLE,
        "METASTORE_READER_ROLE": READER_ROLE,
    }
    run(metastore, "db", "deploy", env=admin, cwd=workdir)
    status = json.loads(run(metastore, "db", "status", env=admin, cwd=workdir))
    assert status == {
        "applied": [c.version for c in ledger.changes()],
        "pending": [],
        "unknown": [],
        "expected_version": ledger.latest_version(),
    }
    run(metastore, "db", "verify", env=admin, cwd=workdir)

    port = free_port()
    log_file = logs / "metastore.py.json"
    serve_env = {
        **env,
        "METASTORE_DATABASE_URL": empty_database.service_dsn,
        "METASTORE_HOST": "127.0.0.1",
        "METASTORE_PORT": str(port),
        "METASTORE_TLS_CERT": str(tls_files.cert),
        "METASTORE_TLS_KEY": str(tls_files.key),
        "METASTORE_LOG_FILE": str(log_file),
    }
    server_log = tmp_path / "server.log"
    with server_log.open("wb") as out:
        process = subprocess.Popen(
            [str(metastore), "serve"],
            env=serve_env,
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(process, f"https://localhost:{port}", tls_files.ca, server_log)
    try:
        wait_until_serving(server)
        with server.client() as http:
            ready = http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["schema_version"] == ledger.latest_version()
            event = load_fixture(FIXTURES / "trino" / "04-ctas-complete.json")
            assert http.post("/api/v1/lineage", json=event).status_code == 201
            names = {d["name"] for d in http.get("/api/v1/datasets").json()["datasets"]}
            assert {"tpch.tiny.nation", "memory.default.nation_copy"} <= names
            assert http.get("/api/v1/openapi.json").status_code == 200
            assert http.get("/ui/").headers["content-type"].startswith("text/html")
    finally:
        code = server.stop()
    assert code == 0, server_log.read_text()

    lines = [json.loads(line) for line in log_file.read_text("utf-8").splitlines()]
    assert lines and all({"asctime", "levelname", "name", "message"} <= line.keys() for line in lines)
    assert snapshot(venv, home, workdir) == untouched


def test_the_server_refuses_to_start_without_a_certificate(venv: Path, tmp_path: Path) -> None:
    # The image's default command with no settings: a clear configuration error, exit code 2.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("METASTORE_", "PYTHON", "OTEL_"))}
    env["METASTORE_DATABASE_URL"] = "host=127.0.0.1 dbname=none"
    done = subprocess.run(
        [str(venv / "bin" / "metastore"), "serve"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "METASTORE_TLS_CERT" in done.stderr
