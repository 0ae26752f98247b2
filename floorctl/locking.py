"""Exclusive locks between floorctl processes: one writer of a module, one of a state file.

An ``flock`` on a lock file beside what it guards. The kernel drops it when the holder
exits, so a crashed or killed command never leaves a stale lock; waiting is bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from floorctl.errors import ConcurrentUpdate, ModuleError

LOCK_WAIT_SECONDS = 600.0
_LOCK_POLL_SECONDS = 0.05


@contextlib.contextmanager
def exclusive_lock(
    path: Path, holder: str, *, notify: Callable[[str], None] = lambda _message: None
) -> Iterator[None]:
    """An exclusive ``flock`` on the lock file ``path``, held for the block.

    The kernel drops it when the holder exits, so a crashed refresh never leaves a stale
    lock. ``holder`` names who else may hold it, for messages. Raises ModuleError (the lock
    cannot be taken) or ConcurrentUpdate (still held after ``LOCK_WAIT_SECONDS``).
    """
    try:
        # O_NOFOLLOW: a link planted at the lock's name is refused, not followed;
        # O_NONBLOCK: a FIFO planted there cannot hang the open.
        fd = os.open(
            path,
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o644,
        )
    except OSError as exc:
        raise ModuleError(f"{path}: cannot open the lock file: {exc.strerror or exc}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ModuleError(f"{path}: the lock file is not a regular file")
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConcurrentUpdate(
                        f"{holder} has held {path} for over {LOCK_WAIT_SECONDS:.0f} s; "
                        "nothing was written"
                    ) from None
                if not told:
                    notify(f"waiting for {holder} to finish")
                    told = True
                time.sleep(_LOCK_POLL_SECONDS)
        yield
    finally:
        os.close(fd)  # releases the lock
