"""env spelled otherwise: what env runs is judged whatever name env is given. A symbolic
link to env is env (its real file is), so env running one is env running env, which is not
followed: refused, naming it, whatever the policy. Spellings of env's own options that
getopt reads otherwise than they look are refused or judged as env reads them.

Real spawns of GNU env, with the stand-ins of the env tests: a below-floor claude that must
never run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from closed_world import test_env_wrapper
from closed_world.test_env_wrapper import ENV, Setup

setup = test_env_wrapper.setup  # the same stand-ins, map and chain as the env tests


def linked_env(setup: Setup) -> Path:
    """A folder holding ``e``, a symbolic link to env."""
    links = setup.root / "links"
    links.mkdir()
    (links / "e").symlink_to(ENV)
    return links


def test_env_running_a_link_to_env_by_name_is_refused(setup: Setup) -> None:
    """Under the default policy a link named ``e`` would otherwise be judged as an untracked
    program, and the inner env would run the old claude."""
    links = linked_env(setup)
    decision = setup.spawn("e", str(setup.old / "claude"), env=setup.run_env(links, setup.fixed))
    assert decision.verdict == "refuse", decision.reason
    assert "env runs env" in decision.reason, decision.reason
    assert not setup.marker(setup.old).exists()


def test_env_running_a_link_to_env_by_path_is_refused(setup: Setup) -> None:
    links = linked_env(setup)
    decision = setup.spawn(
        str(links / "e"), f"PATH={setup.old}:/usr/bin", "claude", env=setup.run_env(setup.fixed)
    )
    assert decision.verdict == "refuse", decision.reason
    assert "env runs env" in decision.reason, decision.reason
    assert not setup.marker(setup.old).exists()


def test_a_link_to_env_spawned_itself_is_read_as_env(setup: Setup) -> None:
    links = linked_env(setup)
    decision = setup.spawn(f"PATH={setup.old}:/usr/bin", "claude", env=setup.run_env(links))
    assert decision.verdict == "refuse" and decision.version == "1.0.10", decision.reason


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["-i-", "claude"], "'-i-'"),  # getopt reads '-' as an option letter
        (["-i=", "claude"], "'-i='"),
        (["-0u", "X", "claude"], "-0"),
        (["-u", "", "claude"], "-u ''"),
        (["--unset=", "claude"], "-u ''"),
    ],
)
def test_clustered_and_empty_spellings_are_refused_naming_them(
    setup: Setup, argv: list[str], named: str
) -> None:
    decision = setup.spawn(*argv, env=setup.run_env(setup.fixed))
    assert decision.verdict == "refuse", decision.reason
    assert named in decision.reason, decision.reason
    assert not setup.marker(setup.fixed).exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["-u", "--", "claude"],  # '--' is -u's argument: claude is still the command
        ["--u=FOO", "claude"],
        ["--uns", "FOO", "claude"],
        ["-", "-", "claude"],  # only the first '-' clears: the second is the command
    ],
)
def test_spellings_getopt_reads_otherwise_are_judged_as_env_reads_them(
    setup: Setup, argv: list[str]
) -> None:
    first = setup.root / "first"
    first.mkdir()
    (first / "-").symlink_to(setup.old / "claude")
    decision = setup.spawn(*argv, env=setup.run_env(first, setup.old))
    assert decision.verdict == "refuse", decision.reason
    assert decision.version == "1.0.10" or "PATH" in decision.reason, decision.reason
    assert not setup.marker(setup.old).exists()
