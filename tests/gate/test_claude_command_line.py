"""Claude Code's command line read as commander reads it (floorguard._identify.claude_options):
in a session, an option the gate does not know is a doubt; a value is never taken for an
option; after a subcommand, or in a wrapper's arguments where no word names claude's program,
only the options known to load servers, plugins or settings from elsewhere are; after the word
that names it, claude's own arguments are a session's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from floorguard._identify.claude_options import (
    NOT_KNOWN,
    PACKAGE,
    PLUGIN,
    WORKTREE,
    doubtful_options,
    wrapped_doubtful_options,
)

CASES = {
    "a plain session": (["-p", "task", "--model", "opus", "--verbose"], []),
    "a hidden option": (["--channels", "srv", "-p", "t"], [(1, "--channels", NOT_KNOWN)]),
    "a required value that looks like an option": (["--system-prompt", "--channels"], []),
    "a variadic's values, then an option": (
        ["--mcp-config", "a.json", "b.json", "--channels", "x"], [(4, "--channels", NOT_KNOWN)]
    ),
    "an optional value left out": (["-r", "--bg"], [(2, "--bg", NOT_KNOWN)]),
    "an optional value given": (["-r", "session", "-p"], []),
    "a short group, its value attached": (["-pdapi"], []),
    "a short group holding -w": (["-pw"], [(1, "-w", WORKTREE)]),
    "-w with a name attached": (["-wfeature"], [(1, "-w", WORKTREE)]),
    "an unknown letter": (["-px"], [(1, "-x", NOT_KNOWN)]),
    "an option after the prompt": (
        ["-p", "task", "--plugin-url", "u"], [(3, "--plugin-url", PLUGIN)]
    ),
    "everything after --": (["-p", "--", "--channels", "-w"], []),
    "a subcommand's own options": (["mcp", "serve", "--whatever", "-x"], []),
    "a subcommand given a plugin": (
        ["mcp", "serve", "--plugin-dir", "p"], [(3, "--plugin-dir", PLUGIN)]
    ),
    "a prompt that is a subcommand's name, later": (
        ["hello", "mcp", "--channels"], [(3, "--channels", NOT_KNOWN)]
    ),
    "an option's value that is a subcommand's name": (
        ["--model", "mcp", "--channels"], [(3, "--channels", NOT_KNOWN)]
    ),
    "--opt=value forms": (["--model=opus", "--channels=x"], [(2, "--channels", NOT_KNOWN)]),
    "claude's one short option of three letters": (
        ["-d2e", "-p", "--channels"], [(3, "--channels", NOT_KNOWN)]
    ),
}  # fmt: skip


@pytest.mark.parametrize("argv, expected", CASES.values(), ids=CASES.keys())
def test_a_session_s_options_are_read_as_commander_reads_them(
    argv: list[str], expected: list[tuple[int, str, str]]
) -> None:
    assert doubtful_options(argv) == expected


WRAPPED = {
    "npx's own option": (["-y", "--", "@anthropic-ai/claude-code", "-p", "t"], []),
    "node's own option": (["--no-warnings", "cli.js", "--channels", "x"], []),
    "a plugin anywhere": (
        ["-y", "@anthropic-ai/claude-code", "--plugin-dir", "p"], [(3, "--plugin-dir", PLUGIN)]
    ),
    "a worktree anywhere": (["--yes", "@anthropic-ai/claude-code", "-w"], [(3, "-w", WORKTREE)]),
}  # fmt: skip


@pytest.mark.parametrize("argv, expected", WRAPPED.values(), ids=WRAPPED.keys())
def test_a_wrapper_s_arguments_are_read_for_what_loads_from_elsewhere_only(
    argv: list[str], expected: list[tuple[int, str, str]]
) -> None:
    assert doubtful_options(argv, session=False) == expected


def _package(root: Path) -> Path:
    """claude's npm package under ``root`` (its entry, ``cli.js``)."""
    folder = root / "node_modules" / "@anthropic-ai" / "claude-code"
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": PACKAGE, "version": "2.1.0"}))
    (folder / "cli.js").write_text("#!/usr/bin/env node\n")
    return folder / "cli.js"


def test_claude_s_own_arguments_are_found_after_the_word_naming_its_program(
    tmp_path: Path,
) -> None:
    cli = _package(tmp_path)
    (tmp_path / "elsewhere.js").symlink_to(cli)
    for argv, at in (
        (["-y", "--", f"{PACKAGE}@2.1.0", "--channels", "x"], 4),
        (["exec", "--yes", "--", PACKAGE, "-p", "t", "--channels", "x"], 7),
        (["--no-warnings", str(cli), "--channels", "x"], 3),
        (["-u", "X", "--", "node", "--", "elsewhere.js", "--channels", "x"], 7),
        (["-u", "X", "/usr/local/bin/claude", "--channels", "x"], 4),
    ):
        assert wrapped_doubtful_options(argv, str(tmp_path)) == [(at, "--channels", NOT_KNOWN)]


def test_a_wrapper_s_own_options_are_not_taken_for_claude_s(tmp_path: Path) -> None:
    cli = _package(tmp_path)
    for argv in (
        ["-y", "--", PACKAGE, "-p", "t", "--model", "opus"],
        ["exec", "--yes", "--", PACKAGE, "--output-format", "json"],
        ["--no-warnings", "--", str(cli), "-p", "t"],
        ["-y", "some-other-package", "--channels", "x"],  # (not claude: its own options)
    ):
        assert wrapped_doubtful_options(argv, str(tmp_path)) == [], argv


def test_before_claude_s_program_what_loads_from_elsewhere_still_refuses(tmp_path: Path) -> None:
    assert wrapped_doubtful_options(["--plugin-dir", "p", PACKAGE], str(tmp_path)) == [
        (1, "--plugin-dir", PLUGIN)
    ]
