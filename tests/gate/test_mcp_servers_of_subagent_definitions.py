"""Sub-agent definitions that declare MCP servers of their own: an agent CLI starts them
when the sub-agent runs, so a definition that declares servers (or cannot be read
exactly) refuses the agent, as claude's agent files do; one that declares none does not.

- claude and gemini: an agent file starting with a byte order mark (UTF-8, UTF-16 or
  UTF-32) or that is not UTF-8 is a doubt (as every JSON and TOML file with one is), not
  a file without front matter.
- gemini: a subagent file (``.gemini/agents/*.md`` of the home and the project, and an
  extension's ``agents/``) whose front matter declares ``mcp_servers``.

Real files in a temporary home and project, native stand-in agents that leave a marker
when they run, a chain of the test's own (``lab`` in tests/gate/conftest.py).
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
from helpers.mcp_lab import AGENT_SERVERS, Lab, write

BOM = b"\xef\xbb\xbf"
CLAUDE_AGENT = f"---\nname: a\nmcpServers:\n{AGENT_SERVERS}---\nBody.\n"
GEMINI_AGENT = f"---\nname: helper\ndescription: helps\nmcp_servers:\n{AGENT_SERVERS}---\nHelp.\n"


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


ENCODINGS = {  # the byte order mark each starts with, then the text in that encoding
    "utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE,
    "utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE,
}  # fmt: skip


@pytest.mark.parametrize("agent", ["claude", "gemini"])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_an_agent_file_in_another_unicode_encoding_refuses_the_agent(
    lab: Lab, agent: str, encoding: str
) -> None:
    """A reader that decodes by the byte order mark finds the servers of a UTF-16 or
    UTF-32 agent file; one reading UTF-8 finds no front matter: not known here, a doubt."""
    text = CLAUDE_AGENT if agent == "claude" else GEMINI_AGENT
    data = ENCODINGS[encoding] + text.encode(encoding)
    write(lab.project / f".{agent}" / "agents" / "a.md", data)
    started, reason = lab.spawn(agent, *(["-p", "t"] if agent == "claude" else []))
    assert not started, f"{agent} started with a {encoding} agent file declaring servers"
    assert "a.md" in reason and "byte order mark" in reason, reason


@pytest.mark.parametrize("agent", ["claude", "gemini"])
@pytest.mark.parametrize("encoding", ["latin-1", "utf-16-le"])
def test_an_agent_file_that_is_not_utf8_refuses_the_agent(
    lab: Lab, agent: str, encoding: str
) -> None:
    """Latin-1 text, or UTF-16 without a byte order mark (valid UTF-8 only for its NULs),
    is read by no rule known here: a doubt, not a file without front matter."""
    text = (CLAUDE_AGENT if agent == "claude" else GEMINI_AGENT) + "Caf\u00e9.\n"
    write(lab.project / f".{agent}" / "agents" / "a.md", text.encode(encoding))
    started, reason = lab.spawn(agent, *(["-p", "t"] if agent == "claude" else []))
    assert not started, f"{agent} started with an agent file that is not UTF-8"
    assert "a.md" in reason and "not UTF-8" in reason, reason


def test_a_claude_agent_file_without_servers_still_lets_claude_start(lab: Lab) -> None:
    write(_claude_agents(lab, "project") / "a.md", "---\nname: a\n---\nBody.\n")
    started, reason = lab.spawn("claude", "-p", "t")
    assert started, reason


# ---------------------------------------------------------------------------- gemini


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


# ---------------------------------------------------------------------------- codex

ROLE_SERVERS = '[mcp_servers.o]\ncommand = "aider"\n'
ROLE_NAMED = '[agents.researcher]\ndescription = "r"\nconfig_file = "./roles/r.toml"\n'


@pytest.mark.parametrize("where", ["config_file", "home agents folder", "project agents folder"])
def test_a_codex_agent_role_layer_declaring_mcp_servers_refuses_codex(lab: Lab, where: str) -> None:
    """Codex applies an agent role's config layer to the sub-agents it spawns with that
    role (codex-rs ``config/agent_roles.rs``): the file ``[agents.<role>] config_file``
    names (relative to the config.toml naming it), and every ``.toml`` file below a config
    layer's ``agents/`` folder. Such a layer may declare ``[mcp_servers.*]``."""
    role = 'description = "r"\ndeveloper_instructions = "r"\n' + ROLE_SERVERS
    if where == "config_file":
        write(lab.home / ".codex" / "config.toml", ROLE_NAMED)
        write(lab.home / ".codex" / "roles" / "r.toml", role)
    elif where == "home agents folder":
        write(lab.home / ".codex" / "agents" / "team" / "r.toml", 'name = "r"\n' + role)
    else:
        write(lab.project / ".codex" / "agents" / "r.toml", 'name = "r"\n' + role)
    started, reason = lab.spawn("codex", "exec", "t")
    assert not started, "codex started with an agent role declaring a below-floor server"
    assert "r.toml" in reason and "mcp_servers" in reason, reason


