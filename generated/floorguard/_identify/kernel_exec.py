"""Whether the kernel will start a file as it is, for a program that is started by name
through ``execvp`` rather than through the descriptor floorguard opened: env's command, and
an MCP server the agent starts (node's ``child_process`` searches the PATH with glibc's
``execvp`` too). ``execvp`` does not stop where ``execve`` fails: a file the kernel rejects
(ENOEXEC) it runs with ``/bin/sh`` as a shell script, and one whose interpreter is missing
or not executable (ENOENT, EACCES) it passes over for the next file of that name on the
PATH. Neither is the file judged, so such a file is refused.

What is checked is what the kernel checks before it commits (``fs/binfmt_elf.c``,
``fs/binfmt_script.c``): an ELF program of this machine (class, byte order, machine, type,
program header table) whose program interpreter is an executable file, or a ``#!`` script
whose interpreter is one, through at most four scripts.
"""

from __future__ import annotations

import functools
import os
import stat
from typing import Final, Literal

from floorguard._identify.target import Target

_ELF_MAGIC: Final = b"\x7fELF"
_PT_INTERP: Final = 3
_ELF_TYPES: Final = (2, 3)  # ET_EXEC, ET_DYN
_SCRIPT_HEAD: Final = 256  # BINPRM_BUF_SIZE: the part of a #! line the kernel reads
_SCRIPT_DEPTH: Final = 4  # interpreters that are scripts themselves, as the kernel nests them
_PATH_MAX: Final = 4096


class NotStarted(Exception):
    """The kernel would not start the file as it is (``str``: which file, and why)."""


def check_kernel_starts(program: Target) -> None:
    """Raises NotStarted unless the kernel will start the opened program as it is."""
    try:
        why = _not_started(program.fd, 0)
    except OSError as exc:
        why = f"it cannot be read: {exc.strerror}"
    if why is not None:
        raise NotStarted(
            f"the kernel would not run {program.path} as it is ({why}): execvp would then "
            "run it with /bin/sh or look further along the PATH"
        )


def start_doubt(path: str) -> str | None:
    """Why the kernel would not start the file at ``path`` as it is (None: it would), as
    ``execve`` finds it: opened by its path, executable there (a noexec mount refuses it)."""
    return _path_doubt(path, 0)


def _not_started(fd: int, depth: int) -> str | None:
    """Why the kernel would not start the open file ``fd`` (None: it would)."""
    head = os.pread(fd, _SCRIPT_HEAD, 0)
    if head.startswith(b"#!"):
        if depth >= _SCRIPT_DEPTH:
            return "interpreters nested deeper than the kernel follows"
        line = head[2:].split(b"\n", 1)[0].lstrip(b" \t")
        interpreter = line.split(None, 1)[0].split(b"\0", 1)[0] if line.strip() else b""
        if not interpreter.startswith(b"/"):
            return f"its #! line names no absolute interpreter: {interpreter!r}"
        return _interpreter_doubt(os.fsdecode(interpreter), depth + 1)
    if not head.startswith(_ELF_MAGIC):
        return "neither an ELF program nor a #! script"
    return _elf_doubt(fd, head)


def _elf_doubt(fd: int, head: bytes) -> str | None:
    own = _own_header()
    if len(head) < 64 or head[4:6] != own[4:6] or head[18:20] != own[18:20]:
        return "not an ELF program of this machine"
    wide = head[4] == 2
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"

    def number(data: bytes, at: int, size: int) -> int:
        return int.from_bytes(data[at : at + size], order)

    e_type = number(head, 16, 2)
    phoff = number(head, 32, 8) if wide else number(head, 28, 4)
    phentsize = number(head, 54, 2) if wide else number(head, 42, 2)
    phnum = number(head, 56, 2) if wide else number(head, 44, 2)
    size = phentsize * phnum
    if e_type not in _ELF_TYPES or phentsize != (56 if wide else 32):
        return "an ELF file the kernel does not run as a program"
    if not 0 < size <= min(65536, os.sysconf("SC_PAGE_SIZE")):
        return "an ELF program header table the kernel rejects"
    table = os.pread(fd, size, phoff)
    if len(table) != size:
        return "an ELF program header table past the end of the file"
    for at in range(0, size, phentsize):
        if number(table, at, 4) != _PT_INTERP:
            continue
        offset = number(table, at + 8, 8) if wide else number(table, at + 4, 4)
        length = number(table, at + 32, 8) if wide else number(table, at + 16, 4)
        if not 2 <= length <= _PATH_MAX:
            return "an ELF program interpreter the kernel rejects"
        named = os.pread(fd, length, offset)
        if len(named) != length or not named.endswith(b"\0"):
            return "an ELF program interpreter the kernel rejects"
        loader = os.fsdecode(named.split(b"\0", 1)[0])
        return _interpreter_doubt(loader, _SCRIPT_DEPTH)  # a loader is never a script
    return None


def _interpreter_doubt(path: str, depth: int) -> str | None:
    """Why the kernel would not start ``path`` as an interpreter (None: it would)."""
    why = _path_doubt(path, depth)
    return None if why is None else f"its interpreter {why}"


def _path_doubt(path: str, depth: int) -> str | None:
    """Why the kernel would not start ``path`` (None: it would), the path named first."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        return f"{path} cannot be opened: {exc.strerror}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
            return f"{path} is not an executable file"
        why = _not_started(fd, depth)
        return None if why is None else f"{path}: {why}"
    finally:
        os.close(fd)


@functools.cache
def _own_header() -> bytes:
    """This process's own ELF header: the class, byte order and machine the kernel runs
    (read once: every server an agent declares is checked against it)."""
    with open("/proc/self/exe", "rb") as own:
        return own.read(64)
