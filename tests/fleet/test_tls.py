"""The shared chain over TLS with ``sslmode=verify-full``, as libpq defines it.

A server of this module's own listens on a loopback port with a certificate for
``localhost`` signed by a test CA. A host that names the fleet's CA and the server's name
appends over TLS; a certificate from another CA, or one that does not name the host
connected to, refuses the append (and the spawn) before anything is sent.
"""

from __future__ import annotations

import datetime
import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pgserver
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import CANARY, floorctl

from floorguard._chain.chain import AuditChain
from floorguard.errors import ChainWriteError


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[str, ec.EllipticCurvePrivateKey],
    *, ca: bool, dns: str | None = None,
) -> x509.Certificate:  # fmt: skip
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer[0]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if dns is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(issuer[1], hashes.SHA256())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _ca(folder: Path, name: str) -> tuple[Path, tuple[str, ec.EllipticCurvePrivateKey]]:
    key = ec.generate_private_key(ec.SECP256R1())
    path = folder / f"{name}.pem"
    path.write_bytes(_pem(_certificate(name, key, (name, key), ca=True)))
    return path, (name, key)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class TlsServer:
    server: pgserver.PgServer
    port: int
    fleet_ca: Path  # signed the server's certificate
    other_ca: Path  # a CA that did not

    def url(
        self, user: str, database: str, *, host: str = "localhost", ca: Path | None = None
    ) -> str:
        root = quote(str(ca or self.fleet_ca))
        return (
            f"postgresql://{user}@{host}:{self.port}/{database}"
            f"?sslmode=verify-full&sslrootcert={root}"
        )


@pytest.fixture(scope="module")
def tls() -> Iterator[TlsServer]:
    if pgserver.pg_bin() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the PostgreSQL chain tests must run in CI: PostgreSQL is not installed")
        pytest.skip("PostgreSQL is not installed")
    base = Path(tempfile.mkdtemp(prefix="fgtls", dir="/tmp"))  # a socket path must be short
    fleet_ca, fleet = _ca(base, "fleet-ca")
    other_ca, _ = _ca(base, "other-ca")
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _certificate("db", key, fleet, ca=False, dns="localhost")
    (base / "server.crt").write_bytes(_pem(certificate))
    (base / "server.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
    )  # fmt: skip
    os.chmod(base / "server.key", 0o600)
    if os.geteuid() == 0:
        for name in ("server.crt", "server.key"):
            shutil.chown(base / name, "postgres")
    port = _free_port()
    settings = (
        "listen_addresses = '127.0.0.1'\nssl = on\n"
        f"ssl_cert_file = '{base / 'server.crt'}'\n"
        f"ssl_key_file = '{base / 'server.key'}'\n"
    )
    server = pgserver.start(base, port=port, settings=settings)
    try:
        yield TlsServer(server, port, fleet_ca, other_ca)
    finally:
        pgserver.main(["pgserver", "stop", str(base)])


@dataclass(frozen=True)
class TlsChain:
    tls: TlsServer
    owner: str
    appender: str
    database: str
    key_file: Path

    def chain(self, url: str) -> AuditChain:
        env = isolated_env(self.key_file.parent, FLOORGUARD_CHAIN_URL=url,
                           FLOORGUARD_CHAIN_KEY_FILE=str(self.key_file))  # fmt: skip
        return AuditChain.from_env(env)

    def records(self) -> int:
        return int(self.tls.server.psql("SELECT count(*) FROM floorguard.records",
                                        database=self.database))  # fmt: skip


@pytest.fixture
def tls_chain(tls: TlsServer, tmp_path: Path) -> TlsChain:
    """A chain initialised over TLS (verify-full) by `floorctl chain init`."""
    tag = secrets.token_hex(4)
    owner, appender, database = f"own_{tag}", f"app_{tag}", f"chain_{tag}"
    tls.server.psql(f"CREATE ROLE {owner} LOGIN CREATEROLE; CREATE ROLE {appender} LOGIN")
    tls.server.psql(f"CREATE DATABASE {database} OWNER {owner}")
    key_file = tmp_path / "fleet" / "chain.key"
    env = isolated_env(key_file.parent, FLOORGUARD_CHAIN_KEY_FILE=str(key_file))
    url = tls.url(owner, database)
    done = floorctl("chain", "init", "--url", url, "--grant", appender, env=env)
    assert done.returncode == 0, done.stderr
    return TlsChain(tls, owner, appender, database, key_file)


def test_verify_full_with_the_fleets_ca_and_the_servers_name_appends_over_tls(
    tls_chain: TlsChain,
) -> None:
    chain = tls_chain.chain(tls_chain.tls.url(tls_chain.appender, tls_chain.database))
    chain.append(CANARY, receipt())
    chain.append(CANARY, receipt())
    sessions = tls_chain.tls.server.psql(
        "SELECT string_agg(s.ssl::text || ' ' || s.version, ',') FROM pg_stat_ssl s"  # noqa: S608
        f" JOIN pg_stat_activity a USING (pid) WHERE a.usename = '{tls_chain.appender}'"
    )
    assert sessions.startswith("true TLSv1."), sessions  # the kept write session is TLS
    assert tls_chain.records() == 2


def test_verify_full_refuses_a_certificate_another_ca_signed(tls_chain: TlsChain) -> None:
    url = tls_chain.tls.url(tls_chain.appender, tls_chain.database, ca=tls_chain.tls.other_ca)
    with pytest.raises(ChainWriteError, match=r"certificate verify failed") as refused:
        tls_chain.chain(url).append(CANARY, receipt())
    assert "\n" not in str(refused.value)
    assert "check sslmode, sslrootcert and the host name" in str(refused.value)
    assert tls_chain.records() == 0


def test_verify_full_refuses_a_host_the_certificate_does_not_name(tls_chain: TlsChain) -> None:
    url = tls_chain.tls.url(tls_chain.appender, tls_chain.database, host="127.0.0.1")
    with pytest.raises(ChainWriteError, match=r'does not match host name "127\.0\.0\.1"'):
        tls_chain.chain(url).append(CANARY, receipt())
    assert tls_chain.records() == 0
    # The same server and certificate, named as the certificate names it: accepted.
    tls_chain.chain(tls_chain.tls.url(tls_chain.appender, tls_chain.database)).append(
        CANARY, receipt()
    )
    assert tls_chain.records() == 1
