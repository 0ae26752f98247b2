"""Writing output files: atomically, and never through a link.

Every file floorctl or floorguard's command line writes goes through here. The named path
itself is replaced: a temporary file in the same folder is written, fsynced and renamed
over the name, so a symbolic link at that name is replaced by a regular file and its
target is never touched. A write that fails (full disk, file size limit, I/O error) leaves
whatever was at the name before, including a dangling link, exactly as it was. A character
device or a FIFO at the name, or a link to one (`--out /dev/null`, `--out /dev/stdout`), is
written to, never replaced: renaming over it would put a regular file where the device (or
the system's link) was. Any other kind of file (a socket, a block device, a folder) is
refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from floorguard.errors import OutputError

DEFAULT_MODE = 0o644


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _fsync_directory(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _cannot_write(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be written, naming its folder when that is what is missing."""
    folder = _folder(Path(path))
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)) and not os.path.isdir(folder):
        return f"{path}: cannot write: the folder {folder} does not exist"
    return f"{path}: cannot write: {_reason(exc)}"


def _kept_mode(path: Path, mode: int | None) -> int:
    """``mode`` if given; else a regular file's own bits (a link's target is not asked)."""
    if mode is not None:
        return mode
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return DEFAULT_MODE
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else DEFAULT_MODE


