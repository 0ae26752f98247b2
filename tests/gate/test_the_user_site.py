"""The user site holds only what an installer recorded there, and never the workspace.

A system (non-venv) interpreter puts the user site (``~/.local/lib/pythonX.Y/site-packages``,
or under PYTHONUSERBASE) ahead of its own site-packages. HOME or PYTHONUSERBASE can put it in
the agent's working directory, and a module there that no installer recorded replaces an
installed dependency of the tracked package or answers one of its optional imports: code
the gate never judged, run by the at-floor aider. ``pip install --user`` outside the
workspace, with its dist-info, stays an installation like any other.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, PY, Outcome, World, old_aider_code
from probes import pip_install, plain_interpreter

pytestmark = pytest.mark.attack


def _system_aider(world: World) -> Path:
    """A system interpreter's prefix with aider 0.70.0 and its dependency ``helperdep``
    installed; aider imports ``helperdep`` and, optionally, ``ujson``."""
    prefix = world.root / "usr"
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    pip_install(prefix, dist="aider-chat", module="aider", version="0.70.0",
                marker=world.root / "usr-ran")  # fmt: skip
    pip_install(prefix, dist="helperdep", module="helperdep", version="1.0",
                marker=world.root / "helperdep-ran")  # fmt: skip
    main = prefix / "lib" / PY / "site-packages" / "aider" / "main.py"
    main.write_text(
        "import helperdep\ntry:\n    import ujson\nexcept ImportError:\n    pass\n"
        + main.read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    return prefix


def _run_system_aider(world: World, prefix: Path) -> Outcome:
    """The system's aider of ``prefix``, spawned from a workspace of its own."""
    workspace = world.root / "ws"
    workspace.mkdir()
    return world.spawn(
        "aider", ["task"], policy=DEFAULT, env=world.env(prefix / "bin"), cwd=workspace
    )


def _user_site(base: Path) -> Path:
    site = base / "lib" / PY / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    return site


@pytest.mark.parametrize("module", ["helperdep", "ujson"])
@pytest.mark.parametrize("moved_by", ["PYTHONUSERBASE", "HOME"])
def test_a_user_site_in_the_working_directory_is_refused(
    world: World, moved_by: str, module: str
) -> None:
    old = world.old_aider()
    prefix = _system_aider(world)
    workspace = world.root / "ws"
    base = workspace / "ub" if moved_by == "PYTHONUSERBASE" else workspace / ".local"
    (_user_site(base) / f"{module}.py").write_text(old_aider_code(old.site), encoding="utf-8")
    extra = {"PYTHONUSERBASE": str(base)} if moved_by == "PYTHONUSERBASE" else {}
    env = world.env(prefix / "bin", **extra)
    if moved_by == "HOME":
        env["HOME"] = str(workspace)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=env, cwd=workspace)
    world.assert_refused(outcome, old.marker, "user site")


@pytest.mark.parametrize("module", ["helperdep", "ujson"])
def test_a_module_in_the_user_site_that_no_installer_recorded_is_refused(
    world: World, module: str
) -> None:
    # helperdep shadows the installed dependency; ujson answers an optional import.
    old = world.old_aider()
    prefix = _system_aider(world)
    (_user_site(world.home / ".local") / f"{module}.py").write_text(
        old_aider_code(old.site), encoding="utf-8"
    )
    outcome = _run_system_aider(world, prefix)
    world.assert_refused(outcome, old.marker, "user site")


def test_a_pip_user_install_outside_the_workspace_runs_the_at_floor_aider(world: World) -> None:
    # pip install --user helperdep==2.0: a newer dependency, with its dist-info, in ~/.local.
    prefix = _system_aider(world)
    base = world.home / ".local"
    _user_site(base)
    (base / "bin").mkdir(parents=True)
    os.symlink(prefix / "bin" / "python", base / "bin" / "python")
    pip_install(base, dist="helperdep", module="helperdep", version="2.0",
                marker=world.root / "user-helperdep-ran")  # fmt: skip
    outcome = _run_system_aider(world, prefix)
    world.assert_permitted_and_ran(outcome, world.root / "usr-ran")


