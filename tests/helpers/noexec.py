"""A folder the kernel will not execute from, for the cases where ``execve`` refuses a file
(EACCES) whose mode bits still say it is executable: a private bind mount of the folder,
remounted ``noexec`` in a user and mount namespace of its own (``unshare -rm``), so nothing
outside the command run there sees it. Tests skip where unprivileged namespaces are not
allowed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# (sh -c's $0 is mount, $1 the folder, the rest the command)
_MOUNT_NOEXEC = (
    '"$0" --bind "$1" "$1" && "$0" -o remount,bind,noexec "$1" "$1" && shift && exec "$@"'
)


def noexec_command(folder: Path, *argv: str) -> list[str]:
    """``argv`` run where ``folder`` (which must exist) is mounted noexec (the tools named
    by absolute path: the PATH given to the command may hold none of them)."""
    tools = [shutil.which(tool) or tool for tool in ("unshare", "sh", "mount")]
    return [tools[0], "-rm", tools[1], "-c", _MOUNT_NOEXEC, tools[2], str(folder), *argv]


def skip_without_noexec_mounts(folder: Path) -> None:
    """Skips the test unless a noexec mount of ``folder`` can be made and refuses to execute
    an executable file there (checked with a real execve)."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / "probe"
    shutil.copy2("/bin/true", probe)
    probe.chmod(0o755)
    try:
        done = subprocess.run(noexec_command(folder, str(probe)), capture_output=True,
                              timeout=30, check=False)  # fmt: skip
    finally:
        probe.unlink()
    if done.returncode != 126:  # (126: the shell found it and the kernel refused it)
        pytest.skip(f"no private noexec mount here: {done.stderr.decode(errors='replace')}")
