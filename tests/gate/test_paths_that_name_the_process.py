"""A path through ``/proc/self`` (``/proc/thread-self``, ``/proc/PID``, ``/dev/fd``,
``/dev/stdin``, or a link to any of them) names one file when the gate reads it, in the
host, and another when the child does: its own working directory, its own descriptors.
In the child's arguments, its environment, its program name or a ``#!`` line, such a path
is refused before anything is judged, and nothing runs. The host's working directory here
holds nothing; the child's holds a below-floor aider or claude wherever the path leads.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, SYSTEM_PATH, NodeCli, World, old_aider_code
from probes import write_executable

pytestmark = pytest.mark.attack

NODE = shutil.which("node")


def _workspace(world: World) -> Path:
    workspace = world.root / "ws"
    workspace.mkdir(exist_ok=True)
    return workspace


@pytest.mark.parametrize(
    "through", ["/proc/self/cwd", "/proc/thread-self/cwd", "/dev/fd/../cwd", "link"]
)
def test_pythonpath_through_the_child_s_own_folder_is_refused(world: World, through: str) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = _workspace(world)
    (workspace / "pp").mkdir()
    shutil.copytree(old.site / "aider", workspace / "pp" / "aider")
    if through == "link":
        (world.root / "to-self").symlink_to("/proc/self/cwd")
        through = str(world.root / "to-self")
    env = world.env(new.prefix / "bin", PYTHONPATH=f"{through}/pp")
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=env, cwd=workspace)
    world.assert_refused(outcome, old.marker, "PYTHONPATH")


@pytest.mark.parametrize(
    "script", ["/proc/self/cwd/run.py", "/dev/stdin", "/dev/fd/0", "/dev/stdout", "/dev/stderr"]
)
def test_a_script_named_through_the_process_is_refused(world: World, script: str) -> None:
    old, new = world.old_aider(), world.new_aider()
    workspace = _workspace(world)
    (workspace / "run.py").write_text(old_aider_code(old.site), encoding="utf-8")
    outcome = world.spawn(
        "python", ["-P", script, "task"], policy=DEFAULT, binary=new.python,
        env=world.env(), cwd=workspace,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "argument")


def test_a_home_through_the_process_is_refused(world: World) -> None:
    old, new = world.old_aider(system_site=True), world.new_aider(system_site=True)
    workspace = _workspace(world)
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    user_site = workspace / "h" / ".local" / "lib" / version / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "usercustomize.py").write_text(old_aider_code(old.site), encoding="utf-8")
    env = world.env(new.prefix / "bin", HOME="/proc/self/cwd/h")
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=env, cwd=workspace)
    world.assert_refused(outcome, old.marker, "HOME")


def _claudes_and_a_node_running_the_old(world: World, node: Path) -> tuple[NodeCli, NodeCli]:
    """The old and the new claude, and at ``node`` a program that runs the old one."""
    old, new = world.old_claude(), world.new_claude()
    write_executable(node, f'#!/bin/sh\nexec {NODE} {old.cli} "$@"\n')
    return old, new


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_path_entry_through_the_process_is_refused(world: World) -> None:
    workspace = _workspace(world)
    old, new = _claudes_and_a_node_running_the_old(world, workspace / "bin" / "node")
    env = world.env(new.bin_dir)
    env["PATH"] = f"/proc/self/cwd/bin:{new.bin_dir}:{SYSTEM_PATH}"
    outcome = world.spawn("claude", ["task"], policy=DEFAULT, env=env, cwd=workspace)
    world.assert_refused(outcome, old.marker, "PATH")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_shebang_through_the_process_is_refused(world: World) -> None:
    workspace = _workspace(world)
    old, new = _claudes_and_a_node_running_the_old(world, workspace / "node")
    text = new.cli.read_text(encoding="utf-8").split("\n", 1)[1]
    new.cli.write_text("#!/proc/self/cwd/node\n" + text, encoding="utf-8")
    outcome = world.spawn("claude", ["task"], policy=DEFAULT, env=world.env(new.bin_dir),
                          cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker, "#!")


def test_paths_that_name_no_process_still_run(world: World) -> None:
    # The control: log targets and a task naming files are not paths into the process.
    new = world.new_aider()
    workspace = _workspace(world)
    env = world.env(new.prefix / "bin", LOG_FILE="/dev/stderr", OUTPUT="/dev/stdout")
    outcome = world.spawn("aider", ["fix src/app.py and /etc/hosts"], policy=DEFAULT, env=env,
                          cwd=workspace)  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_a_pth_line_through_the_process_is_refused(world: World) -> None:
    # site adds a .pth path line by its letters, and imports sitecustomize from it.
    old, new = world.old_aider(), world.new_aider()
    workspace = _workspace(world)
    (workspace / "lib").mkdir()
    (workspace / "lib" / "sitecustomize.py").write_text(old_aider_code(old.site), encoding="utf-8")
    (new.site / "extra.pth").write_text("/proc/self/cwd/lib\n", encoding="utf-8")
    outcome = world.spawn("aider", ["task"], policy=DEFAULT, env=world.env(new.prefix / "bin"),
                          cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker, "extra.pth")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_package_main_through_the_process_is_refused(world: World) -> None:
    old, new = world.old_claude(), world.new_claude()
    workspace = _workspace(world)
    shutil.copytree(old.package, workspace / "cc")
    manifest = new.package / "package.json"
    fields = json.loads(manifest.read_text(encoding="utf-8"))
    fields["main"] = "/proc/self/cwd/cc/cli.js"
    manifest.write_text(json.dumps(fields), encoding="utf-8")
    assert NODE is not None
    outcome = world.spawn("node", [str(new.package), "task"], policy=DEFAULT, binary=NODE,
                          env=world.env(new.bin_dir), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, old.marker, "main")


@pytest.mark.parametrize("flags", [None, ["-S", "-P", "-m"]], ids=["console-script", "dash-S"])
def test_a_pyvenv_cfg_home_through_the_process_is_refused(
    world: World, flags: list[str] | None
) -> None:
    # CPython's getpath reads home in the child (with -S too: it finds the standard library
    # there): its base installation would be the workspace's.
    new = world.new_aider()
    workspace = _workspace(world)
    (new.prefix / "pyvenv.cfg").write_text(
        "home = /proc/self/cwd/pyhome/bin\ninclude-system-site-packages = true\n",
        encoding="utf-8",
    )
    if flags is None:
        outcome = world.spawn("aider", ["task"], policy=DEFAULT,
                              env=world.env(new.prefix / "bin"), cwd=workspace)  # fmt: skip
    else:
        outcome = world.spawn("python", [*flags, "aider", "task"], policy=DEFAULT,
                              binary=new.python, env=world.env(), cwd=workspace)  # fmt: skip
    world.assert_refused(outcome, new.marker, "pyvenv.cfg home")
