"""A closed world at the spawn, launchers: a shim whose ``--version`` answer is not what
the child runs. The probe runs in another context than the child (another argument list, a
scrubbed environment, another working directory); a launcher that chooses by any of these
must be refused and recorded as a launcher, under the default policy (requested as the
tracked ``claude``) and under deny-by-default.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.closed_world import World
from probes import sh_script

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

LAUNCHER = ("launcher", "shim", "script", "shell")


def test_shim_printing_a_safe_version_but_exec_ing_old_cli_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``claude`` is a ``#!/bin/sh`` shim: for ``--version`` it prints ``9.9.9 (Claude
    Code)``, for anything else it execs the old CLI."""
    old = world.old_claude()
    shims = tmp_path / "shims"
    sh_script(
        shims / "claude",
        'if [ "$1" = "--version" ]; then echo "9.9.9 (Claude Code)"; exit 0; fi\n'
        f'exec "{old.cli}" "$@"',
    )
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=world.env(shims))
    world.assert_refused(outcome, old.marker, *LAUNCHER)
    assert outcome["version"] != "9.9.9", outcome


def test_shim_choosing_old_cli_by_an_environment_variable_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A ``claude`` shim that runs the old CLI when ``CLAUDE_VERSION=old``: the probe's
    scrubbed environment lacks the variable and sees the new one."""
    old, new = world.old_claude(), world.new_claude()
    shims = tmp_path / "shims"
    sh_script(
        shims / "claude",
        f'if [ "$CLAUDE_VERSION" = old ]; then exec "{old.cli}" "$@"; fi\nexec "{new.cli}" "$@"',
    )
    env = world.env(shims, CLAUDE_VERSION="old")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, *LAUNCHER, "CLAUDE_VERSION")


def test_shim_choosing_old_cli_by_tool_versions_in_the_cwd_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A ``claude`` shim that reads ``.tool-versions`` in its working directory, as version
    managers do: the spawn's cwd pins the old CLI, the probe's does not."""
    old, new = world.old_claude(), world.new_claude()
    shims = tmp_path / "shims"
    sh_script(
        shims / "claude",
        'pin=""\n'
        "if [ -f .tool-versions ]; then read -r pin < .tool-versions; fi\n"
        f'if [ "$pin" = "claude {old.version}" ]; then exec "{old.cli}" "$@"; fi\n'
        f'exec "{new.cli}" "$@"',
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / ".tool-versions").write_text(f"claude {old.version}\n", encoding="utf-8")
    outcome = world.spawn(
        "claude", ["task"], cwd=project, policy=untracked_policy, env=world.env(shims)
    )
    world.assert_refused(outcome, old.marker, *LAUNCHER, ".tool-versions")


def test_a_program_neither_native_nor_a_script_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A file the kernel might still run through binfmt_misc (here a jar's magic bytes):
    requested as ``claude``, refused as a format floorguard does not understand."""
    from probes import write_executable

    marker = tmp_path / "never"
    write_executable(tmp_path / "bin" / "claude", "PK\x03\x04 not a program\n")
    outcome = world.spawn(
        "claude", ["task"], policy=untracked_policy, env=world.env(tmp_path / "bin")
    )
    world.assert_refused(outcome, marker, "neither a native program nor a #! script")
