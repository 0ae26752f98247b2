"""node preloading an adapter's own code before a script of no adapter is that adapter.

``node -r OLD/cli.js x.js`` runs the below-floor claude (its code runs as it is loaded),
whatever ``x.js`` is. The spawn is judged as the adapter whose code a preload option
(``-r``/``--require``, ``--import``, ``--loader``/``--experimental-loader``, on the command
line or in NODE_OPTIONS) names, so it is refused under the default policy too, not only
under deny-by-default; a preload of no adapter's code leaves node untracked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.closed_world import NODE, Outcome, World

pytestmark = pytest.mark.skipif(not Path(NODE).exists(), reason="node is not installed")


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "x.js"
    script.write_text("1;\n", encoding="utf-8")
    return script


def _node(
    world: World,
    tmp_path: Path,
    *words: str,
    policy: str = "default",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Outcome:
    """``node WORDS x.js``, x.js a script of no agent's."""
    return world.spawn(
        "node", [*words, str(_script(tmp_path))], binary=NODE, cwd=cwd, policy=policy,
        env=env or world.env(),
    )  # fmt: skip


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
    outcome = _node(world, tmp_path, *words, policy=untracked_policy)
    world.assert_refused(outcome, old.marker, "claude")
    assert world.recorded()[-1]["adapter"] == "claude"


def test_node_options_preloading_old_claude_before_an_untracked_script_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    old = world.old_claude()
    env = world.env(NODE_OPTIONS=f'--require "{old.cli}"')
    outcome = _node(world, tmp_path, policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "claude")


def test_a_preload_naming_claude_s_package_resolved_from_the_cwd_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    old = world.project_claude(project, "1.0.51")
    outcome = _node(
        world, tmp_path, "--require", "@anthropic-ai/claude-code/cli.js", cwd=project,
        policy=untracked_policy,
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "claude")


