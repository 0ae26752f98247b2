"""Connecting to the PostgreSQL chain is bounded by FLOORGUARD_CHAIN_TIMEOUT, whatever the
URL says: ``connect_timeout=0`` (libpq: wait forever), a long ``connect_timeout``, several
hosts (libpq and psycopg give each host the whole connect timeout), over TCP and over a Unix
socket. A server that accepts and never answers is refused within the timeout plus a margin,
measured from the first byte by the real ``floorguard.preflight`` in a fresh process.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.pg_chain import Chain, stalling_proxy

pytestmark = pytest.mark.fleet


TIMEOUT = 2.0
MARGIN = 2.0  # generous: a loaded machine, not a measure of speed

PREFLIGHT = textwrap.dedent(
    """
    import json, time
    import floorguard
    started = time.monotonic()
    try:
        floorguard.preflight("aider", version="999.0.0")
        out = {"refused": None}
    except floorguard.SpawnRefused as exc:
        out = {"refused": str(exc)}
    out["seconds"] = time.monotonic() - started
    print(json.dumps(out))
    """
)


class Silent:
    """Listeners that accept every connection and never send a byte."""

    def __init__(self) -> None:
        self.listeners: list[socket.socket] = []
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def listen(self, listener: socket.socket) -> None:
        listener.listen(16)
        listener.settimeout(0.1)
        self.listeners.append(listener)
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                self.accepted.append(listener.accept()[0])

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        for sock in self.accepted + self.listeners:
            sock.close()


@contextlib.contextmanager
def silent_servers(
    transport: str, count: int, port: int = 5432
) -> Iterator[tuple[Silent, list[str]]]:
    """``count`` silent servers; yields them and each one as a libpq host (a Unix socket's
    file named for ``port``)."""
    silent = Silent()
    folders: list[str] = []
    hosts: list[str] = []
    try:
        for _ in range(count):
            if transport == "tcp":
                listener = socket.create_server(("127.0.0.1", 0))
                hosts.append(f"127.0.0.1:{listener.getsockname()[1]}")
            else:
                # A short folder: a socket's path is limited to 107 bytes.
                folder = tempfile.mkdtemp(prefix="fgsilent")
                folders.append(folder)
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(f"{folder}/.s.PGSQL.{port}")
                hosts.append(folder)
            silent.listen(listener)
        yield silent, hosts
    finally:
        silent.close()
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def chain_url(transport: str, hosts: list[str], connect_timeout: str) -> str:
    if transport == "tcp":
        return f"postgresql://app@{','.join(hosts)}/audit?connect_timeout={connect_timeout}"
    return f"host={','.join(hosts)} user=app dbname=audit connect_timeout={connect_timeout}"


def preflight(env: dict[str, str]) -> dict[str, object]:
    try:
        done = subprocess.run([sys.executable, "-c", PREFLIGHT], capture_output=True, text=True,
                              env=env, timeout=60, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("preflight still waited after 60 s")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("connect_timeout", ["0", "100"])
@pytest.mark.parametrize("count", [1, 4])
@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_a_server_that_accepts_and_never_answers_is_refused_within_the_timeout(
    transport: str, count: int, connect_timeout: str, tmp_path: Path
) -> None:
    with silent_servers(transport, count) as (silent, hosts):
        url = chain_url(transport, hosts, connect_timeout)
        env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=url,
                           FLOORGUARD_CHAIN_TIMEOUT=f"{TIMEOUT:g}")  # fmt: skip
        result = preflight(env)
        assert silent.accepted, "the attack did not happen: nothing connected"
    refused = str(result["refused"])
    assert "could not be recorded in the audit chain" in refused
    assert f"did not answer within {TIMEOUT:g}s (FLOORGUARD_CHAIN_TIMEOUT)" in refused, refused
    seconds = float(str(result["seconds"]))
    assert seconds < TIMEOUT + MARGIN, f"refused after {seconds:.1f}s: {refused}"


def test_pgconnect_timeout_in_the_environment_cannot_stretch_the_wait(tmp_path: Path) -> None:
    with silent_servers("tcp", 1) as (_, hosts):
        env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL=f"postgresql://app@{hosts[0]}/audit",
                           FLOORGUARD_CHAIN_TIMEOUT=f"{TIMEOUT:g}",
                           PGCONNECT_TIMEOUT="0")  # fmt: skip
        result = preflight(env)
    assert float(str(result["seconds"])) < TIMEOUT + MARGIN, result


def test_a_host_that_does_not_resolve_is_refused_promptly_naming_it(tmp_path: Path) -> None:
    env = isolated_env(tmp_path, FLOORGUARD_CHAIN_URL="postgresql://app@no-such-host.invalid/a",
                       FLOORGUARD_CHAIN_TIMEOUT=f"{TIMEOUT:g}")  # fmt: skip
    result = preflight(env)
    assert "no-such-host.invalid" in str(result["refused"])
    assert float(str(result["seconds"])) < TIMEOUT + MARGIN, result


@pytest.mark.parametrize("transport", ["tcp", "unix"])
def test_a_silent_first_host_still_leaves_time_for_a_live_second_one(
    pg: Chain, transport: str, tmp_path: Path
) -> None:
    port = pg.server.port or 5432
    with contextlib.ExitStack() as stack:
        silent, hosts = stack.enter_context(silent_servers(transport, 1, port))
        if transport == "tcp":
            # The test server listens on its socket only: a proxy forwards TCP to it.
            sock = pg.server.socket_dir / f".s.PGSQL.{port}"
            proxy = stack.enter_context(stalling_proxy(sock, b"\0never sent\0"))
            live = f"127.0.0.1:{proxy.port}"
            url = f"postgresql://{pg.appender}@{hosts[0]},{live}/{pg.database}?connect_timeout=0"
        else:
            url = (f"host={hosts[0]},{pg.server.socket_dir} port={port} "
                   f"user={pg.appender} dbname={pg.database}")  # fmt: skip
        env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="4"), "FLOORGUARD_CHAIN_URL": url}
        result = preflight(env)
        assert silent.accepted
    assert result["refused"] is None, result
    assert float(str(result["seconds"])) < 4 + MARGIN
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"


@pytest.mark.parametrize("attrs", ["read-write", "primary", "any"])
def test_target_session_attrs_a_primary_meets_still_appends(
    pg: Chain, attrs: str, tmp_path: Path
) -> None:
    url = f"{pg.url}{'&' if '?' in pg.url else '?'}target_session_attrs={attrs}"
    env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="4"), "FLOORGUARD_CHAIN_URL": url}
    assert preflight(env)["refused"] is None


def test_target_session_attrs_no_host_meets_is_refused_within_the_timeout(
    pg: Chain, tmp_path: Path
) -> None:
    url = f"{pg.url}{'&' if '?' in pg.url else '?'}target_session_attrs=standby"
    env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT=f"{TIMEOUT:g}"),
           "FLOORGUARD_CHAIN_URL": url}  # fmt: skip
    result = preflight(env)
    assert "could not be recorded" in str(result["refused"])
    assert float(str(result["seconds"])) < TIMEOUT + MARGIN
