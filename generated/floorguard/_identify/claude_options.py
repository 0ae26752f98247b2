"""Claude Code's command line, read as commander reads it: which of its arguments are options
the gate knows to leave claude's configuration where it is read.

Claude Code has options its help does not show (``--project-config-root``,
``--managed-settings``, ``--await-initialize``, ``--channels``, ...), and new releases add
more; several load servers, plugins or settings from where nothing is read. So a claude
session's options are read against the list below (its releases' documented options and the
Agent SDK's): any other one is a doubt. After a subcommand (``claude mcp serve ...``) only
the options known to load from elsewhere are: the subcommand's own options are its own. Run
through a wrapper (npx, npm exec, node, env), claude's own arguments are those after the
word that names its program (its npm package, a file of that package, or ``claude``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Final

# What each option takes: "" nothing; "value" the next argument, whatever it looks like
# (commander gives a required value so); "optional" the next argument unless it is an
# option; "values" the next argument whatever it is, then every one up to the next option.
SESSION_OPTIONS: Final = {
    **dict.fromkeys(
        (
            "--allow-dangerously-skip-permissions", "--ax-screen-reader", "--bare", "--brief",
            "--chrome", "--no-chrome", "--continue", "--dangerously-skip-permissions",
            "--debug-to-stderr", "-d2e", "--disable-slash-commands",
            "--exclude-dynamic-system-prompt-sections",
            "--fork-session", "--forward-subagent-text", "--help", "--ide",
            "--include-hook-events", "--include-partial-messages", "--mcp-debug",
            "--no-session-persistence", "--print", "--replay-user-messages", "--restricted",
            "--safe-mode", "--session-mirror", "--strict-mcp-config", "--verbose", "--version",
        ),
        "",
    ),
    **dict.fromkeys(
        (
            "--agent", "--agents", "--append-system-prompt", "--append-system-prompt-file",
            "--autocompact", "--debug-file", "--effort", "--fallback-model", "--input-format",
            "--json-schema", "--managed-settings", "--max-budget-usd", "--max-thinking-tokens",
            "--max-turns", "--model", "--name", "--output-format", "--permission-mode",
            "--permission-prompt-tool", "--permission-prompts",
            "--remote-control-session-name-prefix", "--session-id", "--setting-sources",
            "--settings", "--system-prompt", "--system-prompt-file", "--system-prompt-snapshot",
            "--task-budget", "--thinking", "--thinking-display",
        ),
        "value",
    ),
    **dict.fromkeys(
        (
            "--add-dir", "--allowedTools", "--allowed-tools", "--betas", "--disallowedTools",
            "--disallowed-tools", "--mcp-config", "--tools",
        ),
        "values",
    ),
    **dict.fromkeys(
        ("--debug", "--from-pr", "--prompt-suggestions", "--remote-control", "--resume"),
        "optional",
    ),
}  # fmt: skip
SHORT_OPTIONS: Final = {"c": "", "d": "optional", "h": "", "n": "value", "p": "", "r": "optional",
                        "v": ""}  # fmt: skip
# The first word that makes the rest a subcommand's arguments, not a session's prompt.
SUBCOMMANDS: Final = frozenset(
    {
        "agents", "attach", "auth", "auto-mode", "config", "doctor", "gateway", "import",
        "install", "logs", "mcp", "migrate-installer", "plugin", "plugins", "purge",
        "respawn", "rm", "setup-token", "stop", "update", "upgrade",
    }
)  # fmt: skip

# Options known to load from where nothing is read, wherever they stand, with why (and
# every option starting --plugin: a plugin's servers, hooks and agents).
WORKTREE: Final = (
    "starts claude in a new git worktree (of HEAD or the remote's default branch), whose "
    ".mcp.json and settings were not judged"
)
NOT_READ: Final = {
    "--worktree": WORKTREE,
    "-w": WORKTREE,
    "--project-config-root": "reads the project's settings, .mcp.json and .claude folder "
    "from another folder, not read here",
    "--await-initialize": "takes plugins and MCP servers from the first request on its "
    "standard input, not read here",
}
PLUGIN: Final = "a plugin, whose servers, hooks and agents are not read here"
NOT_KNOWN: Final = (
    "an option the gate does not know, which may load servers, plugins or settings from "
    "where nothing is read (the options read are listed in mcp-servers.md)"
)
# -w among a group of short options (-w, -pw, -wNAME): --worktree.
_SHORT_WORKTREE: Final = re.compile(r"-[A-Za-z]*w")


def _is_option(arg: str) -> bool:
    """commander's ``maybeOption``: longer than one character and starting with ``-``."""
    return len(arg) > 1 and arg.startswith("-")


