"""Running the real ``floorctl`` with its stderr on a pseudo-terminal, as on a user's screen."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from helpers.cli import isolated_env


@dataclass(frozen=True)
class TerminalRun:
    returncode: int
    stdout: str
    stderr: str  # as the terminal showed it (line ends are \r\n there)


def floorctl_on_terminal(*args: str | Path, cwd: Path, state: Path, **extra: str) -> TerminalRun:
    """``floorctl ARGS`` with stderr a TTY (a pty) and stdout a file, so only stderr is one."""
    primary, secondary = pty.openpty()
    with tempfile.TemporaryFile() as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "floorctl", *map(str, args)],
            cwd=cwd,
            env=isolated_env(state, **extra),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=secondary,
        )
        os.close(secondary)
        shown = bytearray()
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed its end of the terminal
                break
            if not chunk:
                break
            shown += chunk
        os.close(primary)
        returncode = process.wait(timeout=300)
        stdout.seek(0)
        return TerminalRun(returncode, stdout.read().decode(), shown.decode(errors="replace"))
