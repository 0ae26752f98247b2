"""A closed world at the spawn, the legitimate side: the ordinary ways of starting an
above-floor agent stay permitted and the child runs, under the default policy and under
deny-by-default. Closing the attacks must not close these.
"""

from __future__ import annotations

from pathlib import Path

from helpers.closed_world import NEW_CLAUDE, NODE, World, editable_install
from helpers.closed_world import needs_node as node

DISTUTILS_PRECEDENCE = (
    "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; "
    "enabled = os.environ.get(var, 'local') == 'local'; "
    "enabled and __import__('_distutils_hack').add_shim(); \n"
)


@node
def test_node_cli_started_by_its_shebang_through_the_npm_bin_link_runs(
    world: World, untracked_policy: str
) -> None:
    """``claude`` on PATH is npm's bin link to ``cli.js``, started by its ``#!`` line."""
    new = world.new_claude()
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=world.env(new.bin_dir))
    world.assert_permitted_and_ran(outcome, new.marker)


@node
def test_node_running_the_new_cli_script_runs(world: World, untracked_policy: str) -> None:
    """``node NEW/cli.js``."""
    new = world.new_claude()
    outcome = world.spawn(
        "node", [str(new.cli), "task"], binary=NODE, policy=untracked_policy, env=world.env()
    )
    world.assert_permitted_and_ran(outcome, new.marker)


@node
def test_npm_bin_link_in_a_project_node_modules_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``node_modules/.bin/claude`` of a project that depends on the new claude."""
    project = tmp_path / "project"
    new = world.project_claude(project, NEW_CLAUDE)
    outcome = world.spawn(
        "claude", ["task"], binary=new.bin_dir / "claude", cwd=project,
        policy=untracked_policy, env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


@node
def test_node_options_with_a_memory_limit_only_runs(world: World, untracked_policy: str) -> None:
    """``NODE_OPTIONS=--max-old-space-size=4096`` loads no code: still permitted."""
    new = world.new_claude()
    env = world.env(new.bin_dir, NODE_OPTIONS="--max-old-space-size=4096")
    outcome = world.spawn("claude", ["task"], policy=untracked_policy, env=env)
    world.assert_permitted_and_ran(outcome, new.marker)


def test_python_dash_m_aider_with_the_new_venv_python_runs(
    world: World, untracked_policy: str
) -> None:
    """``python -P -m aider`` with the new aider venv's own python (-P: the working
    directory, the agent's workspace, is not on its path)."""
    new = world.new_aider()
    outcome = world.spawn(
        "python", ["-P", "-m", "aider", "task"], binary=new.python, policy=untracked_policy,
        env=world.env(),
    )  # fmt: skip
    world.assert_permitted_and_ran(outcome, new.marker)


def test_pip_console_script_runs(world: World, untracked_policy: str) -> None:
    """The ``aider`` console script pip generated, found on PATH."""
    new = world.new_aider()
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_permitted_and_ran(outcome, new.marker)


def test_venv_with_a_plain_path_pth_and_distutils_precedence_pth_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """A venv whose site-packages holds a ``.pth`` naming a plain folder (an editable install
    of team-helpers, whose RECORD lists it: the folder holds its module alone) and
    setuptools' ``distutils-precedence.pth`` (an import line calling
    ``_distutils_hack.add_shim``)."""
    new = world.new_aider()
    extra = tmp_path / "extra-libs"
    extra.mkdir()
    (extra / "team_helpers.py").write_text("VALUE = 1\n", encoding="utf-8")
    editable_install(new.site, "team-helpers", extra, pth="team-libs.pth")
    (new.site / "distutils-precedence.pth").write_text(DISTUTILS_PRECEDENCE, encoding="utf-8")
    hack = new.site / "_distutils_hack"
    hack.mkdir()
    shimmed = tmp_path / "shim-added"
    (hack / "__init__.py").write_text(
        f"def add_shim():\n    open({str(shimmed)!r}, 'w').close()\n", encoding="utf-8"
    )
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_permitted_and_ran(outcome, new.marker)
    assert shimmed.exists(), "the child never ran distutils-precedence.pth"


def test_venv_with_an_editable_install_pth_of_an_unrelated_package_runs(
    world: World, untracked_policy: str, tmp_path: Path
) -> None:
    """``__editable__.foo-1.0.pth`` (a path line, as an editable install writes it) for an
    unrelated project beside the new aider."""
    new = world.new_aider()
    checkout = tmp_path / "foo-checkout" / "src"
    (checkout / "foo").mkdir(parents=True)
    (checkout / "foo" / "__init__.py").write_text("", encoding="utf-8")
    editable_install(new.site, "foo", checkout, pth="__editable__.foo-1.0.pth")
    outcome = world.spawn(
        "aider", ["task"], policy=untracked_policy, env=world.env(new.prefix / "bin")
    )
    world.assert_permitted_and_ran(outcome, new.marker)
