"""Host signatures of audit-chain records: each host signs the records it writes.

A fleet's HMAC key is a shared secret: whoever holds it (every host, and the database owner
who made it with ``floorctl chain init``) can rewrite a record and recompute every MAC and
link. A record signed by the host that wrote it can be altered or forged only with that
host's private key, which never leaves the host; an auditor holding the hosts' public keys
learns which host wrote each record.

Form
----
A signed record's ``mac`` field is ``ed25519:<key id>:<signature>``: the key id is the first
8 bytes of SHA-256 of the host's raw 32-byte Ed25519 public key (16 lowercase hex), the
signature 128 lowercase hex of Ed25519 over ``b"floorguard-record/v1\\n"`` followed by the
record's canonical body (the same seven-field RFC 8785 body an HMAC covers). The key id is
not signed: it only says which listed key to try, and a signature verifies under one key
only. An HMAC record's ``mac`` stays 64 lowercase hex; a chain may hold both (a fleet moving
from the shared key to host keys).

The host's key (``FLOORGUARD_HOST_KEY_FILE``)
---------------------------------------------
An unencrypted PEM PKCS#8 Ed25519 private key, as ``floorctl keygen`` writes it
(``signing.key``), readable by its owner only: a file that group or others may access is
refused, as a chain key is (whoever can read it can write records in the host's name).

The host-keys document (``verify chain --host-keys``, ``FLOORGUARD_HOST_KEYS``)
-------------------------------------------------------------------------------
JSON naming each host's public key (PEM SubjectPublicKeyInfo, ``signing.pub``)::

    {"hosts": {"web-1": "-----BEGIN PUBLIC KEY-----\\n...", "web-2": "..."}}

A name is 1 to 64 characters of ``A-Z a-z 0-9 . _ -`` starting with a letter or digit; it is
how reports name the host. A host whose key was replaced lists its keys in a list, old and
new (``"web-1": ["<PEM>", "<PEM>"]``): its old records keep verifying, under its name. A name
or key listed twice is refused (a key under two names would make the writer ambiguous).
The trusted-keys document of feeds (``floorguard._crypto.trust``) is not reused: its keys have no
names, and it states a threshold, which means nothing for one record signed by one host.

``cryptography`` is imported only when a host key or a host-keys document is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from floorguard._base.files import MAX_KEY_BYTES, MAX_TRUSTED_KEYS_BYTES, read_regular_stat
from floorguard.errors import KeyFileError, UnreadableFileError, VerificationError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

T = TypeVar("T")
PREFIX = "ed25519:"
DOMAIN = b"floorguard-record/v1\n"
KEY_ID_HEX = 16
SIGNATURE_HEX = 128
MAX_HOSTS = 4096
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SIGNED = re.compile(r"ed25519:([0-9a-f]{16}):([0-9a-f]{128})")
HEX_DIGITS = "0123456789abcdef"
# Every well-formed authenticator, HMAC or signature (what the server accepts as well).
MAC_FORM = r"^([0-9a-f]{64}|ed25519:[0-9a-f]{16}:[0-9a-f]{128})$"


def is_hmac(text: object) -> bool:
    """True for an HMAC: 64 lowercase hex characters."""
    # (stripping the hex digits leaves nothing only when each character is one: a tenth of
    # the time of a set of the text)
    return isinstance(text, str) and len(text) == 64 and not text.strip(HEX_DIGITS)


def is_signature(text: object) -> bool:
    """True for a host signature in its form ``ed25519:<16 hex>:<128 hex>``."""
    return isinstance(text, str) and _SIGNED.fullmatch(text) is not None


def signature_key_id(text: str) -> str | None:
    """The key id a host signature names, or None when ``text`` is not one."""
    found = _SIGNED.fullmatch(text)
    return None if found is None else found.group(1)


def message(body: bytes) -> bytes:
    """What a host signs: the domain label, then the record's canonical body."""
    return DOMAIN + body


