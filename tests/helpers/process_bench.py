"""Timing whole processes for the benchmarks: wall time, CPU time and peak memory."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The installed console script, as a user runs it (its wrapper included).
FLOORCTL = str(Path(sys.executable).with_name("floorctl"))
# Settings of the shell the tests run from that no user's floorctl runs with: without
# bytecode files every module would be compiled again at each start.
_NOT_A_USERS = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPROFILEIMPORTTIME")


@dataclass(frozen=True)
class Run:
    wall: float  # seconds
    cpu: float  # user + system seconds of the process
    max_rss: int  # bytes


def user_env(base: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in base.items() if key not in _NOT_A_USERS}


def run(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Run:
    """Run ``argv`` to its end (it must exit 0), with its output discarded."""
    started = time.perf_counter()
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, (argv, errors.decode(errors="replace"))
    # ru_maxrss is in KiB on Linux. It counts the pages of this process too until the child
    # execs (it is forked from it), so a caller measuring memory must stay small itself.
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)


def median(runs: Sequence[Run], what: str) -> float:
    return statistics.median(getattr(r, what) for r in runs)