def _helperdep_in_the_user_site(world: World) -> tuple[Path, Path, Path]:
    """The system's aider, and ``pip install --user helperdep==2.0`` beside it: the system
    prefix, the user site and helperdep's RECORD."""
    prefix = _system_aider(world)
    base = world.home / ".local"
    site = _user_site(base)
    (base / "bin").mkdir(parents=True)
    os.symlink(prefix / "bin" / "python", base / "bin" / "python")
    pip_install(base, dist="helperdep", module="helperdep", version="2.0",
                marker=world.root / "user-helperdep-ran")  # fmt: skip
    [record] = site.glob("helperdep-*.dist-info/RECORD")
    return prefix, site, record


@pytest.mark.parametrize("package", ["helperdep", "helperdep/sub", "helperdep/sub/deeper"])
def test_bytecode_no_installer_recorded_beside_a_recorded_module_is_refused(
    world: World, package: str
) -> None:
    # A timestamp .pyc whose header matches the source runs instead of it: only what an
    # installer wrote may be there, in any folder of a recorded package.
    prefix, site, record = _helperdep_in_the_user_site(world)
    parts = package.split("/")
    for depth in range(2, len(parts) + 1):  # (recorded subpackages, as pip records them)
        folder = "/".join(parts[:depth])
        (site / folder).mkdir()
        (site / folder / "__init__.py").write_text("")
        with record.open("a", encoding="utf-8") as lines:
            lines.write(f"{folder}/__init__.py,,\n")
    cache = site / package / "__pycache__"
    cache.mkdir()
    (cache / f"__init__.cpython-{PY.removeprefix('python').replace('.', '')}.pyc").write_bytes(
        b"\x00" * 16
    )
    outcome = _run_system_aider(world, prefix)
    world.assert_refused(outcome, world.root / "usr-ran", "bytecode no installer recorded")


@pytest.mark.parametrize(
    "unrecorded",
    ["helperdep/main/__init__.py", "helperdep/main.cpython-311-x86_64-linux-gnu.so",
     "helperdep/extra.py", "helperdep/data/__init__.py"],
    ids=["a package over a recorded module", "an extension module over it", "another module",
         "a package made of a folder of recorded data"],
)  # fmt: skip
def test_code_no_installer_recorded_inside_a_recorded_package_is_refused(
    world: World, unrecorded: str
) -> None:
    # A package folder, or an extension module, beside a recorded module's source is
    # imported instead of it; any module there no installer wrote is code nothing vouches for.
    prefix, site, record = _helperdep_in_the_user_site(world)
    (site / "helperdep" / "data").mkdir()
    (site / "helperdep" / "data" / "prompts.txt").write_text("")  # (recorded data)
    with record.open("a", encoding="utf-8") as lines:
        lines.write("helperdep/data/prompts.txt,,\n")
    (site / unrecorded).parent.mkdir(parents=True, exist_ok=True)
    (site / unrecorded).write_text("")
    outcome = _run_system_aider(world, prefix)
    world.assert_refused(outcome, world.root / "usr-ran", "no installer recorded")


@pytest.mark.parametrize("unrecorded", ["helperdep/NOTES.txt", "helperdep/model-settings.yml"])
def test_data_no_installer_recorded_inside_a_recorded_package_is_not_code(
    world: World, unrecorded: str
) -> None:
    # (only what Python would import in the package's place refuses: a file it never
    # imports is no module)
    prefix, site, _record = _helperdep_in_the_user_site(world)
    (site / unrecorded).write_text("")
    outcome = _run_system_aider(world, prefix)
    world.assert_permitted_and_ran(outcome, world.root / "usr-ran")


