"""A throwaway local PostgreSQL server, for the tests and benchmarks of a deployment's Dagster instance.

`local_postgres()` runs Debian's `postgresql` server binaries (`initdb`,
`pg_ctl`; `deploy/setup.sh` installs the package as root) in a temporary
directory: TCP on 127.0.0.1 only, on a port the OS gives, no Unix socket
outside that directory, password (SCRAM) authentication for every
connection, one login role with a password (not a superuser) as a deployment
would have. PostgreSQL refuses to run as root, so as root the server runs as
the `postgres` user the package creates (through `runuser`), which owns the
directory. It is stopped and its directory removed on leaving.
`restart()` restarts it in fast mode (every connection dropped, as a
database failover or a host restart drops them) on the same port, optionally
staying down a while first.

`durable=False` (tests) turns fsync and synchronous commits off; a benchmark
keeps PostgreSQL's defaults, as a deployment runs it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mirror_pipeline.local.processes import tail_file


class PostgresUnavailable(RuntimeError):
    """The server cannot run here; the message says what is missing."""


ADMIN = "mirror_admin"
USER = "dagster_user"
# Characters a URL or a config file would trip on: the storage must quote them.
PASSWORD_EXTRA = "@:/%#?&'\" "
START_ATTEMPTS = 3  # a port the OS gave may be taken by someone else before the server binds it
TIMEOUT_S = 60


@dataclass(frozen=True)
class _Control:
    """What `pg_ctl` needs to act on the running server."""

    bin_dir: Path
    prefix: list[str]
    data: Path
    log: Path


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    admin_password: str = field(repr=False)
    user: str
    password: str = field(repr=False)
    _control: _Control | None = field(default=None, repr=False, compare=False)

    def restart(self, down_s: float = 0.0) -> None:
        """Stop in fast mode (every session ended, open transactions rolled back), stay down `down_s`
        seconds, and start again on the same port (it is in the data directory's settings); returns once
        the server accepts connections."""
        if self._control is None:
            raise PostgresUnavailable("this server was not started by local_postgres(): it cannot be restarted")
        c = self._control
        pg_ctl = [str(c.bin_dir / "pg_ctl"), "-D", str(c.data), "-w", "-t", str(TIMEOUT_S)]
        if down_s > 0:
            steps = [[*pg_ctl, "-m", "fast", "stop"], None, [*pg_ctl, "-l", str(c.log), "start"]]
        else:
            # `-l`: the server's output goes to its log, not to this pipe (which would never close).
            steps = [[*pg_ctl, "-l", str(c.log), "-m", "fast", "restart"]]
        for step in steps:
            if step is None:
                time.sleep(down_s)
                continue
            done = _run(c.prefix, *step)
            if done.returncode != 0:
                raise PostgresUnavailable(
                    f"the local PostgreSQL server did not restart ({step[-1]}):\n"
                    f"{done.stdout}{done.stderr}{tail_file(c.log)}"
                )

    def connect(self, db: str = "postgres", user: str | None = None, password: str | None = None):
        import psycopg2  # installed with dagster-postgres

        conn = psycopg2.connect(
            host=self.host,
            port=self.port,
            dbname=db,
            user=user or ADMIN,
            password=self.admin_password if password is None else password,
            connect_timeout=10,
        )
        conn.autocommit = True
        return conn

    def create_database(self, name: str) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}" OWNER "{self.user}"')
        finally:
            conn.close()

    def dagster_env(self, db: str) -> dict[str, str]:
        """The variables deploy/dagster-postgres.yaml reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": db,
        }


