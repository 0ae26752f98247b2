"""Claude Code's command line read as commander reads it (floorguard._identify.claude_options):
in a session, an option the gate does not know is a doubt; a value is never taken for an
option; after a subcommand, or in a wrapper's arguments, only the options known to load
servers, plugins or settings from elsewhere are."""

from __future__ import annotations

import pytest

from floorguard._identify.claude_options import NOT_KNOWN, PLUGIN, WORKTREE, doubtful_options

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
