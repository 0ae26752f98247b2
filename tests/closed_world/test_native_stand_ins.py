"""A native program standing in for an agent published only as a package is refused.

aider and gptme are Python packages, gemini and qwen node packages: none of them is
published as a native program. A native file under one of their names, or answering
``--version`` as one of them, is therefore never that agent: it may be another tool whose
own answer is a bare version (ninja's ``1.11.1`` under gemini's name), or a build that
bundles its own interpreter and any version of the agent's code without exporting any of
the interpreter's symbols. Neither its answer nor package metadata beside it is taken for
it. Agents that are published as native programs (claude, codex, goose, amp, opencode) are
still judged by their answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, World
from hosts import Host, floor
from probes.native import Run, native_agent, require_native

from floorguard._maps.catalog import CATALOG

FLOORS = {
    "aider": "0.60.0", "gptme": "0.20.0", "gemini": "0.1.0", "qwen": "0.1.0",
    "claude": "1.0.100", "codex": "0.2.0", "goose": "1.0.0", "amp": "0.0.1",
}  # fmt: skip

# Each answer is one the catalog's patterns accept, at or above the floor above.
PACKAGE_ONLY = {
    "aider": b"aider 0.86.0\n",
    "gptme": b"gptme v0.30.0\n",
    "gemini": b"0.9.0\n",
    "qwen": b"0.9.0\n",
}
PUBLISHED_NATIVE = {
    "claude": (b"1.0.200 (Claude Code)\n", "1.0.200"),
    "codex": (b"codex-cli 0.5.0\n", "0.5.0"),
    "goose": (b"1.9.0\n", "1.9.0"),
    "amp": (b"0.0.1755000000\n", "0.0.1755000000"),
}


@pytest.fixture
def floored(world: World) -> World:
    world.host = Host(world.root / "floored-host", {k: floor(v) for k, v in FLOORS.items()})
    return world


def test_the_catalog_says_which_agents_are_published_as_native_programs() -> None:
    assert {name for name, entry in CATALOG.items() if entry.native} == {
        "amp", "claude", "codex", "goose", "opencode",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(PACKAGE_ONLY))
def test_a_native_program_under_the_name_of_a_package_only_agent_is_refused(
    floored: World, untracked_policy: str, tmp_path: Path, name: str
) -> None:
    require_native()
    marker = tmp_path / "it-ran"
    native_agent(tmp_path / "bin" / name, version=PACKAGE_ONLY[name], run=Run(marker=marker))
    outcome = floored.spawn(name, ["task"], policy=untracked_policy,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_refused(outcome, marker, "native program")
    assert floored.recorded()[-1]["version"] is None, floored.recorded()


def test_a_stock_program_with_a_bare_version_copied_as_gemini_is_refused(
    floored: World, tmp_path: Path
) -> None:
    """ninja answers ``1.11.1`` and runs what its build file says: as gemini it was
    permitted as gemini 1.11.1."""
    require_native()
    marker = tmp_path / "build-ran"
    native_agent(tmp_path / "bin" / "gemini", version=b"1.11.1\n", run=Run(marker=marker))
    outcome = floored.spawn("gemini", ["-f", "build.ninja"], policy=DEFAULT,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_refused(outcome, marker, "native program")


def test_a_native_program_of_another_name_answering_as_aider_is_refused(
    floored: World, tmp_path: Path
) -> None:
    """(Under deny-by-default it is refused sooner, as an untracked name.)"""
    require_native()
    marker = tmp_path / "it-ran"
    native_agent(tmp_path / "bin" / "my-tool", version=b"aider 0.86.0\n", run=Run(marker=marker))
    outcome = floored.spawn("my-tool", ["task"], policy=DEFAULT,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_refused(outcome, marker, "native program")


def test_a_native_program_beside_an_at_floor_aider_s_metadata_is_refused(
    floored: World, untracked_policy: str
) -> None:
    """pip installs aider's command as a Python script: a native file in its place is not
    what pip installed, whatever the metadata beside it says."""
    require_native()
    new = floored.new_aider()
    command = new.prefix / "bin" / "aider"
    command.unlink()
    marker = floored.root / "native-ran"
    native_agent(command, version=b"aider 0.70.0\n", run=Run(marker=marker))
    outcome = floored.spawn("aider", ["task"], binary=command, policy=untracked_policy,
                            env=floored.env(new.prefix / "bin"))  # fmt: skip
    floored.assert_refused(outcome, marker, "native program")


@pytest.mark.parametrize("name", sorted(PUBLISHED_NATIVE))
def test_a_native_build_of_an_agent_published_as_one_is_judged_by_its_answer(
    floored: World, tmp_path: Path, name: str
) -> None:
    require_native()
    answer, version = PUBLISHED_NATIVE[name]
    marker = tmp_path / "it-ran"
    native_agent(tmp_path / "bin" / name, version=answer, run=Run(marker=marker))
    outcome = floored.spawn(name, ["task"], policy=DENY_BY_DEFAULT,
                            env=floored.env(tmp_path / "bin"))  # fmt: skip
    floored.assert_permitted_and_ran(outcome, marker)
    assert floored.recorded()[-1]["version"] == version, floored.recorded()
