"""Check and spawn as one step, bound to the exact file that was checked.

The binary is resolved once and opened before the preflight runs. The child is executed
through that open descriptor (``/proc/self/fd/N`` on Linux), so a file swapped in under the
same path afterwards is never the one that runs; and the path is re-resolved and re-examined
right before the exec, so a swap is refused rather than silently bypassed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from floorguard import detect
from floorguard.errors import DetectionError
from floorguard.gate import Decision, preflight, refuse_after

RECEIPT_ID_VARIABLE = "FLOORGUARD_RECEIPT_ID"
_FORBIDDEN_POPEN_ARGUMENTS = frozenset({"shell", "executable", "args", "preexec_fn", "pass_fds"})

# Called between the check and the exec; tests use it to swap the binary in that window.
_race_window_hook: Callable[[], None] | None = None


def _identity(stat: os.stat_result) -> tuple[int, int, int, int, int]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _exec_path(fd: int) -> str | None:
    """A path that names the open file itself in the child, where the platform has one."""
    if sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd"):
        return f"/proc/self/fd/{fd}"
    return None


def spawn(
    adapter: str,
    argv: Sequence[str],
    *,
    binary: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    **popen_kwargs: Any,
) -> subprocess.Popen[Any]:
    """Preflight ``adapter`` and start exactly the binary that was checked.

    ``argv`` holds the arguments after the program. The child's environment is ``env`` (or
    this process's) plus ``FLOORGUARD_RECEIPT_ID``. Raises SpawnRefused, having started
    nothing, when the preflight refuses or the binary changed between check and exec;
    TypeError for a shell string or arguments that would bypass the check.
    """
    if isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv must be a list of strings (never a shell command line)")
    forbidden = _FORBIDDEN_POPEN_ARGUMENTS & set(popen_kwargs)
    if forbidden:
        raise TypeError(f"spawn() does not accept {', '.join(sorted(forbidden))}")
    child_env = dict(os.environ if env is None else env)
    path_env = child_env.get("PATH")

    try:
        resolved = detect.resolve_binary(adapter, binary, path_env=path_env)
        fd = os.open(resolved, os.O_RDONLY)
    except (DetectionError, OSError) as exc:
        # The preflight finds and records the same failure (a refusal for a tracked adapter);
        # an untracked adapter's allowance is overruled by a recorded refusal: nothing runs.
        decision = preflight(adapter, binary=binary)
        raise refuse_after(decision, f"its binary cannot be resolved or opened: {exc}") from None
    try:
        checked = _identity(os.fstat(fd))
        decision = preflight(adapter, binary=str(resolved))
        if _race_window_hook is not None:
            _race_window_hook()
        _recheck(
            adapter=adapter,
            binary=binary,
            path_env=path_env,
            resolved=resolved,
            fd=fd,
            checked=checked,
            decision=decision,
        )
        child_env[RECEIPT_ID_VARIABLE] = decision.receipt_id
        exec_path = _exec_path(fd)
        return subprocess.Popen(
            [str(resolved), *argv],
            executable=exec_path or str(resolved),
            pass_fds=(fd,) if exec_path else (),
            env=child_env,
            cwd=cwd,
            shell=False,
            **popen_kwargs,
        )
    finally:
        os.close(fd)


def _recheck(
    *,
    adapter: str,
    binary: str | os.PathLike[str] | None,
    path_env: str | None,
    resolved: Path,
    fd: int,
    checked: tuple[int, int, int, int, int],
    decision: Decision,
) -> None:
    """Refuse if the name now leads elsewhere or the file is not the one that was checked."""
    try:
        again = detect.resolve_binary(adapter, binary, path_env=path_env)
        on_disk = _identity(os.stat(again))
    except (DetectionError, OSError) as exc:
        raise refuse_after(decision, f"binary vanished between check and exec: {exc}") from None
    if again != resolved:
        raise refuse_after(
            decision, f"{binary or adapter} now resolves to {again}, not the checked {resolved}"
        )
    if on_disk != checked or _identity(os.fstat(fd)) != checked:
        raise refuse_after(decision, f"{resolved} changed between check and exec")
