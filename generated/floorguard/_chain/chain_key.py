"""The audit chain's HMAC key: 32 random bytes kept as 64 lowercase hex characters.

The file (``chain.key`` beside the database, or ``FLOORGUARD_CHAIN_KEY_FILE``) holds exactly
64 lowercase hex characters and at most one trailing newline, with mode 0600. It is created
on the first append only; reading commands never create one. A file that group or others
may access is refused, because whoever can read the key can forge MACs.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from floorguard._base.files import read_regular_stat
from floorguard.errors import KeyFileError, UnreadableFileError

KEY_BYTES = 32
_HEX_LEN = 2 * KEY_BYTES
_HEX_DIGITS = frozenset(b"0123456789abcdef")
# Anything longer than the key and its newline is not a key file; read no more than this.
_READ_LIMIT = _HEX_LEN + 2


def parse_key_text(data: bytes, source: str = "key file") -> bytes:
    """The key in a key file's bytes. Raises KeyFileError unless it is exactly a 32-byte key."""
    text = data[:-1] if data.endswith(b"\n") else data
    if not text:
        raise KeyFileError(f"{source} is empty: expected {_HEX_LEN} lowercase hex characters")
    if len(text) != _HEX_LEN or not set(text) <= _HEX_DIGITS:
        raise KeyFileError(
            f"{source} is not a {KEY_BYTES}-byte key: expected exactly {_HEX_LEN} lowercase "
            "hex characters and at most one trailing newline"
        )
    return bytes.fromhex(text.decode("ascii"))


def key_check(key: bytes) -> str:
    """A public check value of ``key`` (an HMAC of a fixed label: it reveals nothing of the
    key). A shared chain keeps it in its metadata, so that a host holding another key is
    refused before it writes, even the first record."""
    return hmac.digest(key, b"floorguard chain key check v1", "sha256").hex()


def load_key(path: Path) -> bytes:
    """Read an existing key file.

    Raises KeyFileError when it is missing, unreadable, not a regular file, accessible by
    group or others, or not exactly a 32-byte key.
    """
    try:
        # Never blocks: a FIFO or a device named as the key is refused, not waited on.
        data, info = read_regular_stat(path, max_bytes=_READ_LIMIT, what="chain key file")
    except UnreadableFileError as exc:
        raise KeyFileError(str(exc)) from exc
    if info.st_mode & 0o077:
        mode = stat.S_IMODE(info.st_mode)
        raise KeyFileError(
            f"chain key file {path} is accessible by group or others (mode {mode:04o}); "
            f"restrict it with: chmod 600 {path}"
        )
    return parse_key_text(data, f"chain key file {path}")


def load_or_create_key(path: Path) -> bytes:
    """Read the key file, creating it (mode 0600) if it does not exist yet.

    Creation is race-free across processes: the key is written and synced under a unique
    temporary name, then hard-linked to ``path``; a process that loses the race reads the
    winner's key. The folder must exist. Raises KeyFileError.
    """
    if not os.path.lexists(path):
        _create_key_file(path)
    return load_key(path)


def _create_key_file(path: Path) -> None:
    folder = path.parent
    temp = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise KeyFileError(f"cannot create chain key file {path}: {exc.strerror}") from exc
    try:
        try:
            # The umask may have removed bits we need, or a strange one kept too many.
            os.fchmod(fd, 0o600)
            os.write(fd, (secrets.token_hex(KEY_BYTES) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        # If another process created it first, its key is the key.
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
        _fsync_dir(folder)
    except OSError as exc:
        raise KeyFileError(f"cannot create chain key file {path}: {exc.strerror}") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
