"""A node CLI run through its descriptor and starting itself again by its own name.

The child runs the judged script through ``/proc/self/fd/N``, which is then the script's
name (node's ``process.argv[1]``). gemini starts itself again so, with more memory: the
second node must find the same open file under that name, so the descriptor stays open for
the child's own children, at a number node leaves open for them (it marks the low ones it
inherits close-on-exec as it starts, and the name then led to whatever the second node
opened first, an epoll instance or a socket).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import NEW_CLAUDE, OLD_CLAUDE, World, needs_node

pytestmark = needs_node

# The stand-in's second start leaves the marker; its first only starts it, by the name it
# was given, and exits with its status.
RELAUNCHING_CLI = """#!/usr/bin/env node
const {{ spawnSync }} = require("child_process");
const fs = require("fs");
if (process.env.STARTED_AGAIN) {{
  fs.writeFileSync({marker}, fs.realpathSync(process.argv[1]));
  process.exit(0);
}}
const again = spawnSync(process.execPath, [process.argv[1], ...process.argv.slice(2)], {{
  stdio: "inherit",
  env: {{ ...process.env, STARTED_AGAIN: "1" }},
}});
process.exit(again.status === null ? 1 : again.status);
"""


def _relaunching_claude(world: World, version: str) -> tuple[Path, Path]:
    """A claude install whose entry script starts itself again: (its bin folder, marker)."""
    cli = world.claude(version, name=f"claude-{version}")
    cli.cli.write_text(RELAUNCHING_CLI.format(marker=f'"{cli.marker}"'), encoding="utf-8")
    return cli.bin_dir, cli.marker


def test_a_cli_started_again_by_its_own_name_runs_the_judged_file(tmp_path: Path) -> None:
    world = World(tmp_path)
    bin_dir, marker = _relaunching_claude(world, NEW_CLAUDE)
    outcome = world.spawn("claude", [], policy="default", env=world.env(bin_dir))
    world.assert_permitted_and_ran(outcome, marker)
    # the second start ran the very script judged, found through the same descriptor
    assert marker.read_text(encoding="utf-8") == str((bin_dir / "claude").resolve(strict=True))


@pytest.mark.parametrize("version", [OLD_CLAUDE])
def test_a_below_floor_cli_that_starts_itself_again_is_still_refused(
    tmp_path: Path, version: str
) -> None:
    world = World(tmp_path)
    bin_dir, marker = _relaunching_claude(world, version)
    outcome = world.spawn("claude", [], policy="default", env=world.env(bin_dir))
    world.assert_refused(outcome, marker, "below the floor")
