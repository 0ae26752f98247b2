"""Sub-agent definitions that declare MCP servers of their own: an agent CLI starts them
when the sub-agent runs, so a definition that declares servers (or cannot be read
exactly) refuses the agent, as claude's agent files do; one that declares none does not.

- claude: an agent file starting with a byte order mark is a doubt (as every JSON and
  TOML file with one is), not a file without front matter.
- gemini: a subagent file (``.gemini/agents/*.md`` of the home and the project, and an
  extension's ``agents/``) whose front matter declares ``mcp_servers``.

Real files in a temporary home and project, native stand-in agents that leave a marker
when they run, a chain of the test's own (``lab`` in tests/gate/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import json

import pytest
from helpers.mcp_lab import AGENT_SERVERS, Lab, write

BOM = b"\xef\xbb\xbf"
CLAUDE_AGENT = f"---\nname: a\nmcpServers:\n{AGENT_SERVERS}---\nBody.\n"


def _claude_agents(lab: Lab, where: str) -> Path:
    return (lab.project if where == "project" else lab.home) / ".claude" / "agents"


# ---------------------------------------------------------------------------- claude


@pytest.mark.parametrize("where", ["project", "home"])
def test_a_claude_agent_file_starting_with_a_byte_order_mark_refuses_claude(
    lab: Lab, where: str
) -> None:
    """A front-matter reader that drops a BOM (gray-matter does) sees ``mcpServers`` here:
    whether Claude Code does is not known, so the file is a doubt."""
    write(_claude_agents(lab, where) / "a.md", BOM + CLAUDE_AGENT.encode())
    started, reason = lab.spawn("claude", "-p", "t")
    assert not started, "claude started with a BOM-prefixed agent file declaring servers"
    assert "a.md" in reason and "byte order mark" in reason, reason


def test_a_claude_agent_file_without_servers_still_lets_claude_start(lab: Lab) -> None:
    write(_claude_agents(lab, "project") / "a.md", "---\nname: a\n---\nBody.\n")
    started, reason = lab.spawn("claude", "-p", "t")
    assert started, reason


# ---------------------------------------------------------------------------- gemini

GEMINI_AGENT = f"---\nname: helper\ndescription: helps\nmcp_servers:\n{AGENT_SERVERS}---\nHelp.\n"


@pytest.mark.parametrize("where", ["project", "home", "extension"])
def test_a_gemini_subagent_declaring_mcp_servers_refuses_gemini(lab: Lab, where: str) -> None:
    """Gemini CLI's local subagents (``agentLoader.ts``) take ``mcp_servers`` in their front
    matter and start them when the subagent runs: the user's ``~/.gemini/agents``, the
    project's ``.gemini/agents`` and an extension's ``agents/`` are all loaded."""
    if where == "extension":
        extension = lab.home / ".gemini" / "extensions" / "x"
        write(extension / "gemini-extension.json", json.dumps({"name": "x", "version": "1.0.0"}))
        agents = extension / "agents"
    else:
        agents = (lab.project if where == "project" else lab.home) / ".gemini" / "agents"
    write(agents / "helper.md", GEMINI_AGENT)
    started, reason = lab.spawn("gemini")
    assert not started, "gemini started with a subagent declaring a below-floor server"
    assert "helper.md" in reason and "mcp_servers" in reason, reason


def test_a_gemini_subagent_without_servers_still_lets_gemini_start(lab: Lab) -> None:
    write(lab.project / ".gemini" / "agents" / "helper.md",
          "---\nname: helper\ndescription: helps\ntools: [read_file]\n---\nHelp.\n")  # fmt: skip
    started, reason = lab.spawn("gemini")
    assert started, reason