def _why(name: str) -> str | None:
    """Why an option loads from where nothing is read, or None when it is not known to."""
    if name in NOT_READ:
        return NOT_READ[name]
    return PLUGIN if name.startswith("--plugin") else None


def doubtful_options(argv: Sequence[str], *, session: bool = True) -> list[tuple[int, str, str]]:
    """Each option of ``argv`` (up to ``--``) that is a doubt, with its place (from 1), its
    name and why: in a session, every option not in SESSION_OPTIONS (a group of short
    options letter by letter, up to one that takes the rest as its value); after a
    subcommand, or everywhere when not ``session`` (``argv`` are a wrapper's, claude's
    own among them), those known to load from elsewhere."""
    found: list[tuple[int, str, str]] = []
    state = ""  # what the arguments that follow an option are to it
    prompt_seen = False
    for index, arg in enumerate(argv, 1):
        if arg == "--":
            break
        if state in ("value", "first of values"):
            state = "values" if state == "first of values" else ""
            continue
        if not _is_option(arg):
            if state == "optional":
                state = ""
            elif state != "values":
                if not prompt_seen and arg in SUBCOMMANDS:
                    session = False
                prompt_seen = True
            continue
        state = ""
        if not session:
            name = "-w" if not arg.startswith("--") and _SHORT_WORKTREE.match(arg) else arg
            why = _why(name.partition("=")[0])
            if why is not None:
                found.append((index, name.partition("=")[0], why))
            continue
        if arg.startswith("--") or arg == "-d2e":  # (claude's one short option of 3 letters)
            name, equals, _ = arg.partition("=")
            takes = SESSION_OPTIONS.get(name)
            if takes is None:
                found.append((index, name, _why(name) or NOT_KNOWN))
            elif not equals:
                state = "first of values" if takes == "values" else takes
            continue
        for at, letter in enumerate(arg[1:], 2):
            takes = SHORT_OPTIONS.get(letter)
            if takes is None:
                found.append((index, "-" + letter, _why("-" + letter) or NOT_KNOWN))
                break
            if takes:
                if at == len(arg):  # (else the rest of the group is its value)
                    state = "first of values" if takes == "values" else takes
                break
    return found


PACKAGE: Final = "@anthropic-ai/claude-code"


def names_claude(word: str, cwd: str) -> bool:
    """Whether a word names claude's program: its package (``PKG``, ``PKG@version``), a file
    named ``claude``, or a file, folder or module node runs (``cli``, ``cli.js``, the
    package's folder) whose nearest package.json names the package, wherever it is."""
    if word == PACKAGE or word.startswith(PACKAGE + "@") or os.path.basename(word) == "claude":
        return True
    real = os.path.realpath(os.path.join(cwd, word))
    if os.path.isdir(real):
        return _package_of(real) == PACKAGE
    for candidate in (real, real + ".js", real + ".mjs", real + ".cjs"):
        if os.path.isfile(candidate):
            return _package_of(os.path.dirname(candidate)) == PACKAGE
    return False


def _package_of(folder: str) -> str | None:
    """The name the nearest package.json at or above ``folder`` gives (None: none, or
    not one that can be read)."""
    import json

    for _ in range(16):
        manifest = os.path.join(folder, "package.json")
        if os.path.isfile(manifest):
            try:
                with open(manifest, "rb") as file:
                    name = json.loads(file.read(1 << 20)).get("name")
            except (OSError, ValueError, AttributeError, RecursionError):
                return None
            return name if isinstance(name, str) else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return None


def wrapped_doubtful_options(argv: Sequence[str], cwd: str) -> list[tuple[int, str, str]]:
    """doubtful_options of a wrapper's arguments (``cwd``: where relative paths are taken
    from): claude's own, after the first word that names its program, read as a session's
    (and every argument before it for what loads from elsewhere); when no word names it,
    every argument read for what loads from elsewhere only."""
    for index, word in enumerate(argv):
        if word != "--" and not _is_option(word) and names_claude(word, cwd):
            before = doubtful_options(argv[:index], session=False)
            own = doubtful_options(argv[index + 1 :])
            return before + [(index + 1 + at, name, why) for at, name, why in own]
    return doubtful_options(argv, session=False)
