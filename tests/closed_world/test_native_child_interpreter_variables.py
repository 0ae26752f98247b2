"""What makes a Python or node that an agent's commands start load other code is refused.

A Python child is judged with its PYTHON* variables and a node child with its NODE_* ones
(followed, or refused). But the commands any agent runs start both: with PYTHONPATH naming
the workspace, a native codex's ``python3 -c 'import json'`` imports the workspace's
json.py; with NODE_OPTIONS=--require, every node that aider's commands start loads the
workspace's file first. As with a shell's or perl's start-up variables, such a variable
refuses the agent, unless it is the agent's own interpreter's and judged as such;
variables that load nothing do not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import World, needs_node
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
    "PYTHONPYCACHEPREFIX": "ws/cache",
    "PYTHONEXECUTABLE": "/usr/bin/python3",
    "__PYVENV_LAUNCHER__": "/usr/bin/python3",
    "PY_SAX_PARSER": "ws_parser",
    "_PYTHON_SYSCONFIGDATA_NAME": "ws_sysconfig",
    "NODE_PRESERVE_SYMLINKS": "1",
    "PYTHONINSPECT": "1",
    "PYTHON_PRESITE": "ws_presite",
    "BUN_OPTIONS": "--preload ./ws/hook.ts",
    "BUN_BE_BUN": "1",
    "BUN_INSPECT_PRELOAD": "./ws/hook.ts",
    "BUN_INSPECT_CONNECT_TO": "unix:///tmp/debugger.sock",
    "BUN_INSPECT": "ws://127.0.0.1:6499/x",
    "BUN_JSC_useJIT": "false",
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
                    PYTHONDONTWRITEBYTECODE="1", BUN_INSTALL="/home/u/.bun")  # fmt: skip
    outcome = world.spawn("codex", ["exec", "task"], policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, marker)


@pytest.mark.parametrize("variable", ["NODE_OPTIONS", "NODE_PATH"])
def test_a_node_variable_that_loads_code_refuses_a_python_agent(
    world: World, untracked_policy: str, variable: str
) -> None:
    new = world.new_aider()
    env = world.env(new.prefix / "bin", **{variable: LOADING[variable]})
    outcome = world.spawn("aider", ["task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, variable)


@needs_node
@pytest.mark.parametrize("variable", ["PYTHONPATH", "PYTHONSTARTUP"])
def test_a_python_variable_that_loads_code_refuses_a_node_agent(
    world: World, untracked_policy: str, variable: str
) -> None:
    new = world.new_claude()
    env = world.env(new.bin_dir, **{variable: LOADING[variable]})
    outcome = world.spawn("claude", ["-p", "task"], policy=untracked_policy, env=env)
    world.assert_refused(outcome, new.marker, variable)