def _staged(path: Path, chunks: Iterable[bytes], mode: int) -> str:
    """A synced temporary file beside ``path`` holding ``chunks``; its name."""
    folder = _folder(path)
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            # The umask must not decide who may read a key or a receipt.
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return temp


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace the name ``path`` by a regular file holding ``data``.

    Readers see the old file or the new, never a mix. A link at ``path`` is replaced, not
    followed. ``mode`` defaults to the permission bits of the regular file being replaced
    (0644 for a new name). Raises OutputError; on failure nothing at ``path`` changed.
    """
    write_chunks_atomic(path, (data,), mode=mode)


def refuse_kept_file(path: Path) -> None:
    """Raise OutputError when writing ``path`` (the name, replaced; or, through a link that
    leads there, the file) would write over a file floorguard keeps for the environment's
    chain and map (``state.kept_files``): an output there would destroy the record."""
    from floorguard._base.state import kept_files

    path = Path(path)
    # The name itself (replaced) and, through links, the file it leads to; by path, and by
    # identity (a bind mount shows one folder under two paths; a hard link, one file).
    targets: set[object] = {
        os.path.join(os.path.realpath(_folder(path)), path.name),
        os.path.realpath(path),
        *_identities(_folder(path), path.name, path),
    }
    for kept in kept_files():
        if targets & {
            os.path.realpath(kept),
            os.path.join(os.path.realpath(kept.parent), kept.name),
            *_identities(kept.parent, kept.name, kept),
        }:
            raise OutputError(
                f"{path}: refusing to write over {kept}, a file floorguard keeps the audit "
                "chain or this host's map record in"
            )


def _identities(folder: Path, name: str, path: Path) -> set[object]:
    """The entry ``name`` of ``folder`` and the file ``path`` leads to, by device and inode
    (those that exist)."""
    found: set[object] = set()
    with contextlib.suppress(OSError, ValueError):
        info = os.stat(folder)
        found.add((info.st_dev, info.st_ino, name))
    with contextlib.suppress(OSError, ValueError):
        info = os.stat(path)
        found.add((info.st_dev, info.st_ino))
    return found


def write_chunks_atomic(path: Path, chunks: Iterable[bytes], *, mode: int | None = None) -> None:
    """``write_atomic`` for data produced piece by piece (a chain export)."""
    path = Path(path)
    refuse_kept_file(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(_cannot_write(path, exc)) from exc
    if info is not None and _is_stream(info.st_mode):
        _write_stream(path, chunks)
        return
    if info is not None and stat.S_ISLNK(info.st_mode) and _links_to_stream(path):
        # /dev/stdout, /dev/fd/N: a link to a terminal or a pipe is written through, as the
        # device itself would be (replacing the link would break it for every process).
        _write_stream(path, chunks, through_link=True)
        return
    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        raise OutputError(f"{path}: cannot write: not a regular file (refusing to replace it)")
    try:
        temp = _staged(path, chunks, _kept_mode(path, mode))
        try:
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        _fsync_directory(_folder(path))
    except OSError as exc:
        raise OutputError(_cannot_write(path, exc)) from exc


def _is_stream(mode: int) -> bool:
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _links_to_stream(path: Path) -> bool:
    try:
        return _is_stream(os.stat(path).st_mode)
    except OSError:
        return False  # a dangling link: replaced, as any other link


def _write_stream(path: Path, chunks: Iterable[bytes], *, through_link: bool = False) -> None:
    """Write ``chunks`` into the device or FIFO at ``path`` (opened without creating or
    truncating; through a link only when asked, and then only if what was opened is a
    device or a FIFO). A FIFO no process reads is refused, not waited on."""
    flags = os.O_WRONLY | os.O_CLOEXEC | os.O_NONBLOCK
    if not through_link:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO with no reader
                raise OutputError(f"{path}: cannot write: no process is reading it") from None
            raise
        if not _is_stream(os.fstat(fd).st_mode):  # the link was changed since it was read
            os.close(fd)
            raise OutputError(f"{path}: cannot write: the link no longer leads to a device")
        os.set_blocking(fd, True)  # a reader that is slower than us is waited for
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
    except OSError as exc:
        raise OutputError(_cannot_write(path, exc)) from exc


def create_new(path: Path, data: bytes, *, mode: int) -> None:
    """Create ``path`` holding ``data``; refuse if anything (even a dangling link) is there.

    The file appears complete or not at all: it is staged under a temporary name and
    hard-linked into place, which fails if the name exists. Raises OutputError.
    """
    path = Path(path)
    try:
        temp = _staged(path, (data,), mode)
        try:
            os.link(temp, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        _fsync_directory(_folder(path))
    except FileExistsError:
        raise OutputError(f"{path}: already exists; refusing to overwrite it") from None
    except OSError as exc:
        raise OutputError(_cannot_write(path, exc)) from exc


def put_back(backup: Path, path: Path) -> None:
    """Rename ``backup`` over ``path``. rename(2) does nothing when both names are links to
    one file (the write never happened): the backup name is then removed."""
    os.replace(backup, path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(backup)


class Preserved:
    """What was at a name before a write, kept so the write can be undone.

    The old directory entry (regular file or link, whatever it was) is hard-linked under a
    hidden name beside it; ``restore`` renames it back, ``discard`` drops it.
    """

    def __init__(self, path: Path, backup: Path | None = None) -> None:
        """``backup`` fixes the hidden name (a writer that must find it after a crash);
        by default a fresh random name beside ``path`` is used."""
        self.path = Path(path)
        self._backup: Path | None = None
        if not os.path.lexists(self.path):
            return
        folder = _folder(self.path)
        for _ in range(1 if backup is not None else 100):
            candidate = backup or folder / f".{self.path.name}.{secrets.token_hex(8)}.undo"
            try:
                # follow_symlinks=False links the entry itself, so a link is kept as a link.
                os.link(self.path, candidate, follow_symlinks=False)
            except FileExistsError:
                continue
            except OSError as exc:
                raise OutputError(
                    f"{self.path}: cannot keep the current file for undo: {_reason(exc)}"
                ) from exc
            self._backup = candidate
            return
        raise OutputError(f"{self.path}: cannot keep the current file for undo")

    def restore(self) -> None:
        """Put back what was there (or remove the name if nothing was)."""
        if self._backup is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        else:
            put_back(self._backup, self.path)
            self._backup = None

    def discard(self) -> None:
        if self._backup is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._backup)
            self._backup = None


@contextlib.contextmanager
def undoable(
    paths: Iterable[Path], backups: Mapping[Path, Path] | None = None
) -> Iterator[list[Preserved]]:
    """Keep what is at each of ``paths`` (under the name ``backups`` gives for it, if any);
    restore all if the block raises, else discard."""
    kept: list[Preserved] = []
    named = backups or {}
    try:
        for path in paths:
            kept.append(Preserved(path, named.get(path)))
        yield kept
    except BaseException:
        for item in reversed(kept):
            with contextlib.suppress(OSError):
                item.restore()
        raise
    else:
        for item in kept:
            item.discard()
