"""What will run: the executable located once, opened once, and named by its descriptor after.

A path is only a name, and every directory on it can be swapped between a check and an exec.
So the file is located and opened once; from then on its identity comes from ``fstat`` on
the open descriptor, its bytes are read from the descriptor, metadata around it is read
relative to the descriptor of the directory that held it when it was opened, and it is
probed and executed through ``/proc/self/fd/N`` (the open file itself, whatever the path
now leads to).
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from floorguard.errors import BinaryNotFoundError, DetectionError, UnreadableFileError

FileIdentity = tuple[int, int, int, int, int]
# Opened without blocking (a FIFO or device must never stall the caller), never as a
# controlling terminal, and never inherited except where passed on purpose.
_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def identity_of(st: os.stat_result) -> FileIdentity:
    """``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``: any replacement or in-place
    rewrite changes it (ctime catches a rewrite whose mtime was put back)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def search_path(path_env: str | None) -> str:
    """The PATH to search: the given one (else this process's), absolute entries only."""
    return _absolute_entries(_path_text(path_env))


def _path_text(path_env: str | None) -> str:
    return os.environ.get("PATH", os.defpath) if path_env is None else path_env


@functools.lru_cache(maxsize=32)
def _absolute_entries(raw: str) -> str:
    # An empty or relative PATH entry means "the current directory": a planted binary
    # there must not be picked, so only absolute entries are searched.
    return os.pathsep.join(p for p in raw.split(os.pathsep) if os.path.isabs(p))


# The errors after which glibc's execvp (and libuv's, after it) tries the next PATH folder;
# at any other (a link loop, a name too long) it gives up, and nothing starts.
_EXECVP_GOES_ON: Final = frozenset(
    {errno.EACCES, errno.ENOENT, errno.ESTALE, errno.ENOTDIR, errno.ENODEV, errno.ETIMEDOUT}
)


def execvp_gives_up_at(candidate: str) -> str | None:
    """Why execvp would give up at ``candidate`` rather than try the next PATH folder (a
    link loop, a name too long), or None when it would run it or go on."""
    try:
        os.stat(candidate)
    except OSError as exc:
        if exc.errno not in _EXECVP_GOES_ON:
            return exc.strerror or str(exc)
    return None