def key_id(public_key: Ed25519PublicKey) -> str:
    """The record key id of ``public_key``: sha256 of its raw 32 bytes, first 8 bytes in
    hex (the first 16 characters of ``floorctl keygen``'s ``keyid``)."""
    return hashlib.sha256(_raw(public_key)).hexdigest()[:KEY_ID_HEX]


def _raw(public_key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _require_cryptography(what: str) -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError as exc:
        raise KeyFileError(
            f"{what} needs Ed25519 signatures, but the cryptography package is not installed: "
            "install floorguard[verify] (pip install 'floorguard[verify]')"
        ) from exc


# --- the host's own key ------------------------------------------------------------------------


@dataclass(frozen=True)
class HostKey:
    """A host's private key, ready to sign records."""

    private: Ed25519PrivateKey
    key_id: str
    path: Path

    def sign(self, body: bytes) -> str:
        """The ``mac`` field of the record whose canonical body is ``body``."""
        return f"{PREFIX}{self.key_id}:{self.private.sign(message(body)).hex()}"

    def verifies(self, mac: str, body: bytes) -> bool:
        """True when ``mac`` is this key's signature of ``body``."""
        return _verifies(self.private.public_key(), self.key_id, mac, body)

    def alone(self) -> HostKeys:
        """Host keys listing this key only, as "this host" (a host checking a chain only it
        writes); a record of any other key is then unverified."""
        return HostKeys(
            {self.key_id: "this host"},
            {self.key_id: self.private.public_key()},
            "this host's own key only: set FLOORGUARD_HOST_KEYS to check other hosts'",
        )


def load_host_key(path: Path) -> HostKey:
    """Read a host's signing key. Raises KeyFileError when it is missing, unreadable, not a
    regular file, accessible by group or others, or not an unencrypted Ed25519 PEM key."""
    what = f"host key file {path}"
    try:
        # Never blocks: a FIFO or a device named as the key is refused, not waited on.
        data, info = read_regular_stat(path, max_bytes=MAX_KEY_BYTES, what="host key file")
    except UnreadableFileError as exc:
        raise KeyFileError(f"{exc} (FLOORGUARD_HOST_KEY_FILE)") from exc
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise KeyFileError(
            f"{what} is accessible by group or others (mode {mode:04o}); whoever can read it "
            f"can write records in this host's name: restrict it with: chmod 600 {path}"
        )
    _require_cryptography(what)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from floorguard._crypto import dsse

    try:
        dsse.require_one_pem_key(data, what)
    except VerificationError as exc:
        raise KeyFileError(f"{exc} (FLOORGUARD_HOST_KEY_FILE)") from exc
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"{what} is not an unencrypted PEM private key (make one with `floorctl keygen`)"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(
            f"{what} is not an Ed25519 private key (make one with `floorctl keygen`)"
        )
    return HostKey(key, key_id(key.public_key()), path)


# --- the hosts' public keys --------------------------------------------------------------------


@dataclass(frozen=True)
class HostKeys:
    """The public keys of a fleet's hosts, by record key id, and each host's name."""

    names: dict[str, str]  # key id -> host name
    keys: dict[str, Ed25519PublicKey] = field(repr=False)
    source: str

    def check(self, mac: str, body: bytes) -> tuple[str | None, str | None]:
        """(the writing host's name, None) when ``mac`` is a listed host's signature of
        ``body``; else (None, why not), the reason worded for a report."""
        kid = signature_key_id(mac)
        if kid is None:
            return None, "mac is not a host signature (ed25519:<16 hex>:<128 hex>)"
        name = self.names.get(kid)
        if name is None:
            return None, (
                f"signed by key id {kid}, which the host keys ({self.source}) do not list: "
                "unverified, no key for it"
            )
        if not _verifies(self.keys[kid], kid, mac, body):
            return None, (
                f"the signature of host {name} (key id {kid}) does not verify: the record was "
                f"altered, or not signed with that host's key (any appender can claim a key "
                f"id: this does not show that {name} wrote it)"
            )
        return name, None


def _verifies(public_key: Ed25519PublicKey, kid: str, mac: str, body: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    found = _SIGNED.fullmatch(mac)
    if found is None or found.group(1) != kid:
        return False
    try:
        public_key.verify(bytes.fromhex(found.group(2)), message(body))
    except InvalidSignature:
        return False
    return True


def parse_host_keys(data: bytes, source: str) -> HostKeys:
    """Read a host-keys document. Raises KeyFileError saying what is wrong."""
    if len(data) > MAX_TRUSTED_KEYS_BYTES:
        raise KeyFileError(f"{source}: the host-keys document is larger than 1 MiB")

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        names = [name for name, _ in pairs]
        if len(set(names)) != len(names):
            raise KeyFileError(f"{source}: a name is listed twice in the host-keys document")
        return dict(pairs)

    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=refuse_duplicates)
    except (ValueError, RecursionError) as exc:
        raise KeyFileError(f"{source}: the host-keys document is not JSON") from exc
    if not isinstance(document, dict) or set(document) != {"hosts"}:
        raise KeyFileError(
            f'{source}: a host-keys document is exactly {{"hosts": {{"<host name>": '
            '"<PEM public key>" or ["<PEM>", ...], ...}}'
        )
    hosts = document["hosts"]
    if not isinstance(hosts, dict) or not hosts:
        raise KeyFileError(f"{source}: hosts must name at least one host and its public key")
    if len(hosts) > MAX_HOSTS:
        raise KeyFileError(f"{source}: more than {MAX_HOSTS} hosts")
    if sum(len(pem) if isinstance(pem, list) else 1 for pem in hosts.values()) > MAX_HOSTS:
        raise KeyFileError(f"{source}: more than {MAX_HOSTS} keys")
    _require_cryptography(source)
    from floorguard._crypto import dsse

    names: dict[str, str] = {}
    keys: dict[str, Ed25519PublicKey] = {}
    for name, pem in hosts.items():
        if not HOST_NAME.fullmatch(name):
            raise KeyFileError(
                f"{source}: host name {name!r} is not 1 to 64 characters of A-Z a-z 0-9 . _ - "
                "starting with a letter or digit"
            )
        pems = pem if isinstance(pem, list) else [pem]
        if not pems or not all(isinstance(one, str) for one in pems):
            raise KeyFileError(
                f"{source}: host {name}: the key is not a PEM string (or a list of them)"
            )
        for index, one in enumerate(pems):
            # (each string is one key: a host with several keys lists them)
            where = f"{source}: host {name}" + (f" [{index}]" if isinstance(pem, list) else "")
            try:
                public = dsse.load_public_key(one.encode("utf-8"), where)
            except VerificationError as exc:
                raise KeyFileError(str(exc)) from exc
            kid = key_id(public)
            if kid in names:
                raise KeyFileError(
                    f"{source}: hosts {names[kid]} and {name} list the same key (key id "
                    f"{kid}): each host signs with its own key"
                )
            names[kid], keys[kid] = name, public
    return HostKeys(names, keys, source)


def load_host_keys(path: Path) -> HostKeys:
    """Read the host-keys document in ``path``. Raises KeyFileError."""
    try:
        data, _ = read_regular_stat(path, max_bytes=MAX_TRUSTED_KEYS_BYTES, what="host keys")
    except UnreadableFileError as exc:
        raise KeyFileError(str(exc)) from exc
    return parse_host_keys(data, str(path))


class FileCache(Generic[T]):
    """One loaded file, read again only when its stat identity changes (any rewrite,
    rename or chmod changes it), so an append pays one stat, not a parse."""

    def __init__(self, load: Callable[[Path], T]) -> None:
        self._load = load
        self._cached: tuple[tuple[int, ...], Path, T] | None = None

    def get(self, path: Path, what: str) -> T:
        """The file's content as ``load`` reads it. Raises KeyFileError."""
        try:
            info = os.stat(path)
        except FileNotFoundError:
            raise KeyFileError(f"{what} {path} is missing") from None
        except OSError as exc:
            raise KeyFileError(f"{what} {path} is unreadable: {exc.strerror}") from exc
        identity = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        cached = self._cached
        if cached is None or cached[0] != identity or cached[1] != path:
            cached = self._cached = (identity, path, self._load(path))
        return cached[2]
