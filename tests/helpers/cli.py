"""Running the real ``floorctl`` in a subprocess, with its state kept inside the test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def isolated_env(state: Path, **extra: str) -> dict[str, str]:
    """This environment without any FLOORCTL_/FLOORGUARD_ setting, state under ``state``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOORGUARD_", "FLOORCTL_"))}
    env["FLOORCTL_HOME"] = str(state / "floorctl")
    env["FLOORGUARD_HOME"] = str(state / "floorguard")
    env.update(extra)
    return env


def floorctl(
    *args: str | Path,
    cwd: Path,
    state: Path,
    umask: int = 0o022,
    timeout: float = 300,
    **extra: str,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorctl", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=isolated_env(state, **extra),
        timeout=timeout,
        check=False,
        umask=umask,
    )


def copy_host(made: Path, destination: Path) -> None:
    """A host's files (made once for a module) copied for one test. Not the host's memory of
    its chain (chain-view), which names where the chain was: the copy is a host that has not
    seen it yet."""
    shutil.copytree(
        made, destination, dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("chain-view", "chain-view.lock"),
    )  # fmt: skip
