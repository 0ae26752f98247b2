"""``python -I -m floorguard exec``: the gate's own Python reads none of the child's inputs.

exec is run with the child's environment, in the child's working directory. Started without
``-I``, the gate's interpreter acts on them before floorguard's first line (a PYTHONPATH
``sitecustomize``, a module named by a dotted PYTHONWARNINGS category, the working directory
first on ``python -m``'s path): exec then refuses, naming what it saw, and starts nothing.
Started with ``-I``, none of them runs in the gate, and the child still gets them (and is
judged with them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.noexec import noexec_command, skip_without_noexec_mounts
from probes.native import Run, native_agent

from floorguard._gate.own_start_up import own_executable_problems

WRITES_MARKER = "import pathlib; pathlib.Path({path!r}).write_text('ran in the gate')\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An agent's workspace: a planted sitecustomize and warnings module, and a native codex
    above its floor on PATH that leaves a marker when it runs."""
    folder = tmp_path / "ws"
    (folder / "lib").mkdir(parents=True)
    gate_marker = tmp_path / "ran-in-the-gate"
    for module in ("sitecustomize", "planted"):
        (folder / "lib" / f"{module}.py").write_text(WRITES_MARKER.format(path=str(gate_marker)))
    (tmp_path / "bin").mkdir()
    native_agent(tmp_path / "bin" / "codex", version=b"codex-cli 0.90.0\n",
                 run=Run(marker=tmp_path / "agent-ran"))  # fmt: skip
    return folder


