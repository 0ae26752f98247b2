"""Whether the gate's own interpreter was started clear of the child's inputs.

``python -m floorguard exec`` and the ``floorguard`` command are usually run with the
child's environment, in the child's working directory. Before the gate's first line runs,
its interpreter has acted on both: a PYTHONPATH folder's ``sitecustomize``, a module a
dotted PYTHONWARNINGS category names, the working directory first on the path (``-m``
without ``-P``), a user site that HOME puts in the workspace. Code from any of them could
make the gate permit anything. Only an interpreter started with ``-I`` reads none of them.

Code that has already run can hide from this check as well; it is there so that nobody runs
the gate that way without knowing: ``exec`` refuses, naming what it found. The variables of
the dynamic loader, the C library and OpenSSL (``LD_LIBRARY_PATH``, ``OPENSSL_CONF``) act
on any process whatever its options: only a caller that does not start the gate with them
keeps them out of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Protocol

from floorguard._identify.child_inputs import loading_variables
from floorguard._identify.python_command import (
    ENV_NOT_READ,
    ENV_READ_WHATEVER_THE_OPTIONS,
    ENV_UNDERSTOOD,
    build_variable_doubts,
)


class StartUpFlags(Protocol):
    """The part of ``sys.flags`` this reads."""

    @property
    def ignore_environment(self) -> int: ...

    @property
    def no_user_site(self) -> int: ...

    @property
    def safe_path(self) -> bool: ...


def start_up_problems(
    *,
    flags: StartUpFlags,
    path: Sequence[str],
    environ: Mapping[str, str],
    cwd: str,
    user_site: str | None,
) -> tuple[str, ...]:
    """What this interpreter (``sys.flags``, ``sys.path``) took from ``environ`` and the
    working directory ``cwd`` at start-up that may have loaded code; ``user_site``: the
    user site folder when site enabled it (``site.ENABLE_USER_SITE``), else None."""
    # (read by the loader and the C library whatever -I says: the defence is the caller's)
    problems = [*build_variable_doubts(environ), *loading_variables(environ)]
    if not flags.ignore_environment:
        problems += [
            f"{name} (read by this Python at start-up)"
            for name in sorted(environ)
            if name.startswith("PYTHON")
            and name not in ENV_UNDERSTOOD | ENV_NOT_READ | ENV_READ_WHATEVER_THE_OPTIONS.keys()
        ]
    here = os.path.realpath(cwd)
    if not flags.safe_path and path and _within(path[0] or here, here):
        problems.append(
            f"its own search path starts at {path[0] or here}, in the working directory "
            "(python -m without -P, or a floorguard command installed there)"
        )
    if user_site is not None and not flags.no_user_site and _within(user_site, here):
        problems.append(f"its user site {user_site} is in the working directory")
    return tuple(problems)


def _within(path: str, folder: str) -> bool:
    real = os.path.realpath(path)
    return real == folder or real.startswith(folder.rstrip("/") + "/")


def own_executable_problems(executable: str, started: str | None) -> tuple[str, ...]:
    """What is wrong with the file this interpreter took for itself: ``executable`` is
    ``sys.executable`` with its links resolved, ``started`` the file the kernel started
    (``/proc/self/exe``; None when it cannot be read). Started by a bare name, CPython
    searches PATH for itself by mode bits alone and may take a file the kernel would not
    run (on a noexec mount: execvp passed over it), whose ``pyvenv.cfg`` then made another
    folder its environment, the gate's own code possibly another's."""
    if started is None:
        return ("the file the kernel started this Python from cannot be read (/proc/self/exe)",)
    if executable != started:
        return (
            f"this Python takes {executable or 'no file'} for itself, and so its environment, "
            f"but the kernel started {started} (started by a bare name, CPython searches PATH "
            "for itself by mode bits alone): start it by absolute path",
        )
    return ()
