"""Reading the files floorguard and floorctl are given, without ever blocking on one.

A FIFO, a character device (``/dev/zero``, a terminal) or a socket where a key, map, feed
or state file is expected would block the reader forever or feed it without end. Every
file is therefore opened with ``O_NONBLOCK`` (opening a FIFO with no writer returns at
once), checked with ``fstat`` on the open descriptor to be a regular file (so what is
checked is what is read), and read under a size cap chosen for its kind. ``O_NOCTTY``
keeps a terminal named by mistake from becoming the controlling terminal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator
from typing import BinaryIO

from floorguard.errors import UnreadableFileError

_OPEN_FLAGS = (
    os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
)  # fmt: skip
_CHUNK = 1 << 20

# Caps by kind of file, each well above anything legitimate of that kind.
MAX_KEY_BYTES = 64 * 1024  # a PEM key (public or private) is a few hundred bytes
MAX_TRUSTED_KEYS_BYTES = 1024 * 1024  # up to 256 PEM keys in JSON
MAX_CHECKPOINT_BYTES = 64 * 1024  # a signed note (checkpoint.MAX_NOTE_BYTES)
MAX_MAP_BYTES = 64 * 1024 * 1024  # a floor map (module, archived or published JSON)
MAX_ENVELOPE_BYTES = 128 * 1024 * 1024  # a DSSE envelope: base64 of a map, plus signatures
MAX_RECEIPT_BYTES = 128 * 1024 * 1024  # a receipt file: an envelope or a chain record
MAX_STATE_BYTES = 16 * 1024 * 1024  # a small JSON state file kept by floorguard or floorctl


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, in words (from its ``st_mode``)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def describe_size(limit: int) -> str:
    """``64 MiB``, ``1 KiB`` or ``66 bytes``: a cap as a person reads it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


def _open_checked(
    path: str | os.PathLike[str], what: str, dir_fd: int | None = None
) -> tuple[int, os.stat_result]:
    """An open descriptor of ``path`` and its fstat, only if it is a regular file."""
    try:
        fd = os.open(path, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise UnreadableFileError(
            f"{path}: cannot read the {what}: {exc.strerror or exc}",
            missing=isinstance(exc, FileNotFoundError),
        ) from exc
    return fd, _regular(fd, path, what)


def _regular(fd: int, path: str | os.PathLike[str], what: str) -> os.stat_result:
    """The fstat of the open ``fd``, only if it is a regular file (else it is closed)."""
    try:
        info = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise UnreadableFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnreadableFileError(
            f"{path}: not a regular file (the {what} is {kind_of(info.st_mode)})"
        )
    return info


def read_regular_stat(
    path: str | os.PathLike[str], *, max_bytes: int, what: str, dir_fd: int | None = None
) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` and the fstat of the descriptor they came from.

    ``what`` names the kind of file in messages ("chain key file", "feed"); with ``dir_fd``,
    a relative ``path`` is opened relative to that open folder. Raises
    UnreadableFileError (``missing`` set when it does not exist) when it cannot be opened,
    is not a regular file, or holds more than ``max_bytes``; never blocks.
    """
    fd, info = _open_checked(path, what, dir_fd)
    return _read_and_close(fd, path, max_bytes, what), info


def _read_and_close(fd: int, path: str | os.PathLike[str], max_bytes: int, what: str) -> bytes:
    chunks: list[bytes] = []
    total = 0
    try:
        # Read to end of file, not to st_size: the file may grow while it is read.
        while total <= max_bytes:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UnreadableFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if total > max_bytes:
        raise UnreadableFileError(
            f"{path}: the {what} is larger than {describe_size(max_bytes)}", too_large=True
        )
    return b"".join(chunks)


def read_regular_located(
    path: str | os.PathLike[str], *, max_bytes: int, what: str
) -> tuple[bytes, os.stat_result, str] | None:
    """:func:`read_regular_stat`, plus the real path of the very file read (from its open
    descriptor, so a link swapped after the open cannot misplace it): for a caller that
    must know where a file it was given by name really lies. None when nothing is at
    ``path`` (a dangling link counts); else raises as read_regular_stat."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        # The common answer for the configuration files looked for at every spawn: no
        # error made, raised and caught a level up for each.
        return None
    except OSError as exc:
        raise UnreadableFileError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    info = _regular(fd, path, what)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = os.path.realpath(path)  # no /proc: resolved by name, once
    return _read_and_close(fd, path, max_bytes, what), info, real


def read_regular(path: str | os.PathLike[str], *, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file ``path``. Raises UnreadableFileError (see above)."""
    return read_regular_stat(path, max_bytes=max_bytes, what=what)[0]


def read_regular_if_exists(
    path: str | os.PathLike[str], *, max_bytes: int, what: str
) -> bytes | None:
    """Like read_regular, but None when nothing is at ``path`` (a dangling link counts)."""
    try:
        return read_regular(path, max_bytes=max_bytes, what=what)
    except UnreadableFileError as exc:
        if exc.missing:
            return None
        raise


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str], *, what: str) -> Iterator[BinaryIO]:
    """A buffered binary stream over the regular file ``path``, for files read as a stream
    (a chain slice), whose reader caps each line instead of the whole file.

    Raises UnreadableFileError like read_regular; never blocks on opening.
    """
    fd, _ = _open_checked(path, what)
    # O_NONBLOCK means nothing for a regular file; clear it anyway so reads stay ordinary.
    os.set_blocking(fd, True)
    with open(fd, "rb", closefd=True) as stream:
        yield stream


def flock_within(fd: int, seconds: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, waiting at most ``seconds`` (a holder that
    never lets go must not hang a spawn); False when it was still held then. Raises OSError
    for any failure other than the lock being held."""
    import fcntl

    # The deadline is set at the first refusal: a lock that is free (the common case, on
    # every append) costs one system call and no clock read.
    deadline = None
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EINTR):
                raise
        now = time.monotonic()
        if deadline is None:
            deadline = now + seconds
        if now >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.005)
