"""Paths that name the process reading them.

``/proc/self`` (and ``/proc/thread-self``, ``/proc/PID``) leads to another folder in every
process, and ``/dev/fd`` and ``/dev/stdin`` lead into it; so does ``self`` in a procfs
mounted anywhere else (a chroot's or a container's ``.../proc``, a bind mount of
``/proc``). A path through one of them in the child's arguments or environment, or in a
``#!`` line, names one file when floorguard reads it here, in the host (its working
directory, its descriptors) and another when the child does (its own):
``PYTHONPATH=/proc/self/cwd/lib``, a script ``/dev/stdin``. So does any path that reaches
them through a link. Such a path is refused before anything is judged: what is judged
would not be what runs. So is a configuration file or folder of the agent's reached
through one (mcp_files): a link there the gate would find leading nowhere is no absent file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Final

# What splits a value into the paths it may hold: PATH-style lists, NAME=VALUE options,
# quoted and spaced words.
_SEPARATORS = re.compile(r"[\s:=,;'\"]+")
_MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


def through_the_process(
    argv: Sequence[str], environ: Mapping[str, str], cwd: str | None, program: str | None
) -> str | None:
    """Why the child's inputs name a path that depends on which process reads it, or None.

    ``program`` is the name the child is given as its own (argv[0]); ``cwd`` its working
    directory (None: this process's)."""
    walk = Walk()
    here = os.path.abspath(cwd) if cwd is not None else os.getcwd()
    if (where := walk.leads(here, "/")) is not None:
        return f"the working directory {cwd or here} leads {where}"
    if program is not None and (where := walk.leads(program, here)) is not None:
        return f"the program's name {program} leads {where}"
    for position, arg in enumerate(argv, start=1):
        for path in _paths_in(arg, streams=False):
            if (where := walk.leads(path, here)) is not None:
                return f"argument {position} names {path}, which leads {where}"
    for name, value in environ.items():
        for path in _paths_in(value, streams=True):
            if (where := walk.leads(path, here)) is not None:
                return f"environment variable {name} names {path}, which leads {where}"
    return None


INTO_THE_PROCESS: Final = "into /proc or /dev/fd"
# (ELOOP: no process finds a file there, but neither is it absent: refused as doubtful)
THROUGH_A_LOOP: Final = (
    f"through a loop of links, or more than {_MAX_LINKS} of them, which no process follows"
)


def reaches_the_process(path: str, here: str) -> bool:
    """Whether ``path`` (against ``here`` when relative) leads, by its letters or through
    links, to a folder that is each process's own."""
    return Walk().reaches(path, here)


_WHOLE_PATH = ("/dev/fd", "/dev/stdin")
# The child's output streams by name, as a variable tells a program to log to them: no
# variable the gate follows reads code from them. (As an argument, the script to run, they
# are refused: a stream the host redirected to a file is one file here and another there.)
_OUTPUT_STREAMS = frozenset({"/dev/stdout", "/dev/stderr"})


def _own_folder(path: str) -> bool:
    """``/proc/self``, ``/proc/thread-self``, ``/proc/PID`` and what lies below them."""
    if not path.startswith("/proc/"):
        return False
    first = path[len("/proc/") :].split("/", 1)[0]
    return first in ("self", "thread-self") or first.isdigit()


def _paths_in(text: str, *, streams: bool) -> list[str]:
    """The words of ``text`` that may be paths; with ``streams``, not the output streams."""
    return [
        p for p in _SEPARATORS.split(text) if "/" in p and not (streams and p in _OUTPUT_STREAMS)
    ]


# The inode of a procfs's root folder (PROC_ROOT_INO); other pseudo file systems' roots have
# it too (sysfs, devtmpfs, tmpfs), so a folder with it is a procfs's root when it is /proc's
# own device, or holds a link named "self" (every procfs does, whatever its options; no other
# file system's root has one unless someone made it, and then its paths are refused too).
# Looked at live, at every judgement, by the thread judging: a table of mount points read
# once goes stale without any mount (a folder above one renamed, a chroot) and names
# another thread's namespace.
_PROC_ROOT_INO = 1
_OWN_NAMES = ("self", "thread-self")


class Walk:
    """Path lookups as the kernel makes them, a component at a time, links followed; the
    folders already found to be plain are remembered for the next lookup (one Walk is for
    one judgement: a folder may be replaced by a link between two)."""

    def __init__(self) -> None:
        self._plain: set[str] = set()
        # Folders found to be the root of a procfs, mounted at /proc or anywhere else.
        self._proc_roots: set[str] = {"/proc"}

    @cached_property
    def _proc_device(self) -> int | None:
        try:
            return os.stat("/proc").st_dev
        except OSError:
            return None

    def present(self, path: str) -> bool:
        """Whether something is at the absolute ``path`` (links followed), or the lookup
        goes through a folder each process has its own of (where the child may find a file
        this process does not): a file to read, and refuse, rather than pass over."""
        return os.path.exists(path) or self.reaches(path, "/")

    def _is_procfs_root(self, folder: str, info: os.stat_result) -> bool:
        if info.st_ino != _PROC_ROOT_INO or not stat.S_ISDIR(info.st_mode):
            return False
        if info.st_dev == self._proc_device:
            return True
        try:
            return stat.S_ISLNK(os.lstat(f"{folder.rstrip('/')}/self").st_mode)
        except (OSError, ValueError):
            return False

    def reaches(self, path: str, here: str) -> bool:
        """Whether ``path`` (against ``here`` when relative) leads into a folder each
        process has its own of, or through more links than a lookup follows."""
        return self.leads(path, here) is not None

    def leads(self, path: str, here: str) -> str | None:
        """Where ``path`` leads that no two processes find the same file at:
        INTO_THE_PROCESS, THROUGH_A_LOOP, or None."""
        if "\x00" in path:
            return None  # (refused elsewhere: no process can be given it)
        parent, _, last = path.rpartition("/")
        if parent in self._plain and last not in ("", ".", ".."):
            # Every folder above a plain one was found plain by this walk, through the same
            # checks (its entries hold no "." or ".." part): only the last part is new.
            pending, resolved = [last], parent
        else:
            pending = [p for p in reversed(path.split("/")) if p]
            resolved = "/"
            if not path.startswith("/"):
                pending += [p for p in reversed(here.split("/")) if p]
        links = 0
        while pending:
            part = pending.pop()
            if part == ".":
                continue
            if part == "..":
                resolved = os.path.dirname(resolved)
                continue
            # (os.path.join's answer: a part of a split at "/" holds no "/")
            candidate = resolved + part if resolved.endswith("/") else f"{resolved}/{part}"
            if _own_folder(candidate) or candidate in _WHOLE_PATH:
                return INTO_THE_PROCESS
            if resolved in self._proc_roots and (part in _OWN_NAMES or part.isdigit()):
                return INTO_THE_PROCESS  # (a procfs mounted elsewhere, or /proc bound)
            if candidate in self._plain:
                resolved = candidate
                continue
            try:
                info = os.lstat(candidate)
            except (OSError, ValueError):
                return None  # (nothing there: nothing the host could read either)
            if not stat.S_ISLNK(info.st_mode):
                if self._is_procfs_root(candidate, info):
                    self._proc_roots.add(candidate)
                self._plain.add(candidate)
                resolved = candidate
                continue
            links += 1
            if links > _MAX_LINKS:
                return THROUGH_A_LOOP  # (the kernel gives up: no file, in either process)
            try:
                target = os.readlink(candidate)
            except OSError:
                return None
            pending += [p for p in reversed(target.split("/")) if p]
            if target.startswith("/"):
                resolved = "/"
        return None