@pytest.mark.parametrize("named", ["~/roles/r.toml", "~//roles/r.toml"])
@pytest.mark.parametrize("layer", ["home", "project"])
def test_a_codex_agent_role_layer_named_from_the_home_refuses_codex(
    lab: Lab, named: str, layer: str
) -> None:
    """Codex expands a leading ``~`` of ``config_file`` (an ``AbsolutePathBuf``, codex-rs
    ``utils/absolute-path``: ``~/x`` and ``~//x`` are ``$HOME/x``), whichever layer names
    it: the role layer is the one in the home, not a ``~`` folder beside the layer."""
    write(lab.home / "roles" / "r.toml", 'description = "r"\n' + ROLE_SERVERS)
    named_by = ROLE_NAMED.replace("./roles/r.toml", named)
    write((lab.home if layer == "home" else lab.project) / ".codex" / "config.toml", named_by)
    started, reason = lab.spawn("codex", "exec", "t")
    assert not started, "codex started with a role layer in the home declaring servers"
    assert str(lab.home / "roles" / "r.toml") in reason and "mcp_servers" in reason, reason


def test_a_codex_agent_role_named_from_a_relative_home_refuses_codex(lab: Lab) -> None:
    """With a relative HOME, codex resolves ``~/x`` against the layer's folder, not the
    working directory: not followed here, so a doubt."""
    write(lab.home / ".codex" / "config.toml", ROLE_NAMED.replace("./roles", "~/roles"))
    env = lab.env(CODEX_HOME=str(lab.home / ".codex"), HOME="rel")
    started, reason = lab.spawn("codex", "exec", "t", env=env)
    assert not started and "config_file" in reason and "HOME" in reason, reason


def test_a_codex_agent_role_named_by_a_config_override_refuses_codex(lab: Lab) -> None:
    write(lab.root / "r.toml", 'description = "r"\ndeveloper_instructions = "r"\n' + ROLE_SERVERS)
    override = f'agents.r.config_file="{lab.root / "r.toml"}"'
    started, reason = lab.spawn("codex", "-c", override, "exec", "t")
    assert not started and "agents.r.config_file" in reason, reason


def test_a_codex_agent_role_without_servers_still_lets_codex_start(lab: Lab) -> None:
    write(lab.home / ".codex" / "config.toml", ROLE_NAMED)
    write(lab.home / ".codex" / "roles" / "r.toml", 'model = "m"\ndeveloper_instructions = "r"\n')
    write(lab.project / ".codex" / "agents" / "w.toml",
          'name = "w"\ndescription = "w"\ndeveloper_instructions = "w"\n')  # fmt: skip
    started, reason = lab.spawn("codex", "exec", "t")
    assert started, reason


def test_a_codex_agent_role_in_the_home_without_servers_still_lets_codex_start(lab: Lab) -> None:
    write(lab.home / ".codex" / "config.toml", ROLE_NAMED.replace("./roles", "~/roles"))
    write(lab.home / "roles" / "r.toml", 'model = "m"\ndeveloper_instructions = "r"\n')
    started, reason = lab.spawn("codex", "exec", "t")
    assert started, reason
