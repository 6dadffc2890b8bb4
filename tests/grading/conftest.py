"""The grading tests' fixtures: the step tests' released lesson and gradebook (tests/steps_common.py)
and a PostgreSQL server for a module's gradebook (grading/test_postgres.py, grading/test_dask.py)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers import free_port
from steps_common import gradebook  # noqa: F401 - a fixture: the step tests' released lesson and its gradebook


def _server_bin() -> Path | None:
    for pattern in ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin"):
        for d in sorted(glob.glob(pattern), reverse=True):
            if Path(d, "initdb").exists() and Path(d, "pg_ctl").exists():
                return Path(d)
    found = shutil.which("initdb")
    return Path(found).parent if found and shutil.which("pg_ctl") else None


@pytest.fixture(scope="module")
def postgres_url():
    bindir = _server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql "
                    "package (make test does, as root) to run the PostgreSQL gradebook tests")
    try:
        import psycopg2
    except ImportError:
        pytest.skip("psycopg2 is not installed (pip install -r requirements-dev.txt)")
    as_root = os.geteuid() == 0
    if as_root:
        try:
            import pwd
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root but there is no 'postgres' user to run the server as")
    base = Path(tempfile.mkdtemp(prefix="pg-gradebook-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
    port = free_port()

    def pg(*args, check=True):
        return subprocess.run([*prefix, *args], capture_output=True, text=True, check=check, timeout=120)

    try:
        pg(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        pg(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60",
           "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    except subprocess.CalledProcessError as err:
        log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"could not start a PostgreSQL server here: {err.stderr.strip()[-500:]} {log[-500:]}")
    try:
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE gradebook")
        conn.close()
        # SQLAlchemy 2.1 takes psycopg (3) for "postgresql://"; name the installed driver
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/gradebook"
    finally:
        pg(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(base, ignore_errors=True)
