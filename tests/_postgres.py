"""A real PostgreSQL server for the tests: a throwaway cluster started once per test session.

`initdb` and `pg_ctl` come from the machine's PostgreSQL (Debian's `postgresql` package puts them
in /usr/lib/postgresql/<version>/bin; `.ci/run` installs it when missing). PostgreSQL refuses to
run as root, so under root the cluster belongs to the `postgres` user (which the package creates)
and the commands run through `runuser`. The cluster listens on a free loopback port, trusts local
connections, and runs with fsync off: it is deleted at the end, durability is not under test.

Each test gets its own database (`fresh_database`), created from template0 and dropped after.
Without PostgreSQL the tests that need it skip, naming what is missing; under `CI=true` they fail.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"
START_TIMEOUT = 60


def _bin_dir() -> Path | None:
    found = shutil.which("pg_ctl")
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    for candidate in [*candidates, *([str(Path(found).resolve().parent)] if found else [])]:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def missing(reason: str) -> None:
    """Skip, or fail under CI: a run without PostgreSQL must not pass there."""
    message = f"PostgreSQL is needed: {reason} (apt-get install -y postgresql; .ci/run does it)"
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    bin: Path
    data: Path
    port: int
    user: str
    run_as: list[str]
    root: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        """Stop the server and delete the cluster."""
        subprocess.run(
            [*self.run_as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> Cluster:
    """initdb + pg_ctl start in a new temporary directory (see the module docstring)."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        missing("no initdb/pg_ctl found")
    root = Path(tempfile.mkdtemp(prefix="contextfold-pg-"))
    data = root / "data"
    run_as: list[str] = []
    if os.geteuid() == 0:
        try:
            import pwd

            owner = pwd.getpwnam("postgres")
        except KeyError:
            missing("running as root and there is no `postgres` user to own the cluster")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    user = "contextfold"
    init = subprocess.run(
        [
            *run_as,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if init.returncode != 0:
        raise RuntimeError(f"initdb failed: {init.stderr[-2000:]}")
    for attempt in range(3):
        port = _free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=300 -c shared_buffers=128MB"
        )
        started = subprocess.run(
            [
                *run_as,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(root / "log"),
                "-w",
                "-t",
                str(START_TIMEOUT),
                "start",
            ],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT + 30,
        )
        if started.returncode == 0:
            return Cluster(bin_dir, data, port, user, run_as, root)
        log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
        if "in use" not in log or attempt == 2:
            raise RuntimeError(f"pg_ctl start failed: {started.stderr[-1000:]}\n{log[-2000:]}")
    raise AssertionError("unreachable")


_names = itertools.count()


def create_database(cluster: Cluster) -> str:
    """A new empty database; returns its URL."""
    import psycopg

    name = f"t{os.getpid()}_{next(_names)}_{int(time.time() * 1000) % 100000}"
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return cluster.url(name)


def drop_database(cluster: Cluster, url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
