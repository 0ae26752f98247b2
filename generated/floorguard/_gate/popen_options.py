"""The keyword arguments ``spawn`` passes on to ``subprocess.Popen``, checked before anything
is judged or recorded.

Popen finds most bad options only once it runs: a descriptor that is not open, a name
given where a file is wanted, an unknown codec, a pipe larger than the system allows, a
process group the child cannot join. By then the gate has sealed its permit, and the
chain would hold a permit for a process that never started. Each option is checked here
as Popen (or the kernel) will take it, raising what Popen would: TypeError, ValueError,
LookupError or OSError.
"""

from __future__ import annotations

import codecs
import os
import subprocess
from collections.abc import Mapping
from typing import Any

# (user, group, extra_groups: the child would read its files with other rights than the
# gate judged them with: a home it cannot enter, a user site it cannot see. Run the host as
# that user instead.)
FORBIDDEN = frozenset(
    {"shell", "executable", "args", "preexec_fn", "pass_fds", "user", "group", "extra_groups"}
)
# What else Popen takes (Python 3.11 to 3.13), apart from those spawn sets itself.
_PASSED_ON = frozenset(
    {
        "bufsize", "stdin", "stdout", "stderr", "close_fds", "universal_newlines", "text",
        "encoding", "errors", "startupinfo", "creationflags", "restore_signals",
        "start_new_session", "umask", "pipesize", "process_group",
    }
)  # fmt: skip
_STREAMS = ("stdin", "stdout", "stderr")
_PIPE_MAX_SIZE = "/proc/sys/fs/pipe-max-size"


def checked_popen_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options as Popen will be given them, each stream given as a file object replaced
    by the descriptor it names now (asked once: the one checked is the one the child gets).
    Raises, before anything is judged, for an option ``spawn`` refuses or one the child
    could not be started with."""
    forbidden = FORBIDDEN & set(options)
    if forbidden:
        raise TypeError(f"spawn() does not accept {', '.join(sorted(forbidden))}")
    unknown = set(options) - _PASSED_ON
    if unknown:
        raise TypeError(f"spawn() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    if options.get("startupinfo") is not None:
        raise ValueError("startupinfo is only supported on Windows platforms")
    if options.get("creationflags", 0) != 0:
        raise ValueError("creationflags is only supported on Windows platforms")
    for name in ("close_fds", "restore_signals", "start_new_session"):
        # (Popen hands these to the child's set-up as C integers: a text, None or a huge
        # number fails there, after the permit)
        if name in options and options[name] not in (True, False):
            raise TypeError(f"{name} must be True or False")
    if options.get("close_fds") is False:
        # (the child runs through the descriptor of the file judged, which Popen passes only
        # with close_fds on: the host's other descriptors would be dropped without a word)
        raise ValueError(
            "close_fds=False is not supported: the child gets none of the host's descriptors "
            "but its standard streams"
        )
    if options.get("start_new_session") and options.get("process_group") is not None:
        # (the child leads a new session, and a session leader cannot change its group)
        raise ValueError("start_new_session and process_group cannot be given together")
    for name in ("bufsize", "umask", "pipesize"):
        if name in options and not isinstance(options[name], int):
            raise TypeError(f"{name} must be an integer")
    if not -1 <= options.get("umask", -1) <= 0o777:
        raise ValueError("umask must be -1 (the host's) or a mode from 0 to 0o777")
    checked = dict(options)
    pipes = False
    for name in _STREAMS:
        if name in checked:
            checked[name] = _checked_stream(name, checked[name])
            pipes = pipes or checked[name] == subprocess.PIPE
    if pipes or "encoding" in options or "errors" in options:
        _check_text(options.get("encoding"), options.get("errors"))
    if pipes and options.get("pipesize", -1) > 0:
        _check_pipe_size(options["pipesize"])
    _check_process_group(options.get("process_group"))
    return checked


def _checked_stream(name: str, value: object) -> object:
    """``value``, something Popen can give the child as ``name``: None, PIPE, DEVNULL,
    STDOUT for stderr, or an open descriptor (a file object's, asked here), each as a
    plain int (an IntEnum's member as its value)."""
    if value is None:
        return None
    if isinstance(value, int):
        number = _own_int(value)
        if number in (subprocess.PIPE, subprocess.DEVNULL) or (
            name == "stderr" and number == subprocess.STDOUT
        ):
            return number
        fd: object = value
    elif callable(getattr(value, "fileno", None)):
        fd = value.fileno()  # type: ignore[attr-defined]
        number = _own_int(fd)
    else:
        raise TypeError(
            f"{name} must be None, subprocess.PIPE, subprocess.DEVNULL, an open file or its "
            f"descriptor, not {type(value).__name__}"
        )
    not_one = ValueError(f"{name}: {fd!r} is not a file descriptor")
    if number is None or number < 0:
        raise not_one
    try:
        os.fstat(number)  # (OSError EBADF: not open)
    except OverflowError:  # (past any descriptor's number)
        raise not_one from None
    return number


def _own_int(value: object) -> int | None:
    """The value of an int by its own digits, as Popen's C code reads it (an int subclass's
    methods aside); None for anything that only says it is an int."""
    try:
        return int.__index__(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _check_text(encoding: object, errors: object) -> None:
    for name, value in (("encoding", encoding), ("errors", errors)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a string, not {type(value).__name__}")
    if isinstance(encoding, str):
        codecs.lookup(encoding)  # (LookupError: unknown encoding)
    if isinstance(errors, str):
        codecs.lookup_error(errors)


def _check_pipe_size(size: int) -> None:
    try:
        with open(_PIPE_MAX_SIZE, "rb") as file:
            largest = int(file.read(32))
    except (OSError, ValueError):
        largest = 1 << 20  # (Linux's default)
    if size > largest:
        raise ValueError(f"pipesize {size} is larger than this system's pipes ({largest} bytes)")


def _check_process_group(given: object) -> None:
    if given is None:
        return
    group = _own_int(given) if isinstance(given, int) else None
    if group is None or group < 0:
        raise ValueError("process_group must be 0 (a new group) or a process group id")
    if group == 0 or group == os.getpgid(0):
        return
    # Another group of this session: known by its leader (a group whose leader has exited
    # cannot be told from one that does not exist).
    try:
        joinable = os.getpgid(group) == group and os.getsid(group) == os.getsid(0)
    except (OSError, OverflowError):  # (OverflowError: past any process id)
        joinable = False
    if not joinable:
        raise ValueError(
            f"process_group {group}: no process group of that id in this session to join"
        )
