"""Package metadata in a folder the interpreter does not load installed code from (for
Python a workspace, a ``pip install --target`` folder, a folder merely named
``site-packages``; for node any folder outside a ``node_modules``) may refuse a file as a
below-floor package's, never vouch for it: a program it claims at a version the map lets run
is judged as the program it is, and is untracked when it loads no adapter.

Two small files beside a workspace program (a METADATA naming aider-chat 0.70.0 and a RECORD
listing the program) once made it aider 0.70 without its source being read: a program that
put a below-floor aider first on ``sys.path`` ran under a permit for aider 0.70, under
deny-by-default too.

Real files, a real virtual environment's Python, the gate in a host process of its own.
"""

from __future__ import annotations

import json
import venv
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, World, old_aider_code

NODE = "/usr/bin/node"


def _claimed(folder: Path, program: str, source: str, *, version: str = "0.70.0") -> Path:
    """``program`` (a path under ``folder``) holding ``source``, and beside it in ``folder``
    the metadata of aider-chat ``version`` whose RECORD lists it."""
    path = folder / program
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    info = folder / f"aider_chat-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: aider-chat\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "RECORD").write_text(f"{program},,\n{info.name}/METADATA,,\n", encoding="utf-8")
    return path


def _untracked_either_way(
    world: World, requested: str, argv: list[str], binary: Path | str, marker: Path
) -> None:
    """``requested ARGV`` from the workspace: refused as untracked under deny-by-default,
    run as untracked under the default policy; never recorded as a tracked adapter."""
    args = dict(binary=binary, env=world.env(), cwd=world.root / "ws")
    refused = world.spawn(requested, argv, policy=DENY_BY_DEFAULT, **args)
    world.assert_refused(refused, marker, "not a tracked adapter")
    allowed = world.spawn(requested, argv, policy=DEFAULT, **args)
    assert allowed["outcome"] == "started" and marker.exists(), allowed
    recorded = [(r["verdict"], r["adapter"]) for r in world.recorded()]
    assert recorded == [("refuse", requested), ("untracked", requested)]


def _refused_as(
    world: World,
    adapter: str,
    requested: str,
    argv: list[str],
    *,
    binary: Path | str,
    policy: str,
    marker: Path,
) -> None:
    """``requested ARGV`` from the workspace: refused, and recorded, as ``adapter``'s."""
    (world.root / "ws").mkdir(exist_ok=True)
    outcome = world.spawn(
        requested, argv, binary=binary, policy=policy, env=world.env(), cwd=world.root / "ws"
    )
    world.assert_refused(outcome, marker, adapter)
    assert world.recorded()[-1]["adapter"] == adapter


def _permitted_as(
    world: World,
    identified: tuple[str, str],
    requested: str,
    argv: list[str],
    *,
    binary: Path | str,
    policy: str,
) -> None:
    """``requested ARGV`` started, permitted as the (adapter, version) ``identified``."""
    outcome = world.spawn(requested, argv, binary=binary, policy=policy, env=world.env())
    assert outcome["outcome"] == "started", outcome
    last = world.recorded()[-1]
    assert (last["verdict"], last["adapter"], last["version"]) == ("permit", *identified)


@pytest.mark.parametrize("folder", ["ws", "ws/site-packages", "ws/vendor"])
def test_a_program_that_runs_below_floor_code_is_read_whatever_metadata_claims_it(
    world: World, untracked_policy: str, folder: str
) -> None:
    old = world.old_aider()
    workspace = world.root / "ws"
    program = _claimed(world.root / folder, "run.py", old_aider_code(old.site))
    outcome = world.spawn(
        "python", ["-P", str(program)], binary=world.new_aider().python, policy=untracked_policy,
        env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "sys.path")
    world.assert_no_permit_recorded()


