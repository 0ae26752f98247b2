"""A folder on the child's path that is not part of the judged install (the program's
folder, a folder run as the program, a PYTHONPATH entry, a folder a ``.pth`` file adds),
inside the agent's workspace or anywhere else, may hold nothing an import could load but
the program itself: a module named like nothing installed still answers an optional import
(``try: import ujson``) of the program or of any package it runs.

Every agent is a real virtual environment whose at-floor aider tries an optional import,
as real packages probe for accelerators; the planted module leaves a marker if it runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.closed_world import (
    DENY_BY_DEFAULT,
    NEW_AIDER,
    PY,
    RUN_AIDER,
    World,
    editable_install,
    old_aider_code,
)
from probes import write_executable

pytestmark = pytest.mark.attack

# The bytecode tag of the world's venvs (cpython-311 for python3.11).
TAG = PY.removeprefix("python").replace(".", "")
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


# ------------------------------------------------------------- outside the working directory


def test_a_pythonpath_entry_outside_the_workspace_holding_a_module_is_refused(
    world: World,
) -> None:
    # The user's environment passes PYTHONPATH on as much as the workspace holds files.
    new = world.new_aider()
    optional_import(new.site)
    outside = world.root / "pp"
    marker = plant(outside, world)
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT,
        env=world.env(new.prefix / "bin", PYTHONPATH=str(outside)), cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, marker, f"{outside}", "holds ujson")
    assert "holds ujson" in outcome.reason and str(outside) in outcome.reason, outcome


@pytest.mark.parametrize(
    "files",
    [[], ["README.txt", "data.json", "not-a-name.py", "assets/logo.png"]],
    ids=["empty", "nothing-importable"],
)
def test_a_pythonpath_entry_outside_the_workspace_with_nothing_importable_still_runs(
    world: World, files: list[str]
) -> None:
    new = world.new_aider()
    optional_import(new.site)
    outside = world.root / "pp"
    outside.mkdir()
    for name in files:
        (outside / name).parent.mkdir(parents=True, exist_ok=True)
        (outside / name).write_text("data\n", encoding="utf-8")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT,
        env=world.env(new.prefix / "bin", PYTHONPATH=str(outside)), cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_a_module_beside_a_wrapper_script_outside_the_workspace_is_refused(world: World) -> None:
    # A host's own wrapper (no -I): its folder is first on the path, wherever it lies.
    new = world.new_aider()
    optional_import(new.site)
    tools = world.root / "tools"
    marker = plant(tools, world)
    wrapper = write_executable(tools / "aider", new.script.read_text(encoding="utf-8"))
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, binary=wrapper, env=world.env(),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")
    assert str(tools) in outcome.reason, outcome


@pytest.mark.parametrize("program", ["aider", "run_aider.py"], ids=["wrapper", "script"])
def test_a_program_alone_in_its_folder_outside_the_workspace_still_runs(
    world: World, program: str
) -> None:
    new = world.new_aider()
    optional_import(new.site)
    tools = world.root / "tools"
    tools.mkdir()
    (tools / "README.txt").write_text("how to run aider\n", encoding="utf-8")
    if program == "aider":
        wrapper = write_executable(tools / program, new.script.read_text(encoding="utf-8"))
        adapter, binary, argv = "aider", wrapper, ["task"]
    else:
        (tools / program).write_text(RUN_AIDER, encoding="utf-8")
        adapter, binary, argv = "python", new.python, [str(tools / program), "task"]
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        adapter, argv, policy=DENY_BY_DEFAULT, binary=binary, env=world.env(),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_a_venv_outside_the_workspace_with_its_activate_this_still_runs(world: World) -> None:
    new = world.new_aider()
    optional_import(new.site)
    (new.prefix / "bin" / "activate_this.py").write_text("# virtualenv's\n")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def record_scripts(site: Path, dist: str, files: list[str]) -> None:
    """A dist-info in ``site`` whose RECORD lists ``files`` of the environment's bin folder
    (as pip records jmespath's ``jp.py`` and the bytecode it compiles for it)."""
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = [f"../../../bin/{name},," for name in files]
    lines += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_scripts_an_installer_recorded_beside_the_console_script_still_run(world: World) -> None:
    # pip installs jmespath's jp.py (and the docutils rst2*.py) into the environment's bin
    # folder, the console script's own: installed code, recorded like site-packages' own.
    new = world.new_aider()
    optional_import(new.site)
    bin_dir = new.prefix / "bin"
    (bin_dir / "jp.py").write_text("print('jp')\n", encoding="utf-8")
    (bin_dir / "__pycache__").mkdir()
    (bin_dir / "__pycache__" / f"jp.cpython-{TAG}.pyc").write_bytes(b"")
    record_scripts(new.site, "jmespath", ["jp.py", f"__pycache__/jp.cpython-{TAG}.pyc"])
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(bin_dir), cwd=world.root / "ws"
    )
    world.assert_permitted_and_ran(outcome, new.marker)


