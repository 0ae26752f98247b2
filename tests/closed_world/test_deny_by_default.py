"""The spawns the README names as allowed (recorded ``untracked``) under the default policy
and closed by deny-by-default: each is shown both ways, so neither claim is an assumption.

Under the default policy these run the old code, recorded as ``untracked``, never as a
permit for a safe version; with ``FLOORGUARD_UNTRACKED_POLICY=refuse`` in the host's
environment each is refused and recorded before anything starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, Outcome, World, needs_node
from probes import sh_script


def assert_untracked_or_refused(world: World, outcome: Outcome, marker: Path) -> None:
    """Default: allowed only as ``untracked`` (no floor was claimed to be met).
    Deny-by-default: refused, recorded, and nothing ran."""
    if outcome.policy == DENY_BY_DEFAULT:
        world.assert_refused(outcome, marker, "not a tracked adapter")
        return
    assert outcome["outcome"] == "started", outcome
    verdicts = [r["verdict"] for r in world.recorded()]
    assert verdicts == ["untracked"], verdicts


def test_shell_launcher_under_an_untracked_name(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``codey``, a shell script that execs the old aider, is a launcher: never probed, never
    judged as aider by what it prints."""
    old = world.old_aider()
    sh_script(tmp_path / "bin" / "codey", f'exec "{old.script}" "$@"')
    outcome = world.spawn(
        "codey", ["task"], policy=untracked_policy, env=world.env(tmp_path / "bin")
    )
    assert_untracked_or_refused(world, outcome, old.marker)
    assert outcome["version"] in (None, ""), outcome


def test_python_dash_c_loading_aider_through_exec(world: World, untracked_policy: str) -> None:
    """``python -c`` whose import of aider is built at run time: it imports nothing
    catalogued that floorguard can see, so it is not aider's, and it is not understood."""
    old = world.old_aider()
    code = "exec('from aider.main import main; main()')"
    outcome = world.spawn(
        "python", ["-c", code, "task"], binary=old.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    assert_untracked_or_refused(world, outcome, old.marker)


@needs_node
def test_node_eval_requiring_the_old_cli(world: World, untracked_policy: str) -> None:
    """``node -e "require(OLD)"``: code on the command line, not recognised as claude's."""
    old = world.old_claude()
    code = f"process.argv[2] = 'task'; require({str(old.cli)!r})"
    outcome = world.spawn("node", ["-e", code], policy=untracked_policy, env=world.env())
    assert_untracked_or_refused(world, outcome, old.marker)


@pytest.mark.parametrize("policy", [DEFAULT, DENY_BY_DEFAULT])
def test_a_launcher_requested_as_a_tracked_adapter_is_refused_under_both(
    world: World, policy: str, tmp_path: Path
) -> None:
    """The same launcher requested as ``aider`` has a floor to meet, so the closed world
    applies under either policy: refused, naming the launcher."""
    old = world.old_aider()
    sh_script(tmp_path / "bin" / "aider", f'exec "{old.script}" "$@"')
    outcome = world.spawn("aider", ["task"], policy=policy, env=world.env(tmp_path / "bin"))
    world.assert_refused(outcome, old.marker, "script run by /bin/sh")
