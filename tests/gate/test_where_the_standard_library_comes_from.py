"""The standard library is the one CPython's getpath finds, and only where the gate can tell.

getpath takes the standard library from the prefix a virtual environment's ``pyvenv.cfg``
``home`` leads to, read its own way (bytes as UTF-8, split at ``\\n`` only, the first
``home`` key). A ``home`` relative to nothing but the child's working directory, a file it
reads as holding no ``home`` (the landmark search then starts from the environment's own
``bin/``), and the build-tree markers beside the interpreter (``pybuilddir.txt``,
``Modules/Setup.local``: the standard library is then ``<bin>/Lib``) each let a folder the
gate never judged supply the standard library, whose ``sitecustomize`` runs at start-up.
"""

from __future__ import annotations

import venv
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, PY, World, old_aider_code
from probes import linked_stdlib, pip_install, plain_interpreter

pytestmark = pytest.mark.attack


def _stdlib_running(lib: Path, code: str) -> None:
    """A standard library at ``lib`` whose ``sitecustomize`` runs ``code``."""
    linked_stdlib(lib)
    (lib / "sitecustomize.py").write_text(code, encoding="utf-8")


@pytest.mark.parametrize("home", ["hb", "..", "./hb"])
def test_a_relative_pyvenv_cfg_home_is_refused(world: World, home: str) -> None:
    # getpath resolves a relative home against the child's working directory: the
    # workspace's hb/lib/pythonX.Y (or its parent's lib/) becomes the standard library.
    old, new = world.old_aider(), world.new_aider()
    cfg = new.prefix / "pyvenv.cfg"
    cfg.write_text(
        "".join(
            f"home = {home}\n" if line.startswith("home") else line
            for line in cfg.read_text(encoding="utf-8").splitlines(keepends=True)
        ),
        encoding="utf-8",
    )
    workspace = world.root / "ws"
    root = workspace / "hb"
    cwd = workspace
    if home == "..":
        root, cwd = workspace, workspace / "sub"
        cwd.mkdir(parents=True)
    _stdlib_running(root / "lib" / PY, old_aider_code(old.site))
    outcome = world.spawn(
        "aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"), cwd=cwd
    )
    world.assert_refused(outcome, old.marker, "pyvenv.cfg")


# How each file is made from the one venv wrote ("home = ...\ninclude-...\nversion = ...").
UNREAD_HOMES = {
    "byte order mark": lambda cfg: b"\xef\xbb\xbf" + cfg,
    "zero-width space": lambda cfg: cfg.replace(b"home", "\u200bhome".encode()),
    "no home line": lambda cfg: b"".join(
        line for line in cfg.splitlines(keepends=True) if not line.startswith(b"home")
    ),
    "after a lone carriage return": lambda cfg: b"version = 3\r" + cfg,
    "after a NUL": lambda cfg: b"version = 3\x00\n" + cfg,
}


def _copied_venv(world: World) -> Path:
    """A ``--copies`` virtual environment with the at-floor aider: its interpreter is a
    file of its own, so getpath's landmark search without a home starts in its bin/."""
    prefix = world.root / "copied"
    venv.EnvBuilder(with_pip=False, symlinks=False).create(prefix)
    pip_install(prefix, dist="aider-chat", module="aider", version="0.70.0",
                marker=world.root / "copied-ran")  # fmt: skip
    return prefix


@pytest.mark.parametrize("config", sorted(UNREAD_HOMES))
def test_a_pyvenv_cfg_without_a_home_getpath_reads_is_refused(world: World, config: str) -> None:
    # Without a home it reads, getpath finds <venv>/lib/pythonX.Y/os.py from the copied
    # interpreter's folder: the environment's own lib/ is the standard library.
    old = world.old_aider()
    prefix = _copied_venv(world)
    cfg = prefix / "pyvenv.cfg"
    cfg.write_bytes(UNREAD_HOMES[config](cfg.read_bytes()))
    _stdlib_running(prefix / "lib" / PY, old_aider_code(old.site))
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(prefix / "bin"))
    world.assert_refused(outcome, old.marker, "pyvenv.cfg")


def test_a_copied_venv_with_its_home_runs_the_at_floor_aider(world: World) -> None:
    prefix = _copied_venv(world)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(prefix / "bin"))
    world.assert_permitted_and_ran(outcome, world.root / "copied-ran")


@pytest.mark.parametrize("marker", ["pybuilddir.txt", "Modules/Setup.local"])
def test_a_build_tree_marker_beside_the_interpreter_is_refused(world: World, marker: str) -> None:
    # getpath takes an interpreter with either file beside it for one run from its build
    # tree: the standard library is <bin>/Lib, whatever its prefix holds.
    old = world.old_aider()
    prefix = world.root / "usr"
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    new_marker = world.root / "usr-ran"
    pip_install(prefix, dist="aider-chat", module="aider", version="0.70.0", marker=new_marker)
    (prefix / "bin" / marker).parent.mkdir(parents=True, exist_ok=True)
    (prefix / "bin" / marker).write_text("build/lib.linux-x86_64\n", encoding="utf-8")
    _stdlib_running(prefix / "bin" / "Lib", old_aider_code(old.site))
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(prefix / "bin"))
    world.assert_refused(outcome, old.marker, marker.rsplit("/", 1)[-1])


def _prefix_with_aider(world: World, prefix: Path) -> Path:
    """A plain CPython installation at ``prefix`` (a copy of this interpreter, its standard
    library linked in) with the at-floor aider in its site-packages."""
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    pip_install(prefix, dist="aider-chat", module="aider", version="0.70.0",
                marker=world.root / "prefix-ran")  # fmt: skip
    return prefix


def test_an_installation_whose_standard_library_the_workspace_holds_is_refused(
    world: World,
) -> None:
    """A copy of CPython in the working directory: its standard library (a sitecustomize,
    an edited encodings) runs before anything judged, and is the workspace's."""
    old = world.old_aider()
    workspace = world.root / "ws"
    prefix = _prefix_with_aider(world, workspace / "py")
    (prefix / "lib" / PY / "sitecustomize.py").write_text(
        old_aider_code(old.site), encoding="utf-8"
    )
    outcome = world.spawn(
        "aider", ["task"], policy=DEFAULT, env=world.env(prefix / "bin"), cwd=workspace
    )
    world.assert_refused(outcome, old.marker, "standard library")


def test_the_same_installation_outside_the_working_directory_runs_aider(world: World) -> None:
    prefix = _prefix_with_aider(world, world.root / "opt" / "py")
    workspace = world.root / "ws"
    workspace.mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DEFAULT, env=world.env(prefix / "bin"), cwd=workspace
    )
    world.assert_permitted_and_ran(outcome, world.root / "prefix-ran")
