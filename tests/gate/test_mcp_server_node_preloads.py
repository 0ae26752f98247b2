"""An MCP server started as ``node -r <an agent's file> server.js`` runs that agent's code:
it is judged as that agent (refused for the preload), so the agent declaring it is refused
(tests/closed_world/test_node_preloading_an_adapter.py has the spawns themselves)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.mcp_lab import Lab, project_claude, servers, write

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def _declared(lab: Lab, *args: str) -> Path:
    write(lab.project / "server.js", "1;\n")
    node = str(Path(str(shutil.which("node"))).resolve())
    return write(lab.root / "servers.json", servers(s={"command": node, "args": list(args)}))


def test_a_server_preloading_an_old_claude_refuses_the_agent(lab: Lab) -> None:
    project_claude(lab.root / "old", "1.0.0")
    cli = lab.root / "old" / "node_modules" / "@anthropic-ai" / "claude-code" / "cli.js"
    config = _declared(lab, "-r", str(cli), "server.js")
    started, reason = lab.spawn("claude", "--mcp-config", str(config), "-p", "t")
    assert not started
    assert "MCP server 's'" in reason and "claude" in reason and "-r" in reason, reason


def test_a_server_preloading_a_helper_of_no_agent_is_untracked_and_the_agent_starts(
    lab: Lab,
) -> None:
    write(lab.project / "helper.js", "1;\n")
    config = _declared(lab, "-r", "./helper.js", "server.js")
    started, reason = lab.spawn("claude", "--mcp-config", str(config), "-p", "t")
    assert started, reason
    [server] = lab.last_receipt()["mcp_servers"]
    assert server["verdict"] == "untracked" and server["adapter"] == "node", server


def test_a_node_script_server_given_node_options_preloading_old_claude_refuses_the_agent(
    lab: Lab,
) -> None:
    """An ordinary npm server (a ``#!/usr/bin/env node`` program) declared with
    ``env.NODE_OPTIONS`` preloading the old claude: the server is that claude."""
    project_claude(lab.root / "old", "1.0.0")
    cli = lab.root / "old" / "node_modules" / "@anthropic-ai" / "claude-code" / "cli.js"
    tool = write(lab.root / "tools" / "tool", "#!/usr/bin/env node\n1;\n")
    tool.chmod(0o755)
    declared = {"command": str(tool), "env": {"NODE_OPTIONS": f"--require {cli}"}}
    config = write(lab.root / "servers.json", servers(s=declared))
    started, reason = lab.spawn("claude", "--mcp-config", str(config), "-p", "t")
    assert not started
    assert "MCP server 's'" in reason and "claude" in reason, reason
