"""A real PostgreSQL server for the tests: the one .ci/run started, or one of our own.

.ci/run exports FLOORGUARD_TEST_PG_URL (a superuser URL over a Unix socket),
FLOORGUARD_TEST_PG_DATA (its data directory, so that a test can stop and restart it) and
FLOORGUARD_TEST_PG_BIN. Without them, ``start`` runs initdb and pg_ctl from the installed
PostgreSQL in a temporary folder (as the ``postgres`` user when running as root), on a
Unix socket only. ``python tests/pgserver.py start|stop DIR`` is what .ci/run calls.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote


def pg_bin() -> Path | None:
    """The folder of initdb and pg_ctl, or None when PostgreSQL is not installed."""
    explicit = os.environ.get("FLOORGUARD_TEST_PG_BIN")
    if explicit:
        return Path(explicit)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if found:
        return Path(found[-1])
    on_path = shutil.which("pg_ctl")
    return Path(on_path).resolve().parent if on_path else None


def _as_server_user(argv: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: the Debian packages' postgres user does.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@dataclass(frozen=True)
class PgServer:
    """A running server: its socket folder, data directory and binaries."""

    socket_dir: Path
    data_dir: Path
    bin_dir: Path
    port: int | None = None  # None: PostgreSQL's default, 5432 (also names the socket)

    def url(self, user: str = "postgres", database: str = "postgres") -> str:
        port = "" if self.port is None else f"&port={self.port}"
        return f"postgresql:///{database}?host={quote(str(self.socket_dir))}&user={user}{port}"

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args]
        return subprocess.run(
            _as_server_user(argv), capture_output=True, text=True, check=True, timeout=120
        )

    def stop_immediately(self) -> None:
        self.ctl("stop", "-m", "immediate", "-w")

    def start(self) -> None:
        self.ctl("start", "-w", "-l", str(self.data_dir.parent / "server.log"))

    def wait_until_ready(self, seconds: float = 60) -> None:
        """Until a login succeeds: after an immediate stop, recovery may outlast pg_ctl -w."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self.psql("SELECT 1")
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def psql(
        self, sql: str, *, user: str = "postgres", database: str = "postgres", timeout: float = 60
    ) -> str:
        argv = [str(self.bin_dir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-d", self.url(user, database), "-c", sql]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip())
        return done.stdout.strip()


def start(base: Path, *, port: int | None = None, settings: str = "") -> PgServer:
    """initdb and start a server in ``base`` (created), on a socket in ``base``; ``port``
    and ``settings`` (postgresql.conf lines, e.g. TLS on a loopback address) when given."""
    bin_dir = pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (no initdb/pg_ctl)")
    base.mkdir(parents=True, exist_ok=True)
    data = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
              "-E", "UTF8", "--no-instructions"]  # fmt: skip
    subprocess.run(_as_server_user(initdb), capture_output=True, text=True, check=True, timeout=120)
    with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write(
            f"listen_addresses = ''\nunix_socket_directories = '{base}'\n"
            "max_connections = 100\nshared_buffers = 32MB\n"
            # After a crash (tests stop it with -m immediate), one syncfs() instead of an
            # fsync of every file of every database the tests made: seconds, not minutes.
            "recovery_init_sync_method = syncfs\n"
        )
        if port is not None:
            conf.write(f"port = {port}\n")
        conf.write(settings)
    server = PgServer(socket_dir=base, data_dir=data, bin_dir=bin_dir, port=port)
    server.start()
    return server


def from_env() -> PgServer | None:
    """The server .ci/run started, when it exported one."""
    url = os.environ.get("FLOORGUARD_TEST_PG_URL")
    data = os.environ.get("FLOORGUARD_TEST_PG_DATA")
    if not url or not data:
        return None
    bin_dir = pg_bin()
    assert bin_dir is not None
    return PgServer(socket_dir=Path(data).parent, data_dir=Path(data), bin_dir=bin_dir)


def provide() -> Iterator[PgServer]:
    """A pytest fixture's body: .ci/run's server, else one of our own for the fixture's scope.

    Skips when PostgreSQL or psycopg is missing, except in CI (CI=true), where it fails.
    """
    import pytest

    # .ci/run's server serves one test process: under pytest-xdist, the first worker
    # (another worker's test that stops and restarts it would fail everyone else's).
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    found = from_env() if worker == "gw0" else None
    if found is not None:
        yield found
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        why: str | None = "psycopg is not installed (pip install -e './generated[postgres]')"
    else:
        why = None if pg_bin() is not None else "PostgreSQL is not installed"
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the PostgreSQL chain tests must run in CI: {why}")
        pytest.skip(why)
    # A short path: a Unix socket's path must fit in about 100 bytes.
    base = Path(tempfile.mkdtemp(prefix="fgpg", dir="/tmp"))
    started = start(base)
    try:
        yield started
    finally:
        main(["pgserver", "stop", str(base)])


def main(argv: list[str]) -> int:
    command, folder = argv[1], Path(argv[2])
    if command == "start":
        server = start(folder)
        print(f"export FLOORGUARD_TEST_PG_URL='{server.url()}'")
        print(f"export FLOORGUARD_TEST_PG_DATA='{server.data_dir}'")
        print(f"export FLOORGUARD_TEST_PG_BIN='{server.bin_dir}'")
        return 0
    if command == "stop":
        bin_dir = pg_bin()
        assert bin_dir is not None
        server = PgServer(folder, folder / "data", bin_dir)
        argv = [str(bin_dir / "pg_ctl"), "-D", str(server.data_dir), "stop", "-m", "immediate"]
        subprocess.run(_as_server_user(argv), capture_output=True, check=False, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
        return 0
    print(f"usage: {argv[0]} start|stop DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