def test_a_program_claimed_at_a_safe_version_is_untracked_not_that_package(
    world: World, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    program = _claimed(
        world.root / "ws", "run.py", f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n"
    )
    _untracked_either_way(world, "python", ["-P", str(program)], world.new_aider().python, marker)


def test_a_program_claimed_at_a_below_floor_version_is_still_refused_as_that_package(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    # What the search of folders above a file is for: pip install --target's layout of a
    # below-floor aider, whatever the folder is called, is aider's code at its version.
    marker = tmp_path / "ran"
    program = _claimed(
        tmp_path / "vendor", "aider/scrape.py",
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n", version="0.50.0",
    )  # fmt: skip
    python = world.new_aider().python
    _refused_as(world, "aider", "python", [str(program)], binary=python, policy=untracked_policy,
                marker=marker)  # fmt: skip


def test_a_claimed_program_taking_a_package_the_interpreter_cannot_find_says_so(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    # Under -P the script's folder is not on sys.path: the aider code beside it is not what
    # the child imports, and the reason names that, not a package without code.
    marker = tmp_path / "ran"
    target = tmp_path / "target"
    program = _claimed(target, "run_aider.py", "from aider.main import main\nmain()\n",
                       version="0.86.0")  # fmt: skip
    (target / "aider").mkdir()
    (target / "aider" / "__init__.py").write_text("", encoding="utf-8")
    (target / "aider" / "main.py").write_text(
        f"def main():\n    import pathlib\n    pathlib.Path({str(marker)!r}).touch()\n",
        encoding="utf-8",
    )
    plain = tmp_path / "plain"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(plain)
    (world.root / "ws").mkdir()
    outcome = world.spawn(
        "python", ["-P", str(program)], binary=plain / "bin" / "python", policy=untracked_policy,
        env=world.env(), cwd=world.root / "ws",
    )  # fmt: skip
    world.assert_refused(outcome, marker, "aider is not found where the interpreter looks for it")
    assert "no code of its own" not in outcome.reason, outcome
    world.assert_no_permit_recorded()


def test_a_file_the_interpreters_own_site_packages_installed_is_still_that_package(
    world: World, untracked_policy: str
) -> None:
    # The metadata Python imports through vouches as before: aider's own file, unread.
    new = world.new_aider()
    module = next(new.site.glob("aider/main.py"))
    _permitted_as(world, ("aider", "0.70.0"), "python", ["-P", str(module)], binary=new.python,
                  policy=untracked_policy)  # fmt: skip


def _claimed_script(folder: Path, marker: Path, version: str) -> Path:
    """``folder/x.js`` (it leaves ``marker``) beside a package.json naming claude's package
    at ``version``: metadata anyone could write in a workspace, outside any node_modules."""
    folder.mkdir(parents=True)
    manifest = {"name": "@anthropic-ai/claude-code", "version": version}
    (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    script = folder / "x.js"
    script.write_text(f"require('fs').writeFileSync({json.dumps(str(marker))}, '')\n")
    return script


def test_a_node_script_claimed_at_a_safe_version_outside_node_modules_is_untracked(
    world: World, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    script = _claimed_script(world.root / "ws" / "tools", marker, "2.1.5")
    _untracked_either_way(world, "node", [str(script)], NODE, marker)


def test_a_node_script_claimed_at_a_below_floor_version_is_refused_as_that_package(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    script = _claimed_script(world.root / "ws" / "tools", marker, "1.0.0")
    _refused_as(world, "claude", "node", [str(script)], binary=NODE, policy=untracked_policy,
                marker=marker)  # fmt: skip


def test_claudes_own_file_in_its_global_install_is_still_claude(
    world: World, untracked_policy: str
) -> None:
    new = world.new_claude()
    _permitted_as(world, ("claude", new.version), "node", [str(new.cli)], binary=NODE,
                  policy=untracked_policy)  # fmt: skip


def test_a_package_json_lying_in_node_modules_itself_is_no_installed_package(
    world: World, tmp_path: Path
) -> None:
    # npm installs a package at node_modules/NAME or node_modules/@SCOPE/NAME, never a
    # package.json in node_modules itself.
    marker = tmp_path / "ran"
    script = _claimed_script(world.root / "ws" / "node_modules", marker, "2.1.5")
    _untracked_either_way(world, "node", [str(script)], NODE, marker)


def test_a_script_its_metadata_claims_below_the_floor_is_refused_for_that_version(
    world: World, tmp_path: Path
) -> None:
    # A #! script a --target folder's dist-info lists, run by its name: the reason is the
    # version that metadata states, not "no valid version".
    marker = tmp_path / "ran"
    python = world.new_aider().python
    script = _claimed(
        world.root / "ws" / "target", "bin/aider",
        f"#!{python} -P\nprint('aider 0.50.0')\n",
        version="0.50.0",
    )  # fmt: skip
    script.chmod(0o755)
    outcome = world.spawn(
        "aider", [], policy=DEFAULT, env=world.env(script.parent), cwd=world.root / "ws"
    )
    world.assert_refused(outcome, marker, "0.50.0 is below the floor")


def test_a_package_json_inside_an_installed_package_is_that_packages_file(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    # A below-floor claude whose vendor/ folder holds a package.json claiming 2.1.5: a file
    # there is claude 1.0.51's, as node runs it by path (the inner claim is no install).
    old = world.old_claude()
    marker = tmp_path / "ran"
    script = _claimed_script(old.package / "vendor", marker, "2.1.5")
    _refused_as(world, "claude", "node", [str(script)], binary=NODE, policy=untracked_policy,
                marker=marker)  # fmt: skip
    assert world.recorded()[-1]["version"] == old.version
