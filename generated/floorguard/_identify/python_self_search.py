"""Which file CPython takes for itself when it is started under a bare name, set against the
file ``execvp`` runs. Given an ``argv[0]`` without a slash (``#!/usr/bin/env python3``, an
MCP server declared as ``{"command": "python3"}``, npm's ``sh -c``), CPython's getpath
searches the PATH for that name again and takes the first file that is regular with an x
bit in its mode (``isxfile``: a ``stat``, no ``access`` and no ``execve``) as
``sys.executable``; its ``pyvenv.cfg`` then decides the virtual environment. ``execvp`` runs
the first file the kernel will start, passing over one it refuses with EACCES (a noexec
mount, a mode that grants the x bit only to others) or ENOENT (a missing ELF loader). When
the two differ, code of the environment beside the file execvp passed over runs under a
judgement of another one: refused, both files named.
"""

from __future__ import annotations

import os
import stat

from floorguard._identify import kernel_exec


def self_search_doubt(name: str, path_env: str, runs: str) -> str | None:
    """Why CPython, started by ``execvp`` as the bare ``name`` on the PATH ``path_env`` and
    judged as the file ``runs``, would not take ``runs`` for itself (None: it would)."""
    for number, entry in enumerate(path_env.split(os.pathsep), 1):
        if not os.path.isabs(entry):
            # (getpath joins it to the name and looks from the child's working directory)
            return f"entry {number} of PATH is relative: CPython searches it for {name!r}"
        candidate = os.path.join(entry, name)
        if not _mode_executable(candidate):
            continue
        why = kernel_exec.start_doubt(candidate)
        if candidate == runs and why is None:
            return None
        other = runs if candidate != runs else "another file"
        return (
            f"CPython started as {name!r} takes {candidate} for itself (the first {name!r} "
            f"on PATH whose mode has an x bit) and its virtual environment, but execvp runs "
            f"{other}" + (f": {why}" if why else "")
        )
    return f"CPython started as {name!r} finds no {name!r} on PATH for itself, not {runs}"


def _mode_executable(path: str) -> bool:
    """getpath's ``isxfile``: a regular file (links followed) with any x bit in its mode."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)
