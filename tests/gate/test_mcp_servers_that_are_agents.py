"""An MCP server that is itself an agent (claude, codex or gemini, started by another as a
server) starts the MCP servers its own configuration declares, in its own working directory,
with its own arguments and environment: those are judged too, as the agent's, and a refused
one refuses the server and so the agent that would start it. Agents started so in a loop (a
gemini declaring gemini in its own folder) are refused, never followed without end.

In process, against the shipped floor map, with native stand-ins (tests/gate/test_mcp_servers.py
builds the same: claude 1.0.30, gemini 0.2.0, aider 0.50.0 below its floor, a fixed aider
0.70.0), real configuration files and a real chain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from floorguard._chain.chain import AuditChain
from floorguard._chain.receipts import SPAWN_PREFLIGHT, new_receipt
from gate.test_mcp_servers import Agents, agents, servers_of

__all__ = ["agents"]  # the fixture, shared


def _gemini_settings(folder: Path, **servers: dict[str, Any]) -> Path:
    path = folder / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def test_a_gemini_server_whose_own_servers_hold_a_below_floor_aider_refuses_gemini(
    agents: Agents,
) -> None:
    inner = _gemini_settings(agents.project / "sub", old={"command": "aider"})
    _gemini_settings(agents.project, inner={"command": str(agents.bin / "gemini"), "cwd": "sub"})
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse"
    for named in ("MCP server 'inner'", "MCP server 'old'", "aider 0.50.0", str(inner),
                  "below the floor 0.60.0"):  # fmt: skip
        assert named in decision.reason, decision.reason
    [server] = agents.receipt(decision)["mcp_servers"]
    assert (server["name"], server["adapter"], server["verdict"]) == ("inner", "gemini", "refuse")
    [nested] = server["mcp_servers"]
    assert (nested["name"], nested["adapter"], nested["verdict"]) == ("old", "aider", "refuse")


@pytest.mark.parametrize("given", ["c/old.json", "TOKENLIKE9"])
def test_a_claude_server_given_its_own_mcp_config_has_that_file_judged(
    agents: Agents, given: str
) -> None:
    # (in a folder of its own: claude started as a server where .mcp.json declares it would
    # start itself again, and is refused as agents nested without end)
    config = agents.project / "sub" / given
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"mcpServers": {"old": {"command": "aider"}}}))
    _gemini_settings(
        agents.project,
        inner={"command": "claude", "args": ["mcp", "serve", "--mcp-config", given],
               "cwd": "sub"},
    )  # fmt: skip
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse"
    assert "MCP server 'inner'" in decision.reason, decision.reason
    # (the file is named by the argument's place: any argument may be a credential)
    assert "aider 0.50.0" in decision.reason and "<argument 4>" in decision.reason
    # (an argument that is a word is named where it stands as one, not inside the reason's
    # own words: "serve" is no part of "server")
    assert "<argument 2>r" not in decision.reason and "MCP server" in decision.reason
    # (the file the argument names, path or word, is named by its place in every reason;
    # the nested server's entry records where it was declared by path, as every entry does)
    [server] = agents.receipt(decision)["mcp_servers"]
    assert given not in decision.reason + server["reason"], decision.reason


def test_a_nested_servers_declaring_file_is_named_whole_though_an_argument_is_in_its_path(
    agents: Agents,
) -> None:
    # claude's "serve" is an argument, named by its place in the reason; the folder
    # "serve-app" holding the nested claude's own file is no argument: its path stays whole.
    inner = agents.project / "serve-app" / ".gemini" / "settings.json"
    _gemini_settings(inner.parent.parent, old={"command": "aider"})
    _gemini_settings(
        agents.project,
        inner={"command": "gemini", "args": ["serve"], "cwd": "serve-app"},
    )  # fmt: skip
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse"
    assert f"declared in {inner} at" in decision.reason, decision.reason
    assert "<argument 1>-app" not in json.dumps(agents.receipt(decision))


def test_an_agent_server_whose_own_servers_pass_is_permitted_and_listed_with_them(
    agents: Agents,
) -> None:
    _gemini_settings(agents.project / "sub", fine={"command": str(agents.bin / "fixed" / "aider")})
    _gemini_settings(agents.project, inner={"command": "gemini", "cwd": "sub"})
    decision = agents.decide("gemini")
    assert decision.verdict == "permit", decision.reason
    [server] = agents.receipt(decision)["mcp_servers"]
    assert server["verdict"] == "permit" and server["adapter"] == "gemini"
    [nested] = server["mcp_servers"]
    assert (nested["name"], nested["verdict"], nested["version"]) == ("fine", "permit", "0.70.0")
    report = agents.proof()
    assert report.proven, [v.reason for v in report.violations]


def test_a_gemini_that_declares_itself_as_its_own_server_is_refused_not_followed(
    agents: Agents,
) -> None:
    _gemini_settings(agents.project, again={"command": "gemini"})
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse"
    assert "nested" in decision.reason, decision.reason


def test_the_window_proof_finds_an_unsafe_server_of_a_server_that_is_an_agent(
    agents: Agents,
) -> None:
    # A forged or buggy record: every verdict permit, the innermost server below its floor.
    _gemini_settings(agents.project / "sub", old={"command": "aider"})
    _gemini_settings(agents.project, inner={"command": "gemini", "cwd": "sub"})
    refused = agents.receipt(agents.decide("gemini"))
    forged = {k: v for k, v in refused.items() if k not in ("kind", "ts", "schema_version")}
    forged["verdict"] = "permit"
    [server] = forged["mcp_servers"]
    [nested] = server["mcp_servers"]
    forged["mcp_servers"] = [
        server | {"verdict": "permit", "mcp_servers": [nested | {"verdict": "permit"}]}
    ]
    chain = AuditChain.shared(agents.host_env())
    chain.append(SPAWN_PREFLIGHT, new_receipt(SPAWN_PREFLIGHT, forged))
    report = agents.proof()
    [found] = report.violations
    assert "MCP server 'old'" in found.reason and "aider 0.50.0" in found.reason, found.reason
    assert servers_of(refused)["inner"]["verdict"] == "refuse"


def test_agents_started_as_servers_declaring_too_many_servers_between_them_are_refused(
    agents: Agents,
) -> None:
    # Every path through a tree of agents declaring agents is judged: F servers a level,
    # three levels, is F**3 judgements. Their number is bounded, not followed to the end.
    def nine(cwd: str) -> dict[str, Any]:
        return {f"s{n}": {"command": "gemini", "cwd": cwd, "env": {"N": str(n)}} for n in range(9)}

    _gemini_settings(agents.project, **nine("a"))
    _gemini_settings(agents.project / "a", **nine("b"))
    _gemini_settings(agents.project / "a" / "b", **nine("b"))
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse"
    # (the server at which the count was passed refuses so, on the record)
    assert "more than 64 servers between them" in json.dumps(decision.mcp_servers)
