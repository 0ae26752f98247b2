"""A signal to ``python -I -m floorguard exec`` is the child's once the child exists.

commands.md: exec "exits with the child's status". A SIGTERM, SIGHUP or SIGINT that reaches
the gate after the child was started must end the child too, and the gate must answer with
the child's status, never die by the signal and leave the agent running unsupervised; one
that reaches the gate before anything was started stops it there, starting nothing.

The signal is sent from inside the gate at the exact moment (a driver wraps
``subprocess.Popen``, which the gate starts the child with, or the hook between the check
and the start), so the window is hit every time, not by chance under load.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

# Runs exec as ``python -I -m floorguard exec`` does, with the signal sent to itself at
# WHEN: "started" right after the child is started (inside Popen, before it returns),
# "judged" after the decision is recorded and before the child is started.
DRIVER = """
import os, runpy, signal, subprocess, sys
from floorguard._gate import launcher
when, signum = sys.argv[1], getattr(signal, sys.argv[2])
if when == "started":
    class Popen(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if str(kwargs.get("executable", "")).startswith("/proc/self/fd/"):
                os.kill(os.getpid(), signum)
    subprocess.Popen = Popen
else:
    launcher._race_window_hook = lambda: os.kill(os.getpid(), signum)
sys.argv = ["floorguard", *sys.argv[3:]]
runpy.run_module("floorguard", run_name="__main__")
"""


def _child(folder: Path) -> Path:
    """An untracked program (allowed by default) that says it started and then is ``sleep``
    for 5 s (``exec``: no grandchild a signal to the child would leave behind)."""
    program = folder / "bin" / "worker"
    program.parent.mkdir(parents=True)
    program.write_text(f"#!/bin/sh\necho $$ > {folder}/started\nexec sleep 5\n", encoding="utf-8")
    program.chmod(0o755)
    return program


def _exec(
    folder: Path, when: str, signame: str, driver: str = DRIVER
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{folder / 'bin'}:/usr/bin:/bin",
        "HOME": str(folder / "home"),
        "FLOORGUARD_HOME": str(folder / "fghome"),
    }
    return subprocess.run(
        [sys.executable, "-I", "-c", driver, when, signame, "exec", "worker", "--"],
        env=env, cwd=folder, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _left_running(folder: Path) -> list[int]:
    """The processes still running with this test's environment (the child and what it
    started), found by the FLOORGUARD_HOME they inherited."""
    marker = f"FLOORGUARD_HOME={folder / 'fghome'}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_as_the_child_starts_ends_the_child_and_exec_answers_with_its_status(
    tmp_path: Path, signame: str
) -> None:
    _child(tmp_path)
    done = _exec(tmp_path, "started", signame)
    # (left to itself the child would run 5 s more)
    assert not _left_running(tmp_path), "the child outlived the gate"
    assert done.returncode == 128 + getattr(signal, signame), (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_before_the_child_starts_stops_exec_with_nothing_started(
    tmp_path: Path, signame: str
) -> None:
    _child(tmp_path)
    done = _exec(tmp_path, "judged", signame)
    assert not (tmp_path / "started").exists(), "the child was started after the signal"
    assert not _left_running(tmp_path)
    assert done.returncode == 128 + getattr(signal, signame), (done.returncode, done.stderr)
    assert done.stderr.startswith("floorguard: "), done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_the_driver_reaches_the_gate_s_own_start(tmp_path: Path) -> None:
    """Without a signal the driver is exec itself: the child runs and finishes."""
    _child(tmp_path)
    quiet = DRIVER.replace("os.kill(os.getpid(), signum)", "None")
    done = _exec(tmp_path, "started", "SIGTERM", driver=quiet)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "started").exists()