@pytest.mark.parametrize(
    "unrecorded",
    ["ujson.py", f"__pycache__/jp.cpython-{TAG}.pyc"],
    ids=["module", "cached-bytecode-of-a-recorded-script"],
)
def test_a_module_no_installer_recorded_beside_the_console_script_is_refused(
    world: World, unrecorded: str
) -> None:
    new = world.new_aider()
    optional_import(new.site)
    bin_dir = new.prefix / "bin"
    (bin_dir / "jp.py").write_text("print('jp')\n", encoding="utf-8")
    record_scripts(new.site, "jmespath", ["jp.py"])
    planted = bin_dir / unrecorded
    planted.parent.mkdir(exist_ok=True)
    planted.write_bytes(b"")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(bin_dir), cwd=world.root / "ws"
    )
    world.assert_refused(
        outcome, world.root / "never-written", f"holds {Path(unrecorded).name.split('.')[0]}"
    )


def test_a_link_of_another_name_to_a_recorded_script_is_refused(world: World) -> None:
    # Recorded is the name an installer wrote: ujson.py linked to jp.py answers import ujson.
    new = world.new_aider()
    optional_import(new.site)
    bin_dir = new.prefix / "bin"
    (bin_dir / "jp.py").write_text("print('jp')\n", encoding="utf-8")
    record_scripts(new.site, "jmespath", ["jp.py"])
    (bin_dir / "ujson.py").symlink_to("jp.py")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(bin_dir), cwd=world.root / "ws"
    )
    world.assert_refused(outcome, world.root / "never-written", "holds ujson")


def test_a_folder_outside_the_workspace_a_pth_file_adds_is_refused(world: World) -> None:
    # A develop install's source folder: nobody installed or recorded what it holds.
    new = world.new_aider()
    optional_import(new.site)
    source = world.root / "src" / "myproj"
    marker = plant(source, world)
    (new.site / "myproj.pth").write_text(f"{source}\n")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")
    assert str(source) in outcome.reason, outcome


def test_an_editable_install_outside_the_workspace_holding_another_module_is_refused(
    world: World,
) -> None:
    new = world.new_aider()
    optional_import(new.site)
    source = world.root / "checkout" / "src"
    marker = plant(source, world)
    (source / "mytool").mkdir()
    (source / "mytool" / "__init__.py").write_text("")
    editable_install(new.site, "mytool", source, top_level="mytool")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")


@pytest.mark.parametrize(
    ("dist", "package", "top_level"),
    [("my-tool", "my_tool", None), ("mytool", "mytool_core", "mytool_core")],
    ids=["named-by-its-distribution", "named-in-top-level"],
)
def test_an_editable_install_outside_the_workspace_of_its_own_package_still_runs(
    world: World, dist: str, package: str, top_level: str | None
) -> None:
    new = world.new_aider()
    optional_import(new.site)
    source = world.root / "checkout" / "src"
    (source / package).mkdir(parents=True)
    (source / package / "__init__.py").write_text("")
    (source / f"{dist.replace('-', '_')}.egg-info").mkdir()
    editable_install(new.site, dist, source, top_level=top_level)
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_an_editable_install_of_the_agent_is_refused_whatever_version_it_was_installed_at(
    world: World,
) -> None:
    """Its metadata says the version it was installed at; its source folder holds whatever
    the checkout holds now (moved to an old release's tag: the old code runs)."""
    new = world.new_aider()
    old = world.old_aider()
    for installed in [new.site / "aider", *new.site.glob("aider_chat-*.dist-info")]:
        shutil.rmtree(installed)
    source = world.root / "checkout" / "src"
    shutil.copytree(old.site / "aider", source / "aider")
    editable_install(new.site, "aider-chat", source, top_level="aider", version=NEW_AIDER)
    # What setuptools leaves in the checkout (git ignores it): the metadata as installed.
    egg = source / "aider_chat.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text(
        f"Metadata-Version: 2.1\nName: aider-chat\nVersion: {NEW_AIDER}\n", encoding="utf-8"
    )
    (egg / "top_level.txt").write_text("aider\n", encoding="utf-8")
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "aider", ["task"], policy=DENY_BY_DEFAULT, env=world.env(new.prefix / "bin"),
        cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "an editable install of aider")
    assert str(source) in outcome.reason, outcome


def test_a_module_beside_the_package_dash_m_runs_from_a_pythonpath_entry_is_refused(
    world: World,
) -> None:
    # The package -m runs is the program's own (judged as the program); nothing else is.
    new = world.new_aider()
    optional_import(new.site)
    lib = world.root / "lib"
    marker = plant(lib, world)
    (lib / "runner").mkdir()
    (lib / "runner" / "__init__.py").write_text("")
    (lib / "runner" / "__main__.py").write_text(RUN_AIDER)
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "python", ["-P", "-m", "runner", "task"], policy=DENY_BY_DEFAULT, binary=new.python,
        env=world.env(PYTHONPATH=str(lib)), cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, marker, "holds ujson")
