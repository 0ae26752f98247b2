"""Where OSV records come from: a JSON file, a folder tree of them, or a zip, read as a stream.

Each source yields ``(name, bytes)`` per record file (``ZIP!member`` for a zip member) in a
fixed order, or ``(name, RecordError)`` for one that cannot be read, so that the importer
can refuse it or, with ``--skip-invalid``, count it and go on. Nothing is held beyond the
record being read: a tree is walked folder by folder in sorted order, a zip member by
member (``floorctl.zipstream``).

Like every read in this project, none can block: files are opened with ``O_NONBLOCK`` and
checked to be regular files on the open descriptor (a FIFO or a device is refused at once),
and read under a cap. In a tree, symbolic links are never followed: one that leads out of
the tree is refused, one that stays inside is passed over (its target is read where it
lies), and files are opened with ``O_NOFOLLOW`` so a link swapped in is refused too.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from floorctl import zipstream
from floorctl.errors import FloorctlError, RecordError
from floorguard._base.files import describe_size, kind_of

MAX_RECORD_BYTES = 4 * 1024 * 1024  # one record: a tree file or a zip member
MAX_FILE_BYTES = 16 * 1024 * 1024  # a file named on the command line (may hold an array)

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")

Item = tuple[str, bytes | RecordError]


class SourceError(FloorctlError):
    """A source named on the command line cannot be read at all (missing, not a file or
    folder, not a readable zip)."""


def _open_regular(path: str, *, nofollow: bool, what: str) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file ``path`` (``what``: the kind of file, for the
    message); raises OSError or ValueError."""
    fd = os.open(path, _OPEN_FLAGS | (os.O_NOFOLLOW if nofollow else 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"not a regular file (the {what} is {kind_of(info.st_mode)})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read_fd(fd: int, cap: int) -> bytes | None:
    """At most ``cap`` bytes; None when the file holds more."""
    chunks, total = [], 0
    while total <= cap:
        chunk = os.read(fd, min(1 << 20, cap + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return None if total > cap else b"".join(chunks)


def _read_record_file(path: str, cap: int, *, nofollow: bool) -> bytes | RecordError:
    try:
        fd, _ = _open_regular(path, nofollow=nofollow, what="OSV record")
    except ValueError as exc:
        return RecordError([(path, "$", str(exc))])
    except OSError as exc:
        return RecordError([(path, "$", f"cannot read: {exc.strerror or exc}")])
    try:
        data = _read_fd(fd, cap)
    except OSError as exc:
        return RecordError([(path, "$", f"cannot read: {exc.strerror or exc}")])
    finally:
        os.close(fd)
    if data is None:
        return RecordError([(path, "$", f"larger than {describe_size(cap)}; refused unread")])
    return data


def iter_source(source: Path) -> Iterator[Item]:
    """The records of one SOURCE: a folder tree, a zip (by its magic bytes), or a JSON file.

    Raises SourceError when the source itself cannot be used.
    """
    name = str(source)
    try:
        info = os.stat(source)
    except OSError as exc:
        raise SourceError(f"{name}: cannot read the source: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        yield from _iter_tree(name)
        return
    try:
        fd, info = _open_regular(name, nofollow=False, what="OSV source")
    except ValueError as exc:
        raise SourceError(f"{name}: {exc}") from exc
    except OSError as exc:
        raise SourceError(f"{name}: cannot read the source: {exc.strerror or exc}") from exc
    try:
        if os.pread(fd, 4, 0) in _ZIP_MAGIC:
            yield from _iter_zip(fd, info.st_size, name)
            return
        data = _read_fd(fd, MAX_FILE_BYTES)
    finally:
        os.close(fd)
    if data is None:
        raise SourceError(f"{name}: larger than {describe_size(MAX_FILE_BYTES)}; refused unread")
    yield name, data


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _iter_tree(top: str) -> Iterator[Item]:
    """Every ``*.json`` file under ``top``, depth first, each folder in sorted name order."""
    root = os.path.realpath(top)
    stack: list[Iterator[os.DirEntry[str]]] = []

    def listing(folder: str) -> Iterator[os.DirEntry[str]] | RecordError:
        try:
            with os.scandir(folder) as entries:
                return iter(sorted(entries, key=lambda e: e.name))
        except OSError as exc:
            return RecordError([(folder, "$", f"cannot list the folder: {exc.strerror or exc}")])

    first = listing(top)
    if isinstance(first, RecordError):
        raise SourceError(str(first))
    stack.append(first)
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
            continue
        if entry.is_symlink():
            target = os.path.realpath(entry.path)
            if not _inside(target, root):
                yield (
                    entry.path,
                    RecordError(
                        [
                            (
                                entry.path,
                                "$",
                                "a symbolic link that leads out of the tree; not followed",
                            )
                        ]
                    ),
                )
            elif not os.path.lexists(target):
                yield entry.path, RecordError([(entry.path, "$", "a dangling symbolic link")])
            continue  # inside the tree: its target is read where it lies
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir:
            nested = listing(entry.path)
            if isinstance(nested, RecordError):
                yield entry.path, nested
            else:
                stack.append(nested)
        elif entry.name.endswith(".json"):
            yield entry.path, _read_record_file(entry.path, MAX_RECORD_BYTES, nofollow=True)


def _iter_zip(fd: int, size: int, name: str) -> Iterator[Item]:
    """Every ``*.json`` member of the zip open at ``fd``, in archive order."""
    try:
        for member in zipstream.iter_members(fd, size):
            if member.is_dir or not member.name.endswith(".json"):
                continue
            label = f"{name}!{member.name}"
            try:
                yield label, zipstream.read_member(fd, size, member, max_bytes=MAX_RECORD_BYTES)
            except zipstream.MemberError as exc:
                yield label, RecordError([(label, "$", f"zip member refused: {exc}")])
    except zipstream.ZipFormatError as exc:
        raise SourceError(f"{name}: not a readable zip: {exc}") from exc
