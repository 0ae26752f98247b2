"""The highest published floor map accepted on this host, kept in ``FLOORGUARD_HOME``.

Without it, a validly signed but older published map put back after a newer one would be
accepted again and floors would drop (a rollback). ``published-map.json`` holds
``{"schema_version": 1, "map_version": N, "floor_map_hash": "sha256:..."}`` of the highest
published map accepted here. It only ever rises: the file is replaced atomically (temporary
file, fsync, rename, fsync of the folder) under an exclusive lock, and the value on disk is
re-read and compared under that lock, so concurrent processes never lower it.

A missing file means nothing was accepted yet. A file that cannot be read or is damaged is
an error, never an empty state: forgetting what was accepted would reopen the rollback.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from floorguard._base._canonical import RepeatedKey, loads_strict
from floorguard._base.files import MAX_STATE_BYTES, flock_within, read_regular_stat
from floorguard._base.folders import make_private_folder
from floorguard._base.state import ACCEPTED_MAP_NAME
from floorguard._maps.map_model import MAP_VERSION_FORM, is_map_version
from floorguard.errors import FloorMapError, UnreadableFileError

STATE_NAME = ACCEPTED_MAP_NAME
LOCK_SUFFIX = ".lock"
SCHEMA_VERSION = 1
LOCK_TIMEOUT_SECONDS = 10.0
_FIELDS = frozenset({"schema_version", "map_version", "floor_map_hash"})


@dataclass(frozen=True)
class Accepted:
    """A published map accepted on this host: its version and the hash of its adapters."""

    map_version: int
    floor_map_hash: str


def state_path(environ: Mapping[str, str]) -> Path:
    from floorguard._base.state import state_home

    return state_home(environ) / STATE_NAME


def parse(data: bytes, source: str) -> Accepted:
    """The accepted map recorded in a state file's bytes. Raises FloorMapError."""

    def damaged(why: str) -> FloorMapError:
        return FloorMapError(
            f"{source}: the record of the highest published map accepted is damaged ({why}); "
            "restore it from a backup (deleting it forgets which map versions were accepted)"
        )

    try:
        document = loads_strict(data)
    except RepeatedKey as exc:
        raise damaged(f"it {exc}") from exc
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise damaged("not JSON") from exc
    if not isinstance(document, dict) or set(document) != _FIELDS:
        raise damaged(f"fields must be exactly {', '.join(sorted(_FIELDS))}")
    version, digest = document["map_version"], document["floor_map_hash"]
    if document["schema_version"] != SCHEMA_VERSION or type(document["schema_version"]) is not int:
        raise damaged(f"unsupported schema_version {document['schema_version']!r}")
    if not is_map_version(version):
        raise damaged(f"map_version is not {MAP_VERSION_FORM}")
    if not isinstance(digest, str) or not digest.startswith("sha256:"):
        raise damaged("floor_map_hash is not a sha256 digest")
    return Accepted(version, digest)


_lock = threading.Lock()
_cache: dict[tuple[object, ...], Accepted] = {}


def read(path: Path) -> Accepted | None:
    """What ``path`` records, or None when nothing was accepted yet (no file).

    Re-read only when the file's identity changes. Raises FloorMapError when the file is
    unreadable, not a regular file, or damaged.
    """
    try:
        seen = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):  # (a link to nothing: no record would be a reset)
            raise FloorMapError(
                f"{path}: the record of the highest published map accepted is a link to a "
                "file that does not exist; restore it from a backup"
            ) from None
        return None
    except OSError as exc:
        raise FloorMapError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    key = (str(path), seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        data, info = read_regular_stat(
            path, max_bytes=MAX_STATE_BYTES, what="published-map state file"
        )
    except UnreadableFileError as exc:
        if exc.missing:
            return None
        raise FloorMapError(str(exc)) from exc
    accepted = parse(data, str(path))
    key = (str(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    with _lock:
        _cache.clear()
        _cache[key] = accepted
    return accepted


def check(map_version: int, floor_map_hash: str, accepted: Accepted | None, path: Path) -> None:
    """Refuse a map older than the one accepted here, or another map at the same version.

    Raises FloorMapError.
    """
    if accepted is None:
        return
    if map_version < accepted.map_version:
        raise FloorMapError(
            f"map_version {map_version} is lower than version {accepted.map_version} already "
            f"accepted on this host (a rollback; recorded in {path})"
        )
    if map_version == accepted.map_version and floor_map_hash != accepted.floor_map_hash:
        raise FloorMapError(
            f"map_version {map_version} was accepted on this host as another map "
            f"({accepted.floor_map_hash}, recorded in {path}); a publisher raises the version "
            "for every change"
        )


def covers(map_version: int, floor_map_hash: str, accepted: Accepted | None) -> bool:
    """Whether a map at least as new as everything accepted here (the built-in one may then
    stay in force when the published map cannot be used)."""
    if accepted is None or map_version > accepted.map_version:
        return True
    return map_version == accepted.map_version and floor_map_hash == accepted.floor_map_hash


def accept(path: Path, map_version: int, floor_map_hash: str) -> Accepted:
    """Record the map as accepted, unless something at least as new already is.

    Under an exclusive lock the file is re-read and the map checked against it (another
    process may have accepted a newer one meanwhile); only a higher version replaces it.
    Returns what is recorded afterwards. Raises FloorMapError (rollback, conflict, or the
    record cannot be written: a map that cannot be remembered is not used).
    """
    try:
        make_private_folder(path.parent)
        with _exclusive(Path(str(path) + LOCK_SUFFIX)):
            with _lock:
                _cache.clear()  # read what is on disk now, under the lock
            accepted = read(path)
            check(map_version, floor_map_hash, accepted, path)
            if accepted is not None and accepted.map_version >= map_version:
                return accepted
            document = {
                "schema_version": SCHEMA_VERSION,
                "map_version": map_version,
                "floor_map_hash": floor_map_hash,
            }
            _replace(path, (json.dumps(document, sort_keys=True) + "\n").encode("utf-8"))
    except OSError as exc:
        raise FloorMapError(
            f"{path}: cannot record the published map accepted: {exc.strerror or exc}"
        ) from exc
    return Accepted(map_version, floor_map_hash)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:

    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(lock_path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FloorMapError(f"{lock_path}: not a regular file (the lock file)")
        if not flock_within(fd, LOCK_TIMEOUT_SECONDS):
            raise FloorMapError(
                f"{lock_path}: held by another process for more than {LOCK_TIMEOUT_SECONDS:g} s"
            )
        yield
    finally:
        os.close(fd)  # releases the lock


def _replace(path: Path, data: bytes) -> None:
    folder = path.parent
    temp = folder / f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