def test_a_user_site_in_the_agents_working_directory_refuses_its_server(world: World) -> None:
    """An MCP server declared with ``cwd`` below the agent's working directory and HOME at
    the agent's: the user site is in the workspace, though above the server's own folder."""
    from floorguard._gate.gate import REFUSE, judge
    from floorguard._identify.identification import workspace_in_force

    old = world.old_aider()
    prefix = _system_aider(world)
    workspace = world.root / "ws"
    (workspace / "sub").mkdir(parents=True)
    # Recorded as an installer records it: only where it lies tells it from the user's.
    pip_install(workspace / ".local", dist="helperdep", module="helperdep", version="1.0",
                marker=old.marker)  # fmt: skip
    env = {**world.env(prefix / "bin"), "HOME": str(workspace)}
    with workspace_in_force(str(workspace)):
        judged = judge("aider", binary=prefix / "bin" / "aider", version=None, policy="deny",
                       environ=env, argv=["task"], cwd=workspace / "sub")  # fmt: skip
    assert judged.verdict == REFUSE, judged
    assert "user site" in judged.reason, judged.reason


@pytest.mark.parametrize("spelling", ["missing/..", "afile/..", "/." * 2100])
def test_a_user_site_that_site_does_not_find_by_its_letters_is_not_judged_in_its_place(
    world: World, spelling: str
) -> None:
    """``site`` adds the user site only when ``isdir`` of its path as spelled holds (the
    kernel resolving ``missing/..``, failing a path over PATH_MAX), and adds it normalized:
    a HOME whose normal form leads to a user site with aider 0.70.0 while ``site`` finds
    none runs the interpreter's own aider 0.50.0, which is what must be judged."""
    prefix = world.root / "usr"
    if plain_interpreter(prefix) is None:
        pytest.skip("this interpreter cannot be relocated into a private prefix")
    old_ran = world.root / "old-ran"
    pip_install(prefix, dist="aider-chat", module="aider", version="0.50.0", marker=old_ran)
    home = world.root / "home2"
    base = home / ".local"
    _user_site(base)
    (base / "bin").mkdir(parents=True)
    os.symlink(prefix / "bin" / "python", base / "bin" / "python")
    pip_install(base, dist="aider-chat", module="aider", version="0.70.0",
                marker=world.root / "new-ran")  # fmt: skip
    (home / "afile").write_text("", encoding="utf-8")
    spelled = str(home) + (spelling if spelling.startswith("/.") else "/" + spelling)
    workspace = world.root / "ws"
    workspace.mkdir()
    env = world.env(base / "bin", HOME=spelled)
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=env, cwd=workspace)
    world.assert_refused(outcome, old_ran, "0.50.0")


@pytest.mark.parametrize(
    "entry",
    ["ujson.py/", "lnk/../site-packages/ujson.py"],
    ids=["a trailing slash", "a climb through a link"],
)
def test_a_record_entry_naming_another_file_or_none_records_nothing(
    world: World, entry: str
) -> None:
    # ujson answers aider's optional import; the RECORD names it only in a spelling the
    # kernel takes for no file (ENOTDIR) or for another (lnk leads elsewhere, .. from there).
    old = world.old_aider()
    prefix, site, record = _helperdep_in_the_user_site(world)
    if entry.startswith("lnk/"):
        # (outside the site: a link there would be a package no installer recorded)
        (site.parent / "lnk").symlink_to(world.root / "elsewhere" / "deep")
        (world.root / "elsewhere" / "deep").mkdir(parents=True)
        entry = f"../{entry}"
    (site / "ujson.py").write_text(old_aider_code(old.site), encoding="utf-8")
    with record.open("a", encoding="utf-8") as lines:
        lines.write(f"{entry},,\n")
    outcome = _run_system_aider(world, prefix)
    world.assert_refused(outcome, old.marker, "no installer recorded")


def test_a_record_entry_quoted_as_csv_quotes_it_records_that_file(world: World) -> None:
    # RECORD is CSV: a field may be quoted (pip quotes a path holding a comma or a quote).
    prefix, site, record = _helperdep_in_the_user_site(world)
    (site / "ujson.py").write_text("", encoding="utf-8")
    with record.open("a", encoding="utf-8") as lines:
        lines.write('"ujson.py",,\n')
    outcome = _run_system_aider(world, prefix)
    world.assert_permitted_and_ran(outcome, world.root / "usr-ran")
