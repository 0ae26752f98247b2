"""A URL that asks for TLS (sslmode require, verify-ca or verify-full) is refused before
connecting when a host it may use is a Unix socket, where libpq ignores sslmode: whatever
listens in that folder would be sent the password unencrypted.

The listener here is a tiny fake PostgreSQL server on a real Unix socket: it asks every
client for a cleartext password (AuthenticationCleartextPassword) and records what it gets.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.pg_chain import Chain, stalling_proxy

from floorguard.chainstore import conninfo
from floorguard.chainstore.postgres import PostgresStore
from floorguard.errors import ChainError

PASSWORD = "Cl3artext-Pw"
SSL_REQUEST, GSS_REQUEST = 80877103, 80877104


class PasswordThief:
    """A fake server on ``folder``/.s.PGSQL.5432: it declines TLS, asks for a cleartext
    password, records it, and refuses the login."""

    def __init__(self, folder: str, *, echo: str = "") -> None:
        # Quote the password back in the refusal ("message": in its text, in three
        # spellings; "severity": as its severity, where libpq puts the word FATAL).
        self.echo = echo
        self.connections = 0
        self.passwords: list[bytes] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(f"{folder}/.s.PGSQL.5432")
        self.listener.listen(8)
        self.listener.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            with client, contextlib.suppress(OSError, struct.error):
                client.settimeout(5)
                self._converse(client)

    @staticmethod
    def _read(client: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = client.recv(size - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def _converse(self, client: socket.socket) -> None:
        while True:  # the startup message, after any TLS or GSS request (declined)
            (length,) = struct.unpack(">i", self._read(client, 4))
            body = self._read(client, length - 4)
            if struct.unpack(">i", body[:4])[0] in (SSL_REQUEST, GSS_REQUEST):
                client.sendall(b"N")
                continue
            break
        client.sendall(b"R" + struct.pack(">ii", 8, 3))  # AuthenticationCleartextPassword
        kind = self._read(client, 1)
        (length,) = struct.unpack(">i", self._read(client, 4))
        payload = self._read(client, length - 4)
        if kind == b"p":
            self.passwords.append(payload.rstrip(b"\0"))
        said, severity = b"password authentication failed", b"FATAL"
        sent = payload.rstrip(b"\0") if kind == b"p" else b""
        if self.echo == "message":
            said += (
                b": you sent "
                + sent
                + b", "
                + sent.upper()
                + b", "
                + b" ".join(bytes([c]) for c in sent)
            )
        elif self.echo == "severity":
            severity = sent
        fields = b"S" + severity + b"\0C28P01\0M" + said + b"\0\0"
        client.sendall(b"E" + struct.pack(">i", 4 + len(fields)) + fields)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.listener.close()


@pytest.fixture
def thief() -> Iterator[tuple[PasswordThief, str]]:
    folder = tempfile.mkdtemp(prefix="fgthief")  # short: a socket's path is limited
    server = PasswordThief(folder)
    try:
        yield server, folder
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


def _open(url: str) -> str:
    """The refusal of reading the chain at ``url`` (every URL here is refused)."""
    with pytest.raises(ChainError) as refused:
        PostgresStore(url, timeout=3).exists()
    return str(refused.value)


def test_the_fake_server_does_get_the_password_of_a_url_without_sslmode(thief) -> None:
    """The attack is real: libpq sends the password in the clear to a socket that asks."""
    server, folder = thief
    _open(f"host={folder} user=app dbname=audit password={PASSWORD}")
    assert server.passwords == [PASSWORD.encode()]


@pytest.mark.parametrize("mode", ["require", "verify-ca", "verify-full"])
@pytest.mark.parametrize("form", ["url", "conninfo"])
def test_sslmode_asking_for_tls_to_a_socket_folder_is_refused_before_connecting(
    thief, mode: str, form: str
) -> None:
    server, folder = thief
    if form == "url":
        url = f"postgresql://app:{PASSWORD}@/audit?host={folder}&sslmode={mode}"
    else:
        url = f"host={folder} user=app dbname=audit password={PASSWORD} sslmode={mode}"
    refused = _open(url)
    assert server.passwords == []
    assert server.connections == 0  # refused before connecting
    assert f"sslmode={mode} asks for TLS" in refused and "Unix socket" in refused
    assert "use a TCP host" in refused and "drop sslmode" in refused
    assert PASSWORD not in refused


def test_pgsslmode_in_the_environment_counts_as_the_urls_own(
    thief, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, folder = thief
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    refused = _open(f"host={folder} user=app dbname=audit password={PASSWORD}")
    assert server.passwords == [] and server.connections == 0
    assert "sslmode=verify-full asks for TLS" in refused


def test_pghost_naming_a_socket_folder_counts_as_the_urls_own(
    thief, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, folder = thief
    monkeypatch.setenv("PGHOST", folder)
    refused = _open(f"postgresql://app:{PASSWORD}@/audit?sslmode=require")
    assert server.passwords == [] and server.connections == 0
    assert "Unix socket" in refused


def test_no_host_at_all_is_libpqs_default_socket_and_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PGHOST", raising=False)
    monkeypatch.delenv("PGHOSTADDR", raising=False)
    refused = _open(f"postgresql://app:{PASSWORD}@/audit?sslmode=verify-full")
    assert "the default Unix socket (no host given)" in refused


def test_one_socket_among_tcp_hosts_is_enough_to_refuse(thief) -> None:
    server, folder = thief
    refused = _open(f"host=127.0.0.1,{folder} port=1 user=app password={PASSWORD} sslmode=require")
    assert server.connections == 0
    assert "Unix socket" in refused


def test_a_service_file_naming_a_socket_and_tls_is_refused_before_the_password(
    thief, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq reads the service file itself: the host and sslmode it sets are checked on
    libpq's own reading of them, before the server can ask for the password."""
    server, folder = thief
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[chain]\nhost={folder}\nsslmode=verify-full\n")
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    refused = _open(f"service=chain user=app dbname=audit password={PASSWORD}")
    assert server.passwords == []
    assert "sslmode=verify-full asks for TLS" in refused