def test_a_preload_of_an_above_floor_claude_is_still_refused_for_the_preload(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """Judged as claude, the spawn is in the closed world: the preload is code loaded
    besides the program, so even claude above its floor is refused for it."""
    new = world.new_claude()
    outcome = _node(world, tmp_path, "-r", str(new.cli), policy=untracked_policy)
    world.assert_refused(outcome, new.marker, "-r")
    assert world.recorded()[-1]["adapter"] == "claude"


def test_a_preload_of_no_adapter_s_code_leaves_node_untracked_under_the_default_policy(
    world: World, tmp_path: Path
) -> None:
    helper = tmp_path / "helper.js"
    marker = tmp_path / "helper-ran"
    helper.write_text(f"require('fs').writeFileSync({str(marker)!r}, 'ran');\n", encoding="utf-8")
    outcome = _node(world, tmp_path, "-r", str(helper))
    assert outcome["outcome"] == "started", outcome
    assert marker.exists()
    assert world.recorded()[-1]["verdict"] == "untracked"


def test_a_preload_that_names_no_file_leaves_node_untracked_under_the_default_policy(
    world: World, tmp_path: Path
) -> None:
    """node itself stops on a preload it cannot find: nothing of any adapter runs."""
    outcome = _node(world, tmp_path, "-r", str(tmp_path / "missing.js"))
    assert world.recorded()[-1]["verdict"] == "untracked", outcome


# ------------------------------------------------------------------ preloads set elsewhere


@pytest.mark.parametrize(
    "line",
    ['NODE_OPTIONS="--require {cli}"', "export NODE_OPTIONS='--import {cli}'",
     "NODE_OPTIONS=--require={cli} # preloaded"],
    ids=["double-quoted", "exported-single-quoted", "unquoted-with-comment"],
)  # fmt: skip
def test_an_env_file_whose_node_options_preload_old_claude_is_refused(
    world: World, untracked_policy: str, tmp_path: Path, line: str
) -> None:
    old = world.old_claude()
    env_file = tmp_path / "node.env"
    env_file.write_text(f"A=1\n{line.format(cli=old.cli)}\n", encoding="utf-8")
    outcome = _node(world, tmp_path, f"--env-file={env_file}", policy=untracked_policy)
    world.assert_refused(outcome, old.marker, "claude")


def test_an_env_file_whose_node_options_preload_nothing_leaves_node_untracked(
    world: World, tmp_path: Path
) -> None:
    env_file = tmp_path / "node.env"
    env_file.write_text("NODE_OPTIONS=--max-old-space-size=256\nA=1\n", encoding="utf-8")
    outcome = _node(world, tmp_path, f"--env-file={env_file}")
    assert outcome["outcome"] == "started", outcome
    assert world.recorded()[-1]["verdict"] == "untracked"


def test_an_env_file_whose_node_options_value_goes_on_past_its_line_is_refused(
    world: World, tmp_path: Path
) -> None:
    """node's env-file reader takes a double-quoted value over lines; what it would read
    there is not read here: refused, naming the file."""
    env_file = tmp_path / "node.env"
    env_file.write_text('NODE_OPTIONS="--no-warnings\n--require x.js"\n', encoding="utf-8")
    outcome = _node(world, tmp_path, f"--env-file={env_file}")
    assert outcome["verdict"] == "refuse" and str(env_file) in outcome.reason, outcome


def _tool(tmp_path: Path, line: str) -> Path:
    """An untracked node program, the kind an agent's MCP server is: a ``#!`` script."""
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(f"{line}\nconsole.log('tool');\n", encoding="utf-8")
    tool.chmod(0o755)
    return tool


def test_a_node_script_run_with_node_options_preloading_old_claude_is_refused(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    old = world.old_claude()
    tool = _tool(tmp_path, "#!/usr/bin/env node")
    env = world.env(tool.parent, NODE_OPTIONS=f"--require {old.cli}")
    outcome = world.spawn("tool", [], policy=untracked_policy, env=env)
    world.assert_refused(outcome, old.marker, "claude")


@pytest.mark.parametrize(
    "line", ["#!/usr/bin/env -S node -r {cli}", f"#!{NODE} --require={{cli}}"],
    ids=["env-S", "node-option"],
)  # fmt: skip
def test_a_node_script_whose_own_line_preloads_old_claude_is_refused(
    world: World, untracked_policy: str, tmp_path: Path, line: str
) -> None:
    old = world.old_claude()
    tool = _tool(tmp_path, line.format(cli=old.cli))
    outcome = world.spawn("tool", [], policy=untracked_policy, env=world.env(tool.parent))
    world.assert_refused(outcome, old.marker, "claude")


# --------------------------------------------------------- names node resolves to its files


def _alias(project: Path, name: str, target: Path) -> None:
    (project / "node_modules").mkdir(parents=True, exist_ok=True)
    (project / "node_modules" / name).symlink_to(target)


def _package(folder: Path, manifest: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def _preload_from(world: World, project: Path, tmp_path: Path, *words: str) -> Outcome:
    return _node(world, tmp_path, *words, cwd=project)


def test_a_package_name_linked_to_old_claude_s_folder_is_claude(
    world: World, tmp_path: Path
) -> None:
    old, project = world.old_claude(), tmp_path / "project"
    _alias(project, "bar", old.package)
    for words in (["-r", "bar/cli.js"], ["-r", "bar"], ["--import", "bar/cli.js"]):
        world.assert_refused(_preload_from(world, project, tmp_path, *words), old.marker, "claude")


def test_an_npm_alias_folder_holding_old_claude_is_claude(world: World, tmp_path: Path) -> None:
    old, project = world.old_claude(), tmp_path / "project"
    (project / "node_modules").mkdir(parents=True)
    shutil.copytree(old.package, project / "node_modules" / "foo")
    marker = world.root / "old-claude-ran"
    outcome = _preload_from(world, project, tmp_path, "-r", "foo/cli.js")
    world.assert_refused(outcome, marker, "claude")


def test_a_package_whose_main_leads_into_old_claude_s_folder_is_claude(
    world: World, tmp_path: Path
) -> None:
    old, project = world.old_claude(), tmp_path / "project"
    wrapper = _package(project / "node_modules" / "foo", {"name": "foo", "main": "real/cli.js"})
    (wrapper / "real").symlink_to(old.package)
    world.assert_refused(_preload_from(world, project, tmp_path, "-r", "foo"), old.marker, "claude")


def test_an_exported_subpath_linked_to_old_claude_s_file_is_claude(
    world: World, tmp_path: Path
) -> None:
    old, project = world.old_claude(), tmp_path / "project"
    exports = {".": "./index.js", "./go": {"import": "./go.mjs", "require": "./go.cjs"}}
    wrapper = _package(project / "node_modules" / "foo", {"name": "foo", "exports": exports})
    (wrapper / "go.cjs").symlink_to(old.cli)
    outcome = _preload_from(world, project, tmp_path, "-r", "foo/go")
    world.assert_refused(outcome, old.marker, "claude")


def test_a_package_imports_alias_naming_old_claude_is_claude(world: World, tmp_path: Path) -> None:
    old, project = world.old_claude(), tmp_path / "project"
    _alias(project, "bar", old.package)
    _package(project, {"name": "p", "imports": {"#c": "bar/cli.js"}})
    outcome = _preload_from(world, project, tmp_path, "--import", "#c")
    world.assert_refused(outcome, old.marker, "claude")


@pytest.mark.parametrize("where", ["NODE_PATH", "HOME/.node_modules"])
def test_a_package_name_found_on_node_s_other_paths_is_claude(
    world: World, tmp_path: Path, where: str
) -> None:
    old, project = world.old_claude(), tmp_path / "project"
    project.mkdir()
    folder = tmp_path / "elsewhere" if where == "NODE_PATH" else world.home / ".node_modules"
    folder.mkdir(parents=True)
    (folder / "bar").symlink_to(old.package)
    env = world.env(**({"NODE_PATH": str(folder)} if where == "NODE_PATH" else {}))
    outcome = _node(world, tmp_path, "-r", "bar/cli.js", cwd=project, env=env)
    world.assert_refused(outcome, old.marker, "claude")


def test_a_preload_of_an_ordinary_package_through_its_exports_leaves_node_untracked(
    world: World, tmp_path: Path
) -> None:
    """``node -r dotenv/config server.js``, the common form: a package of no agent's."""
    project = tmp_path / "project"
    exports = {".": "./main.js", "./config": "./config.js", "./package.json": "./package.json"}
    folder = _package(project / "node_modules" / "dotenv", {"name": "dotenv", "exports": exports})
    (folder / "config.js").write_text("1;\n", encoding="utf-8")
    outcome = _preload_from(world, project, tmp_path, "-r", "dotenv/config")
    assert outcome["outcome"] == "started", outcome
    assert world.recorded()[-1]["verdict"] == "untracked"


def test_a_preload_runs_even_when_the_main_script_is_missing(world: World, tmp_path: Path) -> None:
    """node loads its preloads before it finds the main script missing, and fails only then."""
    old = world.old_claude()
    outcome = world.spawn(
        "node", ["-r", str(old.cli), str(tmp_path / "missing.js")], binary=NODE,
        policy="default", env=world.env(),
    )  # fmt: skip
    world.assert_refused(outcome, old.marker, "claude")
