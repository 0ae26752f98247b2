"""A server declared with its own ``cwd`` below the agent's working directory still runs in
the agent's workspace: a HOME, an npm cache or an XDG folder its declaration puts anywhere
in the agent's working directory (above the server's own ``cwd`` included) is filled by
the workspace, as it would be for the agent itself."""

from __future__ import annotations

import json

import pytest
from helpers.mcp_lab import Lab, servers, write

SERVER = {"command": "npx", "args": ["-y", "mcp-remote@0.1.16"]}


@pytest.mark.parametrize(
    ("cwd", "env"),
    [
        ("sub", {"HOME": "@P@"}),
        ("a/b", {"HOME": "@P@/a"}),
        ("sub", {"XDG_CACHE_HOME": "../cache"}),
    ],
    ids=["home is the agent's folder", "home between the two", "XDG cache above the server"],
)
def test_a_gemini_server_folder_in_the_agents_workspace_refuses_the_agent(
    lab: Lab, cwd: str, env: dict[str, str]
) -> None:
    (lab.project / cwd).mkdir(parents=True)
    env = {k: v.replace("@P@", str(lab.project)) for k, v in env.items()}
    write(lab.project / ".gemini" / "settings.json", servers(s={**SERVER, "cwd": cwd, "env": env}))
    started, reason = lab.spawn("gemini", "-p", "t")
    assert not started
    assert "working directory" in reason, reason


def test_a_codex_server_home_in_the_agents_workspace_refuses_the_agent(lab: Lab) -> None:
    (lab.project / "sub").mkdir()
    config = (
        '[mcp_servers.s]\ncommand = "npx"\nargs = ["-y", "mcp-remote@0.1.16"]\n'
        f"cwd = {json.dumps(str(lab.project / 'sub'))}\n"
        f"env = {{ HOME = {json.dumps(str(lab.project))} }}\n"
    )
    write(lab.project / ".codex" / "config.toml", config)
    started, reason = lab.spawn("codex", "exec", "t")
    assert not started
    assert "working directory" in reason, reason


def test_a_server_in_a_sub_folder_with_the_users_home_starts_the_agent(lab: Lab) -> None:
    (lab.project / "sub").mkdir()
    write(lab.project / ".gemini" / "settings.json", servers(s={**SERVER, "cwd": "sub"}))
    started, reason = lab.spawn("gemini", "-p", "t")
    assert started, reason
