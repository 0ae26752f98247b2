"""A closed world at the spawn, node: code a node child loads besides the script it was
judged by (preload options, loaders, variables, an env file) is refused and recorded.

Each attack puts an above-floor claude in front and has node load a below-floor one on the
side; the old CLI leaves a marker when it runs. Every test runs under the default policy
and under deny-by-default (``FLOORGUARD_UNTRACKED_POLICY=refuse`` in the host).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.closed_world import NODE, World

pytestmark = pytest.mark.skipif(not Path(NODE).exists(), reason="node is not installed")


def test_node_options_require_of_old_cli_is_refused(world: World, untracked_policy: str) -> None:
    """``NODE_OPTIONS=--require OLD/cli.js`` in the child's environment, a new claude on
    PATH: node preloads the old CLI before the new one's first line."""
    old, new = world.old_claude(), world.new_claude()
    env = world.env(new.bin_dir, NODE_OPTIONS=f"--require {old.cli}")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "NODE_OPTIONS")


def test_node_options_require_of_old_cli_through_node_is_refused(
    world: World, untracked_policy: str
) -> None:
    """The same variable when the host starts ``node NEW/cli.js`` itself."""
    old, new = world.old_claude(), world.new_claude()
    env = world.env(NODE_OPTIONS=f"--require={old.cli}")
    outcome = world.spawn(
        "node", [str(new.cli), "task"], binary=NODE, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker, "NODE_OPTIONS")


def test_import_option_with_a_file_url_of_old_cli_is_refused(
    world: World, untracked_policy: str
) -> None:
    """``node --import=file://OLD/cli.js NEW/cli.js``: a preloaded module named by URL."""
    old, new = world.old_claude(), world.new_claude()
    outcome = world.spawn(
        "node",
        [f"--import={old.cli.as_uri()}", str(new.cli), "task"],
        binary=NODE,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "--import")


def test_import_option_with_a_data_url_importing_old_cli_is_refused(
    world: World, untracked_policy: str
) -> None:
    """``--import 'data:text/javascript,import "file://OLD/cli.js"'``: the old file is named
    only inside inline module source."""
    old, new = world.old_claude(), world.new_claude()
    data_url = f'data:text/javascript,import "{old.cli.as_uri()}"'
    outcome = world.spawn(
        "node",
        ["--import", data_url, str(new.cli), "task"],
        binary=NODE,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "--import", "data:")


def test_require_option_with_old_package_folder_is_refused(
    world: World, untracked_policy: str
) -> None:
    """``node -r OLD_PACKAGE_DIR NEW/cli.js``: a folder required through its ``main``."""
    old, new = world.old_claude(), world.new_claude()
    outcome = world.spawn(
        "node",
        ["-r", str(old.package), str(new.cli), "task"],
        binary=NODE,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "-r", "--require", "1.0.51")


def test_require_option_with_a_package_specifier_resolved_in_cwd_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node -r @anthropic-ai/claude-code/cli.js NEW/cli.js`` in a project whose
    ``node_modules`` holds the old claude: the bare specifier resolves from the cwd."""
    new = world.new_claude()
    project = tmp_path / "project"
    old = world.project_claude(project, "1.0.51")
    outcome = world.spawn(
        "node",
        ["-r", "@anthropic-ai/claude-code/cli.js", str(new.cli), "task"],
        binary=NODE,
        cwd=project,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "-r", "--require", "@anthropic-ai/claude-code")


def test_env_file_setting_node_options_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node --env-file=F NEW/cli.js`` where F sets ``NODE_OPTIONS=--require OLD/cli.js``:
    node reads the variable from the file at start-up."""
    old, new = world.old_claude(), world.new_claude()
    env_file = tmp_path / "agent.env"
    env_file.write_text(f'NODE_OPTIONS="--require {old.cli}"\n', encoding="utf-8")
    outcome = world.spawn(
        "node",
        [f"--env-file={env_file}", str(new.cli), "task"],
        binary=NODE,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "--env-file", "NODE_OPTIONS")


def test_experimental_loader_of_old_cli_is_refused(world: World, untracked_policy: str) -> None:
    """``node --experimental-loader file://OLD/cli.js NEW/cli.js``: a loader hook module is
    evaluated before the entry script."""
    old, new = world.old_claude(), world.new_claude()
    outcome = world.spawn(
        "node",
        ["--experimental-loader", old.cli.as_uri(), str(new.cli), "task"],
        binary=NODE,
        policy=untracked_policy,
        env=world.env(),
    )
    world.assert_refused(outcome, old.marker, "--experimental-loader", "loader")


def test_node_running_old_package_folder_is_judged_as_old_claude(
    world: World, untracked_policy: str
) -> None:
    """``node OLD_PACKAGE_DIR`` runs the package's ``main``: it is the old claude, refused as
    below its floor."""
    old = world.old_claude()
    outcome = world.spawn(
        "node", [str(old.package), "task"], binary=NODE, policy=untracked_policy, env=world.env()
    )
    world.assert_refused(outcome, old.marker, "1.0.51", "floor")
    assert outcome["adapter"] == "claude", outcome
    assert outcome["version"] == "1.0.51", outcome


def test_a_link_on_the_way_to_the_script_naming_bytes_that_are_not_utf8_is_refused(
    world: World, untracked_policy: str
) -> None:
    """node takes its main script's real path by its own walk, each link's target read as
    UTF-8: ``bin/claude -> ../x\\xff/.../cli.js`` (the new claude) is loaded from
    ``x\\xef\\xbf\\xbd`` (U+FFFD: the old one). Every name the gate is given is text."""
    old, new = world.old_claude(), world.new_claude()
    folder = world.root / "mixed"
    (folder / "bin").mkdir(parents=True)
    as_given, as_node_reads = (
        os.fsencode(folder) + name for name in (b"/x\xff", b"/x\xef\xbf\xbd")
    )
    os.rename(os.fsencode(world.root / "new-claude"), as_given)
    os.rename(os.fsencode(world.root / "old-claude"), as_node_reads)
    inside = os.fsencode(os.path.relpath(new.cli, world.root / "new-claude"))
    os.symlink(b"../x\xff/" + inside, os.fsencode(folder / "bin" / "claude"))
    outcome = world.spawn(
        "claude", ["task"], policy=untracked_policy, env=world.env(folder / "bin")
    )
    world.assert_refused(outcome, old.marker, "UTF-8")


def test_a_link_on_the_way_to_the_script_naming_utf8_that_is_not_ascii_is_followed(
    world: World, untracked_policy: str
) -> None:
    new = world.new_claude()
    folder = world.root / "accented"
    (folder / "bin").mkdir(parents=True)
    os.rename(world.root / "new-claude", folder / "caf\u00e9")
    inside = os.path.relpath(new.cli, world.root / "new-claude")
    os.symlink(f"../caf\u00e9/{inside}", folder / "bin" / "claude")
    outcome = world.spawn(
        "claude", ["task"], policy=untracked_policy, env=world.env(folder / "bin")
    )
    world.assert_permitted_and_ran(outcome, new.marker)
