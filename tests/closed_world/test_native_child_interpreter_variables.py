"""What makes a Python or node that a native agent starts load other code is refused.

A Python or node child is judged with PYTHON* and NODE_* variables (followed, or refused).
A native agent (codex's Rust build) is not a Python or node itself, but the commands it
runs start both: with PYTHONPATH naming the workspace, its ``python3 -c 'import json'``
imports the workspace's json.py; with NODE_OPTIONS=--require, every node it starts loads
the workspace's file first. As with a shell's or perl's start-up variables, such a
variable in a native child's environment refuses it; variables that load nothing do not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import World
from hosts import Host, floor
from probes.native import Run, native_agent, require_native

LOADING = {
    "PYTHONPATH": "ws",
    "PYTHONHOME": "/opt/py",
    "PYTHONSTARTUP": "ws/start.py",
    "PYTHONUSERBASE": "ws/ub",
    "PYTHONWARNINGS": "error::ws.Category",
    "NODE_OPTIONS": "--require ./ws/hook.js",
    "NODE_PATH": "ws",
}


@pytest.fixture
def codex(world: World, tmp_path: Path) -> tuple[World, Path]:
    require_native()
    world.host = Host(world.root / "floored-host", {"codex": floor("0.2.0")})
    marker = tmp_path / "codex-ran"
    native_agent(tmp_path / "bin" / "codex", version=b"codex-cli 0.5.0\n", run=Run(marker=marker))
    return world, marker


@pytest.mark.parametrize("variable", sorted(LOADING))
def test_a_variable_that_makes_a_python_or_node_load_code_refuses_a_native_agent(
    codex: tuple[World, Path], untracked_policy: str, tmp_path: Path, variable: str
) -> None:
    world, marker = codex
    env = world.env(tmp_path / "bin", **{variable: LOADING[variable]})
    outcome = world.spawn("codex", ["exec", "task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, marker, variable)


def test_variables_that_load_nothing_start_the_native_agent(
    codex: tuple[World, Path], untracked_policy: str, tmp_path: Path
) -> None:
    world, marker = codex
    env = world.env(tmp_path / "bin", PYTHONUNBUFFERED="1", NODE_ENV="production",
                    PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    outcome = world.spawn("codex", ["exec", "task"], policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, marker)