@pytest.mark.parametrize(
    ("params", "environ", "refused"),
    [
        ({"host": "db.internal", "sslmode": "verify-full"}, {}, False),
        ({"host": "/run/pg", "hostaddr": "127.0.0.1", "sslmode": "require"}, {}, False),
        ({"host": "/run/pg", "sslmode": "prefer"}, {}, False),
        ({"host": "/run/pg"}, {}, False),
        ({"host": "/run/pg", "sslmode": "disable"}, {"PGSSLMODE": "require"}, False),
        ({"host": "/run/pg"}, {"PGSSLMODE": "verify-ca"}, True),
        ({"host": "@abstract", "sslmode": "require"}, {}, True),
        ({"host": "db,", "sslmode": "require"}, {}, True),  # the empty one: the default socket
        ({"sslmode": "require"}, {"PGHOST": "db.internal"}, False),
        ({"sslmode": "require"}, {"PGHOSTADDR": "10.0.0.1"}, False),
        ({"sslmode": "require"}, {}, True),
    ],
)
def test_which_urls_would_send_the_password_over_a_socket(
    params: dict[str, str], environ: dict[str, str], refused: bool
) -> None:
    assert (conninfo.tls_over_socket(params, environ) is not None) is refused


def test_sslmode_require_over_tcp_to_a_server_without_tls_is_refused_as_before(
    pg: Chain,
) -> None:
    """Over TCP libpq asks for TLS first; the test server has none, so libpq refuses, and
    the refusal names TLS, as it always did."""
    port = pg.server.port or 5432
    with stalling_proxy(pg.server.socket_dir / f".s.PGSQL.{port}", b"\0never\0") as proxy:
        refused = _open(
            f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}?sslmode=require"
        )
    assert "server does not support SSL, but SSL was required" in refused
    assert "TLS" in refused and "Unix socket" not in refused


@pytest.mark.parametrize("echo", ["message", "severity"])
def test_a_server_quoting_the_password_back_gets_none_of_it_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echo: str
) -> None:
    """Before the login is through, whoever answers may echo the password it was sent, in
    any spelling, and whatever libpq read it from (here a passfile, which floorguard never
    sees): the server's words are not printed while connecting, only their SQLSTATE."""
    folder = tempfile.mkdtemp(prefix="fgecho")
    server = PasswordThief(folder, echo=echo)
    try:
        passfile = tmp_path / "pgpass"
        passfile.write_text(f"*:*:*:app:{PASSWORD}\n")
        passfile.chmod(0o600)
        monkeypatch.setenv("PGPASSFILE", str(passfile))
        refused = _open(f"postgresql:///audit?host={folder}&user=app&sslmode=disable")
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert server.passwords == [PASSWORD.encode()]  # the attack happened
    assert PASSWORD not in refused and PASSWORD.upper() not in refused
    assert " ".join(PASSWORD) not in refused
    assert "the server answered with an error" in refused
    assert "(its words are not shown)" in refused
