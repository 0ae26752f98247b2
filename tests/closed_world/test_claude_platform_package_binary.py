"""claude's native build as npm lays it down: ``@anthropic-ai/claude-code-<os>-<arch>``, a
platform package holding the ``claude`` binary (a Bun executable, whose dynamic symbols name
node's entry points). A file of that package is claude's, judged by its ``--version``
answer like any native claude, an answer that must be the package's own version; the
same binary outside it is a program carrying node's entry point under another name, and
refused.

The stand-in is compiled here (it exports ``node::Start``, as the real build's table names
it) and answers ``--version`` as claude does; skipped without a C compiler.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.closed_world import DEFAULT, DENY_BY_DEFAULT, World

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")

PLATFORM = "@anthropic-ai/claude-code-linux-x64"


def _bun_like_claude(path: Path, version: str, marker: Path) -> Path:
    """A native program exporting node's entry point that answers ``--version`` as claude
    ``version`` and otherwise leaves ``marker``."""
    source = path.with_name("claude_stand_in.c")
    source.write_text(
        "#include <stdio.h>\n#include <string.h>\n"
        "void _ZN4node5StartEiPPc(void) {}\n"
        "int main(int argc, char **argv) {\n"
        f'  if (argc > 1 && strcmp(argv[1], "--version") == 0) {{ puts("{version} (Claude Code)");'
        " return 0; }\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) fclose(f); return 0;\n}}\n',
        encoding="utf-8",
    )
    subprocess.run(["gcc", "-rdynamic", "-o", str(path), str(source)], check=True, timeout=120)
    source.unlink()
    return path


def _platform_package(world: World, version: str | None, answers: str | None = None) -> Path:
    """The platform package at ``version`` (None: its manifest states none), holding a
    build that answers as claude ``answers`` (by default the same version)."""
    package = world.root / "app" / "node_modules" / PLATFORM
    package.mkdir(parents=True)
    manifest = {"name": PLATFORM, "version": version, "os": ["linux"], "cpu": ["x64"]}
    if version is None:
        del manifest["version"]
    (package / "package.json").write_text(json.dumps(manifest), encoding="utf-8")
    answer = answers or version or "0.0.0"
    return _bun_like_claude(package / "claude", answer, world.root / "claude-ran")


@pytest.mark.parametrize("policy", [DEFAULT, DENY_BY_DEFAULT])
def test_the_platform_packages_claude_at_its_floor_runs(world: World, policy: str) -> None:
    binary = _platform_package(world, "2.1.332")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=policy, env=world.env())
    world.assert_permitted_and_ran(outcome, world.root / "claude-ran")
    assert world.recorded()[-1]["version"] == "2.1.332"


def test_the_platform_packages_claude_below_its_floor_is_refused(world: World) -> None:
    binary = _platform_package(world, "1.0.50")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_refused(outcome, world.root / "claude-ran", "1.0.50")


def test_the_same_binary_in_no_package_is_node_under_another_name(world: World) -> None:
    folder = world.root / "loose"
    folder.mkdir()
    binary = _bun_like_claude(folder / "claude", "2.1.332", world.root / "claude-ran")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_refused(outcome, world.root / "claude-ran", "under another name")


@pytest.mark.parametrize("answers", ["2.1.332", "1.0.51"])
def test_a_build_in_a_below_floor_package_answering_another_release_is_refused(
    world: World, answers: str
) -> None:
    # The package is 1.0.50, below the floor; the build in it says it is another release.
    binary = _platform_package(world, "1.0.50", answers=answers)
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_refused(outcome, world.root / "claude-ran", "a build of another version")
    assert "1.0.50" in outcome.reason


@pytest.mark.parametrize("stated", [None, "latest"])
def test_a_build_in_a_package_that_states_no_version_is_refused(
    world: World, stated: str | None
) -> None:
    binary = _platform_package(world, stated, answers="2.1.332")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_refused(outcome, world.root / "claude-ran", "to hold its answer")


def test_a_build_answering_the_release_of_its_pre_release_package_is_refused(
    world: World,
) -> None:
    # 2.1.332-beta.1 comes before 2.1.332: the package's build does not get to say otherwise.
    binary = _platform_package(world, "2.1.332-beta.1", answers="2.1.332")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_refused(outcome, world.root / "claude-ran", "a build of another version")


@pytest.mark.parametrize("label", ["linux-x64", "linux-x64-musl", "darwin-arm64", "haiku"])
def test_a_platform_label_where_semver_has_its_pre_release_is_the_build_s_own(
    world: World, label: str
) -> None:
    # (codex's platform packages state 0.171.0-linux-x64 for the build answering 0.171.0)
    binary = _platform_package(world, f"2.1.332-{label}", answers="2.1.332")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_permitted_and_ran(outcome, world.root / "claude-ran")
    assert world.recorded()[-1]["version"] == "2.1.332"


@pytest.mark.parametrize("label", ["gnu", "linux-gnu", "msvc", "linux-x64-beta", "Linux-x64"])
def test_a_label_of_other_words_is_a_pre_release_the_build_cannot_answer_past(
    world: World, label: str
) -> None:
    # Only node's platform and cpu names and npm's libc names make a platform label.
    binary = _platform_package(world, f"2.1.332-{label}", answers="2.1.332")
    outcome = world.spawn("claude", ["-p", "t"], binary=binary, policy=DEFAULT, env=world.env())
    world.assert_refused(outcome, world.root / "claude-ran", "a build of another version")
