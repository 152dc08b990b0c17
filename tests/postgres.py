"""A real, throwaway PostgreSQL server for the tests: `initdb` into a temporary directory,
listening on a free loopback port (and a unix socket in that directory), stopped at the end.

Run as the `postgres` user when the tests run as root (PostgreSQL refuses to run as root).
Debian keeps the server binaries off PATH, in /usr/lib/postgresql/<major>/bin.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from tests.services import install_hint, unavailable


def find_pg_bin() -> Path:
    """The directory holding initdb, pg_ctl and postgres (newest Debian major first)."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(os.path.realpath(found)).parent
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                    key=lambda path: int(Path(path).parent.parent.name), reverse=True)
    if not debian:
        unavailable("initdb not found on PATH or in /usr/lib/postgresql/*/bin "
                    f"({install_hint('initdb')})")
    return Path(debian[0]).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PostgresServer:
    """A running server; `create_database()` hands out a fresh, empty database URL."""

    bin_dir: Path
    root: Path
    port: int
    run_as: str | None  # the user that owns the cluster when we are root

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def _run_program(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / program), *args]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self._run_program("initdb", "-D", str(self.data_dir), "-U", "postgres",
                          "--auth=trust", "--encoding=UTF8", "--no-sync")
        options = (f"-h 127.0.0.1 -p {self.port} -k {self.root} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                   "-c max_connections=200")
        self._run_program("pg_ctl", "-D", str(self.data_dir), "-o", options,
                          "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")

    def stop(self) -> None:
        try:
            self._run_program("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w",
                              "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg  # the driver is a runtime dependency; imported late to keep collection fast

        name = "t_" + uuid.uuid4().hex[:16]
        conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def start_postgres() -> PostgresServer:
    """Start a server, or unavailable() (skip locally, fail in CI) when it cannot run here."""
    bin_dir = find_pg_bin()
    run_as: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and no 'postgres' user to run PostgreSQL "
                        f"({install_hint('initdb')})")
        run_as = "postgres"
    root = Path(tempfile.mkdtemp(prefix="nmt-pg-"))
    if run_as is not None:
        shutil.chown(root, user=run_as)
    server = PostgresServer(bin_dir=bin_dir, root=root, port=_free_port(), run_as=run_as)
    try:
        server.start()
    except subprocess.CalledProcessError as error:
        log = root / "server.log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else error.stderr
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {detail}") from error
    return server