def locate(name: str, *, path_env: str | None) -> str:
    """The absolute path ``name`` stands for (looked up on PATH when it has no separator),
    symlinks not yet resolved. Raises BinaryNotFoundError when nothing on PATH has the name,
    DetectionError for an invalid name or a file of that name that is not executable."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise DetectionError(f"invalid binary name: {name!r}")
    if os.sep in name or (os.altsep is not None and os.altsep in name):
        # Not abspath: it drops ``link/..`` by the letters, where the kernel (and realpath,
        # after) steps out of the link's target.
        return name if os.path.isabs(name) else os.path.join(os.getcwd(), name)
    raw = _path_text(path_env)
    searched = _absolute_entries(raw)
    found = shutil.which(name, path=searched)
    for entry in searched.split(os.pathsep):
        # (a file execvp would give up at, before the one found: a client or env starting
        # the program by name starts nothing)
        candidate = os.path.join(entry, name)
        if candidate == found:
            break
        why = execvp_gives_up_at(candidate) if entry else None
        if why is not None:
            raise DetectionError(
                f"{candidate}: {why}: a search of PATH for {name!r} as execvp makes it gives "
                "up there and starts nothing"
            )
    if found is None:
        # As a shell does: a file of that name that cannot be executed is "found but not
        # executable" (exit 126), not "not found" (127); a folder is passed over.
        for entry in searched.split(os.pathsep):
            candidate = os.path.join(entry, name)
            if entry and os.path.isfile(candidate):
                raise DetectionError(f"binary is not executable: {os.path.realpath(candidate)}")
        relative = next(
            (n for n, entry in enumerate(raw.split(os.pathsep), 1) if not os.path.isabs(entry)),
            None,
        )
        if relative is not None:
            # Not "not found": the child searches such an entry in its working directory,
            # which is not looked in here (named by its place: a value may be a secret).
            raise DetectionError(
                f"{name!r} is in no absolute entry of PATH, and entry {relative} of PATH is "
                "relative: the child would search it in its working directory, which is not "
                "judged; name the program by its absolute path"
            )
        raise BinaryNotFoundError(f"binary not found: {name!r} is not on PATH")
    return found


@dataclass
class Target:
    """An opened executable. ``requested`` is the name or path asked for, which the child
    also sees as its program name (``argv0``); ``located`` where that led before links were
    resolved; ``path`` the real path it had when opened (for reports and for naming
    metadata, never for reading the file itself). Close it when done."""

    requested: str
    located: str
    path: Path
    fd: int
    dir_fd: int
    identity: FileIdentity
    _closed: bool = field(default=False, repr=False)

    @property
    def argv0(self) -> str:
        """The name the child is given as its program name: the absolute path the name asked
        for led to here (its last part the name asked for). CPython finds its installation
        from it: given a bare name it would search PATH again, and a relative path from its
        own working directory, either of which may lead elsewhere by then."""
        if not os.path.isabs(self.requested) and os.path.isabs(self.located):
            return self.located
        return self.requested

    @property
    def exec_path(self) -> str:
        """A path naming the open file itself, for the child that inherits ``fd``."""
        return f"/proc/self/fd/{self.fd}"

    def current_identity(self) -> FileIdentity:
        return identity_of(os.fstat(self.fd))

    def read_head(self, size: int) -> bytes:
        """Up to ``size`` bytes from the start of the opened file."""
        return os.pread(self.fd, size, 0)

    def read_all(self, cap: int) -> bytes | None:
        """The whole opened file when it is at most ``cap`` bytes, else None."""
        data = os.pread(self.fd, cap + 1, 0)
        return data if len(data) <= cap else None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self.fd)
            os.close(self.dir_fd)

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def open_target(name: str, *, path_env: str | None, executable: bool = True) -> Target:
    """Locate ``name``, resolve its links once, and open the file and its directory.

    ``executable=False`` opens a file an interpreter will read (a script argument).
    Raises BinaryNotFoundError when nothing is there (not on PATH, a path or link leading
    nowhere); DetectionError when something is but cannot be used: not a regular file (a
    FIFO or device is refused without blocking), not executable, or not openable; and on a
    platform without ``/proc/self/fd``, where an open file cannot be executed as itself.
    """
    if not exec_supported():
        raise DetectionError("executing a checked file by descriptor needs Linux's /proc")
    located = locate(name, path_env=path_env)
    real = real_path(located)
    directory, base = os.path.split(real)
    try:
        dir_fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        raise _unopenable(located, exc) from None
    try:
        # O_NOFOLLOW: the last component was resolved above; a link planted there since is
        # another file than the one resolved.
        fd = os.open(base, _OPEN_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        os.close(dir_fd)
        raise _unopenable(located, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DetectionError(f"binary is not a regular file: {real}")
        if executable and (not st.st_mode & 0o111 or not os.access(f"/proc/self/fd/{fd}", os.X_OK)):
            raise DetectionError(f"binary is not executable: {real}")
    except BaseException:
        os.close(fd)
        os.close(dir_fd)
        raise
    return Target(
        requested=name,
        located=located,
        path=_path_of(real),
        fd=fd,
        dir_fd=dir_fd,
        identity=identity_of(st),
    )


def real_path(located: str) -> str:
    """``os.path.realpath(located)``, as the kernel resolves it when it can: the file
    opened by the name (``O_PATH``: nothing is read, no FIFO waited on), named by its
    ``/proc/self/fd`` link. One lookup by the kernel instead of an ``lstat`` per component
    in Python (a measurable part of a preflight). Whatever the kernel cannot open or name
    as a path (a name leading nowhere or looping, a trailing slash after a file, a file
    unlinked meanwhile, a pipe) is resolved by ``os.path.realpath`` as before, and the
    open that follows says what is wrong with it."""
    try:
        fd = os.open(located, os.O_PATH | os.O_CLOEXEC)
    except (OSError, ValueError):
        return os.path.realpath(located)
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = ""
    finally:
        os.close(fd)
    if not real.startswith("/") or real.endswith(" (deleted)"):
        return os.path.realpath(located)
    return real


@functools.lru_cache(maxsize=64)
def _path_of(real: str) -> Path:
    # Parsing a path into a Path is a measurable part of a preflight; a Path is an immutable
    # value, so the one made for the same text is as good (its text was resolved anew).
    return Path(real)


def _unopenable(located: str, exc: OSError) -> DetectionError:
    """Only "no such file" is not found (a shell's 127); anything else (permission, a file
    where a folder should be, a link loop) is there but unusable (126)."""
    if exc.errno == errno.ENOENT:
        return BinaryNotFoundError(f"binary not found: {located} ({exc.strerror})")
    return DetectionError(f"binary cannot be opened: {located} ({exc.strerror})")


def read_regular_at(dir_fd: int, relpath: str, cap: int) -> tuple[bytes, FileIdentity] | None:
    """The bytes and identity of the regular file ``relpath`` relative to ``dir_fd``, read
    without blocking and under ``cap``; None when it is missing, not a regular file, larger
    than ``cap`` or unreadable."""
    from floorguard._base.files import read_regular_stat

    try:
        data, st = read_regular_stat(relpath, max_bytes=cap, what="metadata file", dir_fd=dir_fd)
    except (UnreadableFileError, ValueError):
        return None
    return data, identity_of(st)


def stat_at(dir_fd: int, relpath: str) -> os.stat_result | None:
    """``stat`` of ``relpath`` relative to ``dir_fd`` (links followed), or None."""
    try:
        return os.stat(relpath, dir_fd=dir_fd)
    except OSError:
        return None


@functools.cache
def exec_supported() -> bool:
    """Whether open files can be executed by descriptor here (Linux's /proc)."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")