def exec_agent(
    workspace: Path, *python_options: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = isolated_env(workspace.parent / "state", PATH=str(workspace.parent / "bin"), **extra)
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return subprocess.run(
        [sys.executable, *python_options, "-m", "floorguard", "exec", "codex", "--", "task"],
        capture_output=True, text=True, cwd=workspace, env=env, timeout=120, check=False,
    )  # fmt: skip


def ran(workspace: Path, what: str) -> bool:
    return (workspace.parent / what).exists()


@pytest.mark.parametrize(
    ("options", "variables", "named"),
    [
        (("-P",), {"PYTHONPATH": "lib"}, "PYTHONPATH"),
        (("-P",), {"PYTHONWARNINGS": "ignore::planted.Warning"}, "PYTHONWARNINGS"),
        (("-P",), {"PYTHONHOME": "/nonexistent"}, None),  # (Python itself fails to start)
        (("-P",), {"PYTHONSTARTUP": "lib/planted.py", "PYTHONPYCACHEPREFIX": "c"}, "PYCACHE"),
        ((), {}, "in the working directory"),
    ],
    ids=["pythonpath", "warnings-category", "pythonhome", "pycache", "-m-without-P"],
)
def test_exec_started_without_isolation_refuses_before_it_starts_anything(
    workspace: Path, options: tuple[str, ...], variables: dict[str, str], named: str | None
) -> None:
    done = exec_agent(workspace, *options, **variables)
    assert not ran(workspace, "agent-ran")
    assert done.returncode != 0
    if named is not None:
        assert done.returncode == 126, done.stderr
        # (Python's own warning about a -W category it cannot import may come first)
        line = done.stderr.splitlines()[-1]
        assert line.startswith("floorguard: refusing to run the gate"), done.stderr
        assert named in line and "python -I -m floorguard exec" in line, line


@pytest.mark.parametrize(
    "variables",
    [{"PYTHONPATH": "lib"}, {"PYTHONWARNINGS": "ignore::planted.Warning"}, {}],
    ids=["pythonpath", "warnings-category", "-m"],
)
def test_with_I_nothing_of_the_workspace_runs_in_the_gate_and_the_child_is_judged(
    workspace: Path, variables: dict[str, str]
) -> None:
    """The variables are then the child's, judged as such: a native child's commands may
    start a Python, which would read them, so each refuses it (126, nothing started)."""
    done = exec_agent(workspace, "-I", **variables)
    assert not ran(workspace, "ran-in-the-gate")
    if not variables:
        assert done.returncode == 0, done.stderr
        assert ran(workspace, "agent-ran")
        return
    assert done.returncode == 126, done.stderr
    [name] = variables
    line = done.stderr.splitlines()[-1]
    assert line.startswith("floorguard: refusing to spawn codex") and name in line, line
    assert not ran(workspace, "agent-ran")


def test_the_environment_exec_refuses_over_is_still_judged_for_the_child(
    workspace: Path,
) -> None:
    # What keeps the gate's Python from reading the workspace does not make the child's
    # environment safe: its PYTHONPATH is judged for the child (refused for a native one,
    # whose commands' Pythons would read it); PYTHONDONTWRITEBYTECODE loads nothing.
    done = exec_agent(workspace, "-I", PYTHONPATH=str(workspace / "lib"),
                      PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    assert done.returncode == 126, done.stderr
    assert "PYTHONPATH" in done.stderr and "PYTHONDONTWRITEBYTECODE" not in done.stderr
    assert not ran(workspace, "agent-ran") and not ran(workspace, "ran-in-the-gate")
    done = exec_agent(workspace, "-I", PYTHONDONTWRITEBYTECODE="1")
    assert done.returncode == 0, done.stderr
    assert ran(workspace, "agent-ran") and not ran(workspace, "ran-in-the-gate")


@pytest.mark.parametrize(
    ("variable", "value"),
    [("LD_LIBRARY_PATH", "lib"), ("OPENSSL_CONF", "lib/openssl.cnf"), ("GCONV_PATH", "lib")],
)
def test_with_I_the_loaders_variables_still_refuse_the_gate_itself(
    workspace: Path, variable: str, value: str
) -> None:
    # -I keeps PYTHON* out of the gate's Python, not what the dynamic loader, the C library
    # and OpenSSL read in any process: the gate says so and starts nothing.
    done = exec_agent(workspace, "-I", **{variable: str(workspace / value)})
    assert done.returncode == 126, done.stderr
    line = done.stderr.splitlines()[-1]
    assert variable in line and "refusing to run the gate" in line, line
    assert not ran(workspace, "agent-ran")


def python_taken_by_its_mode(folder: Path) -> Path:
    """``folder/bin/python3``: a copy of this Python (mode 755) with this virtual
    environment's ``pyvenv.cfg`` and ``lib`` beside it (the same packages: the real gate
    runs, with another file for ``sys.executable``)."""
    prefix = Path(sys.prefix)
    if not (prefix / "pyvenv.cfg").is_file():
        pytest.skip("the tests do not run in a virtual environment")
    (folder / "bin").mkdir(parents=True)
    shutil.copy2(Path(sys.executable).resolve(), folder / "bin" / "python3")
    (folder / "bin" / "python3").chmod(0o755)
    shutil.copy2(prefix / "pyvenv.cfg", folder / "pyvenv.cfg")
    (folder / "lib").symlink_to(prefix / "lib")
    return folder / "bin"


@pytest.mark.parametrize("started", ["by name", "by absolute path"])
def test_exec_whose_python_takes_another_file_for_itself_refuses(
    workspace: Path, started: str
) -> None:
    # A host starts `python3 -I -m floorguard exec` by name through execvp (env here, as
    # node's spawn or Go's exec.Command do) with a python3 the kernel will not execute first
    # on PATH (a noexec mount): execvp runs the next one; CPython, searching PATH for itself
    # by mode bits alone, takes the first for sys.executable and its pyvenv.cfg's folder for
    # its environment. Started by absolute path it searches nothing and runs the agent.
    noexec = workspace.parent / "noexec"
    skip_without_noexec_mounts(noexec)
    taken = python_taken_by_its_mode(noexec / "venv")
    own = Path(sys.executable).parent
    assert (own / "python3").exists(), own
    path = f"{taken}:{own}:{workspace.parent / 'bin'}"
    env = isolated_env(workspace.parent / "state", PATH=path)
    env.pop("PYTHONPATH", None)
    python = "python3" if started == "by name" else str(own / "python3")
    env_program = shutil.which("env") or "/usr/bin/env"
    argv = [env_program, python, "-I", "-m", "floorguard", "exec", "codex", "--", "task"]
    done = subprocess.run(noexec_command(noexec, *argv), capture_output=True, text=True,
                          cwd=workspace, env=env, timeout=120, check=False)  # fmt: skip
    if started == "by absolute path":
        assert done.returncode == 0, done.stderr
        assert ran(workspace, "agent-ran")
        return
    assert done.returncode == 126, done.stderr
    line = done.stderr.splitlines()[-1]
    assert line.startswith("floorguard: refusing to run the gate"), line
    assert f"{taken / 'python3'}" in line and "absolute path" in line, line
    assert not ran(workspace, "agent-ran")


def test_a_python_that_cannot_tell_its_own_file_refuses_the_gate() -> None:
    # No /proc/self/exe to compare with, or no sys.executable at all: fail closed.
    python = str(Path(sys.executable).resolve())
    assert own_executable_problems(python, python) == ()
    assert "cannot be read" in own_executable_problems(python, None)[0]
    assert (
        f"takes no file for itself, and so its environment, but the kernel started {python}"
        in own_executable_problems("", python)[0]
    )


def test_with_I_pythonexecutable_still_refuses_the_gate_itself(workspace: Path) -> None:
    # CPython's getpath reads PYTHONEXECUTABLE whatever -I says: the pyvenv.cfg beside the
    # program it names makes that folder the gate's environment (another floorguard there
    # would run instead). Here it names the gate's own Python, so the real gate runs and
    # must say what it saw.
    done = exec_agent(workspace, "-I", PYTHONEXECUTABLE=sys.executable)
    assert done.returncode == 126, done.stderr
    line = done.stderr.splitlines()[-1]
    assert "PYTHONEXECUTABLE" in line and "refusing to run the gate" in line, line
    assert not ran(workspace, "agent-ran")
