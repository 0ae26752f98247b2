"""CPython finds its environment and its prefixes from the interpreter's path as spelled
(getpath) and, for ``site``, from that path normalized; and it looks for its platform
library (``lib-dynload``, whose folder becomes ``sys.exec_prefix``) on its own. When these
disagree with what the gate reads, the child imports code from a folder the gate did not
judge: such an interpreter is refused, naming why.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, PY, Outcome, World, old_aider_code
from probes import pip_install, plain_interpreter

pytestmark = pytest.mark.attack


def _base_with_aider(world: World, prefix: Path, version: str) -> Path:
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    pip_install(prefix, dist="aider-chat", module="aider", version=version,
                marker=world.root / f"{prefix.name}-ran")  # fmt: skip
    return prefix


def _python_m_aider(world: World, binary: str | Path) -> Outcome:
    """``binary -P -m aider task`` spawned from a workspace of its own, as the host does."""
    workspace = world.root / "ws"
    workspace.mkdir()
    return world.spawn(
        "python", ["-P", "-m", "aider", "task"], policy=DEFAULT, binary=binary,
        env=world.env(), cwd=workspace,
    )  # fmt: skip


def _old_venv_over_a_new_base(world: World) -> tuple[Path, Path]:
    """A virtual environment with aider 0.50.0 over a base installation with aider 0.70.0:
    the environment, and the file its aider leaves when it runs."""
    base = _base_with_aider(world, world.root / "usr", "0.70.0")
    venv = world.root / "v"
    subprocess.run([str(base / "bin" / "python"), "-m", "venv", "--without-pip", str(venv)],
                   check=True, capture_output=True)  # fmt: skip
    old_ran = world.root / "v-ran"
    pip_install(venv, dist="aider-chat", module="aider", version="0.50.0", marker=old_ran)
    return venv, old_ran


@pytest.mark.parametrize("spelling", ["bin/./python3", "bin/sub/../python3"])
def test_a_venv_interpreter_named_by_a_path_not_written_plainly_is_refused(
    world: World, spelling: str
) -> None:
    """getpath looks for ``pyvenv.cfg`` by the path as spelled and finds none; ``site``
    normalizes it and finds the environment, with its aider 0.50.0."""
    venv, old_ran = _old_venv_over_a_new_base(world)
    (venv / "bin" / "sub").mkdir()
    outcome = _python_m_aider(world, f"{venv}/{spelling}")
    world.assert_refused(outcome, old_ran, "written plainly", "0.50.0")


def test_an_interpreter_whose_platform_library_lies_elsewhere_is_refused(world: World) -> None:
    """With no ``lib-dynload`` beside its standard library, CPython takes the folder above
    where it finds one for ``exec_prefix``, and ``site`` adds that prefix's site-packages
    too: a ``.pth`` import line there runs before the program."""
    old = world.old_aider()
    outer = world.root / "y"
    base = _base_with_aider(world, outer / "sub", "0.70.0")
    stdlib = base / "lib" / PY
    dynload = os.readlink(stdlib / "lib-dynload")
    (stdlib / "lib-dynload").unlink()
    (outer / "lib" / PY).mkdir(parents=True)
    os.symlink(dynload, outer / "lib" / PY / "lib-dynload")
    site = outer / "lib" / PY / "site-packages"
    site.mkdir()
    (site / "old.py").write_text(old_aider_code(old.site), encoding="utf-8")
    (site / "zz.pth").write_text("import old\n", encoding="utf-8")
    outcome = _python_m_aider(world, base / "bin" / "python")
    world.assert_refused(outcome, old.marker, "lib-dynload")


def test_a_venv_interpreter_named_with_a_repeated_slash_is_judged_as_its_environment(
    world: World,
) -> None:
    """``bin//python3``: the kernel, getpath and site all read it as ``bin/python3``."""
    venv, old_ran = _old_venv_over_a_new_base(world)
    outcome = _python_m_aider(world, f"{venv}/bin//python3")
    world.assert_refused(outcome, old_ran, "0.50.0")
