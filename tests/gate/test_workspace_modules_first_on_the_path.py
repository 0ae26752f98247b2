"""A folder in the agent's workspace that is first on the child's path (the program's
folder, a folder run as the program, a PYTHONPATH entry) may hold nothing an import could
load but the program itself: a module named like nothing installed still answers an
optional import (``try: import ujson``) of the program or of any package it runs.

Every agent is a real virtual environment whose at-floor aider tries an optional import,
as real packages probe for accelerators; the planted module leaves a marker if it runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import DENY_BY_DEFAULT, RUN_AIDER, World, old_aider_code
from probes import write_executable

pytestmark = pytest.mark.attack

OPTIONAL = "try:\n    import ujson\nexcept ImportError:\n    ujson = None\n"


def optional_import(site: Path) -> None:
    main = site / "aider" / "main.py"
    main.write_text(OPTIONAL + main.read_text(encoding="utf-8"), encoding="utf-8")


def plant(folder: Path, world: World) -> Path:
    """``ujson.py`` in ``folder``: the below-floor aider, run when it is imported."""
    old = world.old_aider()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ujson.py").write_text(old_aider_code(old.site), encoding="utf-8")
    return old.marker


def test_a_module_beside_a_workspace_script_is_refused(world: World) -> None:
    new = world.new_aider()
    optional_import(new.site)
    marker = plant(world.root / "ws", world)
    outcome = world.run_workspace_script(new, RUN_AIDER)
    world.assert_refused(outcome, marker, "holds ujson")


def test_a_folder_run_as_the_program_is_first_on_the_path_even_with_P(world: World) -> None:
    new = world.new_aider()
    optional_import(new.site)
    app = world.root / "ws" / "app"
    marker = plant(app, world)
    (app / "__main__.py").write_text(RUN_AIDER)
    outcome = world.spawn(
        "python", ["-P", str(app), "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(), cwd=app.parent,
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")


def test_a_module_beside_a_console_script_copied_into_the_workspace_is_refused(
    world: World,
) -> None:
    new = world.new_aider()
    optional_import(new.site)
    tools = world.root / "ws" / "bin"
    marker = plant(tools, world)
    wrapper = write_executable(tools / "aider", new.script.read_text(encoding="utf-8"))
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, binary=wrapper, env=world.env(),
        cwd=tools.parent,
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")


def test_a_pythonpath_entry_in_the_workspace_holding_a_module_is_refused(world: World) -> None:
    new = world.new_aider()
    optional_import(new.site)
    workspace = world.root / "ws"
    marker = plant(workspace / "lib", world)
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT,
        env=world.env(new.prefix / "bin", PYTHONPATH=str(workspace / "lib")), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")


def test_a_venv_inside_the_workspace_with_its_activate_this_still_runs(world: World) -> None:
    inside = world.aider("0.70.0", name="ws/.venv")
    optional_import(inside.site)
    (inside.prefix / "bin" / "activate_this.py").write_text("# virtualenv's\n")
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(inside.prefix / "bin"),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, inside.marker)


def test_a_script_alone_in_its_workspace_folder_still_runs(world: World) -> None:
    new = world.new_aider()
    optional_import(new.site)
    outcome = world.run_workspace_script(new, RUN_AIDER)
    world.assert_permitted_and_ran(outcome, new.marker)


@pytest.mark.parametrize(
    "beside",
    [
        "ujson/__init__.py",
        "ujson.cpython-311-x86_64-linux-gnu.so",
        "__pycache__/ujson.cpython-311.pyc",
    ],
    ids=["package", "extension-module", "cached-bytecode"],
)
def test_a_program_named_like_an_import_with_other_code_of_its_name_beside_it_is_refused(
    world: World, beside: str
) -> None:
    # The program's own name is known only while an import of it finds the program itself:
    # a package or an extension module of that name is found first, cached bytecode runs
    # instead of the source.
    new = world.new_aider()
    optional_import(new.site)
    workspace = world.root / "ws"
    workspace.mkdir()
    program = workspace / "ujson.py"
    program.write_text(RUN_AIDER)
    other = workspace / beside
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_bytes(b"not judged\n")
    outcome = world.spawn(
        "python", [str(program), "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, world.root / "never-written", "holds ujson")


def test_a_workspace_folder_a_pth_file_adds_to_the_agents_path_is_refused(world: World) -> None:
    # pip install -e . of the workspace's project into the agent's venv: its .pth adds the
    # project's source folder, after site-packages, where an optional import still finds it.
    new = world.new_aider()
    optional_import(new.site)
    source = world.root / "ws" / "src"
    marker = plant(source, world)
    (new.site / "__editable__.project-0.1.pth").write_text(f"{source}\n")
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=source.parent,
    )  # fmt: skip
    world.assert_refused(outcome, marker, "a .pth file adds")