def server_binaries() -> Path | None:
    """The directory holding `initdb`, `pg_ctl` and `postgres`: on PATH, else Debian's newest version."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = [d for d in debian.iterdir() if d.name.isdigit()]
        candidates += [d / "bin" for d in sorted(versions, key=lambda d: int(d.name), reverse=True)]
    return next((d for d in candidates if all((d / b).is_file() for b in ("initdb", "pg_ctl", "postgres"))), None)


def _run_as() -> tuple[list[str], pwd.struct_passwd | None, str | None]:
    """The command prefix that runs the server's programs, their owner, and why they cannot run (or None)."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        owner = pwd.getpwnam("postgres")
    except KeyError:
        return (
            [],
            None,
            "running as root and there is no `postgres` user to run the server as "
            "(PostgreSQL refuses root; Debian's postgresql package creates that user)",
        )
    runuser = shutil.which("runuser")
    if runuser is None:
        return [], None, "running as root and `runuser` (util-linux) is missing to run the server as `postgres`"
    return [runuser, "-u", owner.pw_name, "--"], owner, None


def _free_port() -> int:
    """A port on 127.0.0.1 the OS says is free now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(prefix: list[str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=TIMEOUT_S, cwd="/")


def _start(bin_dir: Path, prefix: list[str], root: Path, data: Path, log: Path, durable: bool) -> int:
    """Start the server on a free port; returns the port."""
    failures = []
    for _ in range(START_ATTEMPTS):
        port = _free_port()
        conf = data / "postgresql.auto.conf"  # read after postgresql.conf: these settings win
        conf.write_text(
            "\n".join(
                [
                    "listen_addresses = '127.0.0.1'",
                    f"port = {port}",
                    f"unix_socket_directories = '{root}'",
                    "max_connections = 50",
                    "shared_buffers = 32MB",
                    # A test server: durability buys nothing there, and a two-core machine is shared.
                    *([] if durable else ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]),
                ]
            )
            + "\n"
        )
        _chown_like(conf, data)
        started = _run(
            prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", str(TIMEOUT_S), "start"
        )
        if started.returncode == 0:
            return port
        failures.append(f"port {port}: {started.stdout}{started.stderr}{tail_file(log)}")
        _run(prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
    raise PostgresUnavailable("the local PostgreSQL server did not start:\n" + "\n".join(failures))


def _chown_like(path: Path, like: Path) -> None:
    st = like.stat()
    if os.geteuid() == 0:
        os.chown(path, st.st_uid, st.st_gid)


@contextlib.contextmanager
def local_postgres(durable: bool = False) -> Iterator[PostgresServer]:
    """A running server with an empty cluster and the login role `USER`; stopped and removed on leaving."""
    bin_dir = server_binaries()
    if bin_dir is None:
        raise PostgresUnavailable(
            "no PostgreSQL server binaries (initdb, pg_ctl): run `make setup` as root, which "
            "installs Debian's `postgresql` package, or install it yourself"
        )
    prefix, owner, why_not = _run_as()
    if why_not:
        raise PostgresUnavailable(why_not)
    # Not under a private temporary directory of root's: the server runs as `postgres`.
    root = Path(tempfile.mkdtemp(prefix="mirror-pipeline-pg-"))
    data, log = root / "data", root / "server.log"
    admin_password = secrets.token_urlsafe(16)
    password = secrets.token_urlsafe(16) + PASSWORD_EXTRA
    started = False
    try:
        pwfile = root / "admin-password"
        pwfile.write_text(admin_password + "\n")
        if owner is not None:
            for path in (root, pwfile):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        made = _run(
            prefix,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            ADMIN,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
        )
        if made.returncode != 0:
            raise PostgresUnavailable(f"initdb failed:\n{made.stdout}{made.stderr}")
        pwfile.unlink()
        port = _start(bin_dir, prefix, root, data, log, durable)
        started = True
        server = PostgresServer("127.0.0.1", port, admin_password, USER, password, _Control(bin_dir, prefix, data, log))
        conn = server.connect()
        try:
            with conn.cursor() as cur:
                # psycopg2 quotes the literal; the role is an ordinary one (no superuser, no createdb).
                cur.execute(f'CREATE ROLE "{USER}" LOGIN PASSWORD %s', (password,))
        finally:
            conn.close()
        yield server
    finally:
        if started:
            stopped = _run(prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
            if stopped.returncode != 0:
                _run(prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
