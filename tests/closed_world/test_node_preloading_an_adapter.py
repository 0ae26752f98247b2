"""node preloading an adapter's own code before a script of no adapter is that adapter.

``node -r OLD/cli.js x.js`` runs the below-floor claude (its code runs as it is loaded),
whatever ``x.js`` is. The spawn is judged as the adapter whose code a preload option
(``-r``/``--require``, ``--import``, ``--loader``/``--experimental-loader``, on the command
line or in NODE_OPTIONS) names, so it is refused under the default policy too, not only
under deny-by-default; a preload of no adapter's code leaves node untracked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.closed_world import NODE, World

pytestmark = pytest.mark.skipif(not Path(NODE).exists(), reason="node is not installed")


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "x.js"
    script.write_text("1;\n", encoding="utf-8")
    return script


@pytest.mark.parametrize(
    "option",
    ["-r {cli}", "--require={cli}", "--import {cli}", "--import={uri}",
     "--experimental-loader {uri}", "--loader={uri}", "-r {package}"],
)  # fmt: skip
def test_a_preload_of_old_claude_before_an_untracked_script_is_refused(
    world: World, untracked_policy: str, tmp_path: Path, option: str
) -> None:
    old = world.old_claude()
    words = option.format(cli=old.cli, uri=old.cli.as_uri(), package=old.package).split(" ")
    outcome = world.spawn(
        "node", [*words, str(_script(tmp_path)), "-p", "hi"], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "claude")
    assert world.recorded()[-1]["adapter"] == "claude"


def test_node_options_preloading_old_claude_before_an_untracked_script_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    old = world.old_claude()
    env = world.env(NODE_OPTIONS=f'--require "{old.cli}"')
    outcome = world.spawn(
        "node", [str(_script(tmp_path))], binary=NODE, policy=untracked_policy, env=env
    )
    world.assert_refused(outcome, old.marker, "claude")


def test_a_preload_naming_claude_s_package_resolved_from_the_cwd_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    old = world.project_claude(project, "1.0.51")
    outcome = world.spawn(
        "node", ["--require", "@anthropic-ai/claude-code/cli.js", str(_script(tmp_path))],
        binary=NODE, cwd=project, policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "claude")


def test_a_preload_of_an_above_floor_claude_is_still_refused_for_the_preload(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """Judged as claude, the spawn is in the closed world: the preload is code loaded
    besides the program, so even claude above its floor is refused for it."""
    new = world.new_claude()
    outcome = world.spawn(
        "node", ["-r", str(new.cli), str(_script(tmp_path))], binary=NODE,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, new.marker, "-r")
    assert world.recorded()[-1]["adapter"] == "claude"


def test_a_preload_of_no_adapter_s_code_leaves_node_untracked_under_the_default_policy(
    world: World, tmp_path: Path
) -> None:
    helper = tmp_path / "helper.js"
    marker = tmp_path / "helper-ran"
    helper.write_text(f"require('fs').writeFileSync({str(marker)!r}, 'ran');\n", encoding="utf-8")
    outcome = world.spawn(
        "node", ["-r", str(helper), str(_script(tmp_path))], binary=NODE, policy="default",
        env=world.env(),
    )  # fmt: skip
    assert outcome["outcome"] == "started", outcome
    assert marker.exists()
    assert world.recorded()[-1]["verdict"] == "untracked"


def test_a_preload_that_names_no_file_leaves_node_untracked_under_the_default_policy(
    world: World, tmp_path: Path
) -> None:
    """node itself stops on a preload it cannot find: nothing of any adapter runs."""
    outcome = world.spawn(
        "node", ["-r", str(tmp_path / "missing.js"), str(_script(tmp_path))], binary=NODE,
        policy="default", env=world.env(),
    )  # fmt: skip
    assert world.recorded()[-1]["verdict"] == "untracked", outcome
