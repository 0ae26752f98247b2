"""What identification consults, noted: metadata files read without blocking and under a
cap, PATH searched, and caches whose answers are reused while every file and folder they
consulted is unchanged."""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Final, TypeVar

from floorguard._base.files import read_regular
from floorguard._identify.target import (
    FileIdentity,
    execvp_gives_up_at,
    identity_of,
    search_path,
)
from floorguard.errors import UnreadableFileError

MAX_MANIFEST_BYTES: Final = 1 << 20
MAX_RECORD_BYTES: Final = 8 << 20
_MAX_CACHE_ENTRIES: Final = 1024


# ---------------------------------------------------------------------------- small caches

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_lock = threading.Lock()
_caches: list[dict[object, object]] = []


def new_cache() -> dict[object, object]:
    made: dict[object, object] = {}
    _caches.append(made)
    return made


def memo(cache: dict[object, object], key: Hashable, compute: Callable[[], _V]) -> _V:
    """``compute()`` once per key (keys carry file identities, so a change is a new key)."""
    with _lock:
        if key in cache:
            return cache[key]  # type: ignore[return-value]
    value = compute()
    with _lock:
        while len(cache) >= _MAX_CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


def clear_cache() -> None:
    """Forget every cached identification and parsed metadata file."""
    with _lock:
        for cache in _caches:
            cache.clear()


# While an answer is computed, every file and directory it looked at is noted with its
# identity (None: absent), so that a cached answer is re-checked with one stat each.
_recording = threading.local()


def _identity(path: str) -> FileIdentity | None:
    try:
        ident: FileIdentity | None = identity_of(os.stat(path))
    except (OSError, ValueError):
        ident = None
    noted = getattr(_recording, "deps", None)
    if noted is not None:
        noted.append((path, ident))
    return ident


_Deps = tuple[tuple[str, FileIdentity | None], ...]


def _checked_memo(cache: dict[object, object], key: Hashable, compute: Callable[[], _V]) -> _V:
    """``compute()``, reused while every file and directory it consulted is unchanged."""
    with _lock:
        hit = cache.get(key)
    if isinstance(hit, tuple):
        value, deps = hit
        if all(_identity(path) == ident for path, ident in deps):
            return value  # type: ignore[no-any-return]
    outer = getattr(_recording, "deps", None)
    _recording.deps = []
    try:
        value = compute()
        deps = tuple(dict(_recording.deps).items())
    finally:
        _recording.deps = outer
    if outer is not None:
        outer.extend(deps)
    with _lock:
        while len(cache) >= _MAX_CACHE_ENTRIES:
            cache.pop(next(iter(cache)))
        cache[key] = (value, deps)
    return value


# One judgement's answers (see one_judgement), with what each consulted.
_judgement: contextvars.ContextVar[dict[Hashable, tuple[object, _Deps]] | None] = (
    contextvars.ContextVar("floorguard_judgement", default=None)
)


@contextlib.contextmanager
def one_judgement() -> Iterator[None]:
    """Within it, ``once_a_judgement`` answers a question asked again (by another check of
    the same judgement) with its first answer instead of looking again."""
    token = _judgement.set({})
    try:
        yield
    finally:
        _judgement.reset(token)


def once_a_judgement(key: Hashable, compute: Callable[[], _V]) -> _V:
    """``compute()``, once per ``key`` within ``one_judgement`` (outside one: every time).
    What the first computation consulted is noted again with every answer, so that a cache
    kept over judgements (``_checked_memo``) that takes the answer depends on those files."""
    scope = _judgement.get()
    if scope is None:
        return compute()
    hit = scope.get(key)
    if hit is None:
        outer = getattr(_recording, "deps", None)
        _recording.deps = []
        try:
            value = compute()
            consulted = tuple(_recording.deps)
        finally:
            _recording.deps = outer
        hit = scope[key] = (value, consulted)
    noted = getattr(_recording, "deps", None)
    if noted is not None:
        noted.extend(hit[1])
    return hit[0]  # type: ignore[return-value]


def locate_noted(name: str, path_env: str | None) -> str | None:
    """``locate`` on PATH, noting every directory searched (a program added to an earlier
    PATH directory changes the answer). A folder of the name is passed over, as execvp
    passes over it (execve fails with EACCES); at a file execvp would give up on (a link
    loop), the search ends with nothing found."""
    for directory in search_path(path_env).split(os.pathsep):
        if not directory:
            continue
        _identity(directory)
        candidate = os.path.join(directory, name)
        if execvp_gives_up_at(candidate) is not None:
            _identity(candidate)
            return None
        found = _identity(candidate) is not None and os.path.isfile(candidate)
        if found and os.access(candidate, os.X_OK):
            return candidate
    return None


def _read_path(path: str, cap: int) -> bytes | None:
    """A regular file's bytes, read without blocking and under ``cap``; None otherwise."""
    try:
        return read_regular(path, max_bytes=cap, what="metadata file")
    except (UnreadableFileError, ValueError):
        return None
