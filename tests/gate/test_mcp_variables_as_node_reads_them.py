"""A variable a client expands in a server's ``env`` is read as node reads it, or refused.

Claude Code expands ``${...}`` in a server's ``env`` with its own rule: everything between
the braces, split on ``:-`` (two parts at most: ``${A:-B:-C}`` is ``B``), the name looked up
in ``process.env`` as written, untrimmed. ``process.env`` answers the names of an object's
own properties (``toString``, ``constructor``) with a function's text. Gemini CLI's lookups
do too, in its settings and in an extension's declaration. Any reference other than a plain
``NAME`` or ``NAME:-DEFAULT``, or naming such a property, is a doubt: refused, never kept
literally while the client puts something else there.

The lab's ``aider`` on the agent's PATH is below its floor (tests/helpers/mcp_lab.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, servers, write


def _good(lab: Lab) -> Path:
    folder = lab.root / "good"
    lab.aider(folder, "0.70.0")
    return folder


@pytest.mark.parametrize(
    "reference",
    [
        "${NOPE:-{good}:-x}",
        "${toString:-{good}}",
        "${ GP :-{good}}",
        "${GP%p:-{good}}",
        "${MY-VAR}",
        "${constructor}",
    ],
)
def test_claude_server_env_reference_not_read_plainly_is_refused(lab: Lab, reference: str) -> None:
    # (a variable that moves nothing the gate judges: the value is still not the client's)
    good = _good(lab)
    value = reference.replace("{good}", str(good))
    write(lab.project / ".mcp.json", servers(s={"command": "aider", "env": {"TOOLS": value}}))
    env = lab.env(GP=str(good), PATH=f"{good}:{lab.bin}:/usr/bin:/bin")
    started, reason = lab.spawn("claude", "-p", "t", env=env)
    assert not started, f"claude started a server whose env reads {reference!r}"
    assert "env.TOOLS" in reason, reason


def test_claude_server_env_plain_reference_still_reads(lab: Lab) -> None:
    good = _good(lab)
    declared = {"command": "aider", "env": {"TOOLS": "${GP:-/nowhere}", "T2": "${GP}"}}
    write(lab.project / ".mcp.json", servers(s=declared))
    started, reason = lab.spawn(
        "claude", "-p", "t", env=lab.env(GP="x", PATH=f"{good}:{lab.bin}:/usr/bin:/bin")
    )
    assert started, reason


@pytest.mark.parametrize("reference", ["$toString", "${constructor}", "${valueOf:-x}"])
def test_gemini_server_env_naming_an_object_property_is_refused(lab: Lab, reference: str) -> None:
    good = _good(lab)
    settings = {"mcpServers": {"s": {"command": "aider", "env": {"TOOLS": reference}}}}
    write(lab.home / ".gemini" / "settings.json", json.dumps(settings))
    started, reason = lab.spawn("gemini", env=lab.env(PATH=f"{good}:{lab.bin}:/usr/bin:/bin"))
    assert not started, f"gemini started a server whose env reads {reference!r}"
    assert "env.TOOLS" in reason, reason


def test_gemini_extension_declaration_naming_an_object_property_is_refused(lab: Lab) -> None:
    document = {
        "name": "ext",
        "version": "1.0.0",
        "mcpServers": {"s": {"command": "aider", "env": {"TOOLS": "${constructor}"}}},
    }
    write(lab.home / ".gemini" / "extensions" / "ext" / "gemini-extension.json",
          json.dumps(document))  # fmt: skip
    good = _good(lab)
    started, reason = lab.spawn("gemini", env=lab.env(PATH=f"{good}:{lab.bin}:/usr/bin:/bin"))
    assert not started, "gemini started an extension server whose env reads ${constructor}"
    assert "constructor" in reason, reason


@pytest.mark.parametrize("place", ["home", "project"])
def test_gemini_s_older_server_command_setting_is_refused(lab: Lab, place: str) -> None:
    """``mcpServerCommand`` (before settings were nested; newer releases move it to
    ``mcp.serverCommand``) starts a shell command line as a server."""
    folder = lab.home if place == "home" else lab.project
    write(folder / ".gemini" / "settings.json", json.dumps({"mcpServerCommand": "aider"}))
    started, reason = lab.spawn("gemini")  # (gemini itself is at its floor)
    assert not started, "gemini started with mcpServerCommand set"
    assert "mcpServerCommand" in reason, reason


def test_claude_server_env_reference_is_expanded_with_claude_s_env_files(lab: Lab) -> None:
    """Claude Code's Bun build loads the working directory's ``.env`` into its own
    process, where a server's ``${X}`` is looked up."""
    good = _good(lab)
    write(lab.project / ".env", f"GP={lab.bin}\n")
    declared = {"command": "aider", "env": {"PATH": "${GP:-/nowhere}:/usr/bin:/bin"}}
    write(lab.project / ".mcp.json", servers(s=declared))
    env = lab.env(PATH=f"{good}:{lab.bin}:/usr/bin:/bin")
    started, reason = lab.spawn("claude", "-p", "t", env=env)
    assert not started, "claude started a server whose PATH its .env makes the old aider's"
    assert "aider 0.50.0" in reason, reason
