"""The MCP servers an agent will start, judged when the agent is: a tracked agent whose
configuration declares a server the gate refuses (below its floor, untracked under
deny-by-default, a declaration it cannot read) is refused itself, on the record, with a
reason naming the server, its command, its version and the declaring file; an agent whose
servers all pass is permitted with every server listed in its receipt, and the window
proof holds such an agent to its servers.

In process, against the shipped floor map (aider >= 0.60.0, claude >= 1.0.20, codex >=
0.2.0, gemini >= 0.1.14), with native stand-ins for the agents and the servers (real
executables answering ``--version``), real configuration files and a real chain.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hosts import write_script
from probes import aider_at, gemini_at

import floorguard
from floorguard._chain.chain import AuditChain
from floorguard._chain.receipts import SPAWN_PREFLIGHT, new_receipt, shape_problem
from floorguard._gate.decision import Decision
from floorguard._gate.gate import decide
from floorguard._proofs.window_report import prove

PACKAGE = Path(floorguard.__file__).parent


@dataclass
class Agents:
    """Native stand-ins on a PATH, a home and a project, and a chain of their own."""

    root: Path
    bin: Path
    home: Path
    project: Path

    def host_env(self, **policy: str) -> dict[str, str]:
        return {"FLOORGUARD_HOME": str(self.root / "fg"), **policy}

    def run_env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.home), **extra}

    def decide(self, agent: str, *argv: str, policy: dict[str, str] | None = None) -> Decision:
        """The gate's decision on ``agent``; a refusal's decision is returned, not raised."""
        try:
            return decide(
                agent,
                binary=str(self.bin / agent),
                environ=self.host_env(**(policy or {})),
                run_environ=self.run_env(),
                argv=list(argv),
                cwd=str(self.project),
            )
        except floorguard.SpawnRefused as refused:
            assert refused.decision is not None, refused
            return refused.decision

    def mcp_json(self, **servers: dict[str, Any]) -> Path:
        path = self.project / ".mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        return path

    def receipt(self, decision: Decision) -> dict[str, Any]:
        chain = AuditChain.shared(self.host_env())
        [record] = [r for r in chain.records() if r.receipt_id == decision.receipt_id]
        assert shape_problem(SPAWN_PREFLIGHT, record.receipt) is None
        return dict(record.receipt)

    def proof(self) -> Any:
        chain = AuditChain.shared(self.host_env())
        key = bytes.fromhex((self.root / "fg" / "chain.key").read_text().strip())
        lines = [line + "\n" for line in chain.export_lines()]
        return prove(lines, key=key, map_dirs=[PACKAGE / "maps"])


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agents]:
    for variable in (
        "FLOORGUARD_FLOOR_MAP", "FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_UNTRACKED_POLICY"
    ):  # fmt: skip
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "fg"))  # spawn's host environment
    bin_dir, home, project = tmp_path / "bin", tmp_path / "home", tmp_path / "project"
    for folder in (bin_dir, home, project):
        folder.mkdir()
    write_script(bin_dir / "claude", "echo '1.0.30 (Claude Code)'")
    write_script(bin_dir / "codex", "echo 'codex-cli 0.5.0'")
    gemini_at(bin_dir / "gemini", "0.2.0")
    aider_at(bin_dir / "aider", "0.50.0")  # below its floor of 0.60.0
    (bin_dir / "fixed").mkdir()
    aider_at(bin_dir / "fixed" / "aider", "0.70.0")
    write_script(bin_dir / "helper", "echo 'helper 1.2.3'")  # no floor: untracked
    yield Agents(tmp_path, bin_dir, home, project)
    AuditChain.shared(Agents(tmp_path, bin_dir, home, project).host_env()).close()


def servers_of(receipt: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {server["name"]: server for server in receipt["mcp_servers"]}


# ------------------------------------------------------------------ refused for a server


def test_a_below_floor_aider_declared_in_mcp_json_refuses_claude(agents: Agents) -> None:
    declared = agents.mcp_json(old={"command": "aider", "args": ["--mcp"]})
    decision = agents.decide("claude", "-p", "task")
    assert decision.verdict == "refuse"
    assert decision.adapter == "claude" and decision.version == "1.0.30"
    for named in ("MCP server 'old'", "aider 0.50.0", str(declared), "mcpServers.old",
                  "below the floor 0.60.0"):  # fmt: skip
        assert named in decision.reason, decision.reason
    receipt = agents.receipt(decision)
    assert receipt["verdict"] == "refuse"
    [server] = receipt["mcp_servers"]
    assert server | {"reason": None} == server | {
        "name": "old", "transport": "stdio", "command": "aider", "adapter": "aider",
        "version": "0.50.0", "floor": "0.60.0", "verdict": "refuse",
        "declared_in": str(declared), "at": "mcpServers.old", "reason": None,
    }  # fmt: skip
    assert "args" not in server and server["declaration_digest"].startswith("sha256:")


def test_a_refused_server_refuses_the_agent_through_spawn_and_nothing_starts(
    agents: Agents, tmp_path: Path
) -> None:
    agents.mcp_json(old={"command": "aider"})
    with pytest.raises(floorguard.SpawnRefused, match="MCP server 'old'") as refused:
        floorguard.spawn("claude", ["-p", "task"], binary=str(agents.bin / "claude"),
                         env=agents.run_env(), cwd=agents.project)  # fmt: skip
    assert refused.value.decision is not None and refused.value.decision.verdict == "refuse"


def test_an_untracked_server_refuses_the_agent_under_deny_by_default(agents: Agents) -> None:
    declared = agents.mcp_json(tool={"command": "helper"})
    allowed = agents.decide("claude")
    assert allowed.verdict == "permit"
    assert servers_of(agents.receipt(allowed))["tool"]["verdict"] == "untracked"
    refused = agents.decide("claude", policy={"FLOORGUARD_UNTRACKED_POLICY": "refuse"})
    assert refused.verdict == "refuse"
    assert "MCP server 'tool'" in refused.reason and str(declared) in refused.reason
    assert "not a tracked adapter" in refused.reason


def test_an_unparseable_declaration_refuses_the_agent_naming_file_and_path(
    agents: Agents,
) -> None:
    path = agents.project / ".mcp.json"
    path.write_text('{"mcpServers": {"s": {"command": "helper", "args": ["ok", 7]}}}')
    decision = agents.decide("claude")
    assert decision.verdict == "refuse"
    assert f"{path}: mcpServers.s.args: not a list of strings" in decision.reason
    assert agents.receipt(decision)["mcp_servers"] == []


def test_a_duplicate_key_refuses_the_agent(agents: Agents) -> None:
    (agents.project / ".mcp.json").write_text(
        '{"mcpServers": {"s": {"command": "fixed/aider"}, "s": {"command": "aider"}}}'
    )
    decision = agents.decide("claude")
    assert decision.verdict == "refuse" and "repeats the key 's'" in decision.reason


def test_a_fifo_declaration_refuses_the_agent_without_blocking(agents: Agents) -> None:
    os.mkfifo(agents.project / ".mcp.json")
    decision = agents.decide("claude")
    assert decision.verdict == "refuse" and "FIFO" in decision.reason


def test_a_link_out_of_the_project_refuses_the_agent(agents: Agents, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"mcpServers": {}}))
    (agents.project / ".mcp.json").symlink_to(outside)
    decision = agents.decide("claude")
    assert decision.verdict == "refuse" and f"outside {agents.project}" in decision.reason


def test_an_unknown_transport_refuses_the_agent(agents: Agents) -> None:
    agents.mcp_json(s={"type": "unix", "command": "helper"})
    decision = agents.decide("claude")
    assert "mcpServers.s.type: unknown transport 'unix'" in decision.reason


@pytest.mark.parametrize("switch", ["enabled = false", 'experimental_environment = "remote"'])
def test_a_codex_server_with_a_command_is_judged_whatever_its_switches_say(
    agents: Agents, switch: str
) -> None:
    """Codex releases from before ``enabled`` and ``experimental_environment`` ignore them
    and start the command, and current ones start a "remote" server locally when no
    remote executor is available."""
    config = agents.home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(f'[mcp_servers.old]\ncommand = "aider"\n{switch}\n')
    refused = agents.decide("codex", "exec", "task")
    assert refused.verdict == "refuse"
    assert "MCP server 'old'" in refused.reason and "aider 0.50.0" in refused.reason


def test_a_gemini_settings_server_below_its_floor_refuses_gemini(agents: Agents) -> None:
    settings = agents.project / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n  // pinned\n  "mcpServers": {"a": {"command": "aider"}}\n}\n')
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse" and str(settings) in decision.reason


def test_the_warn_policy_lets_a_below_floor_server_run_on_the_record_and_the_proof_fails(
    agents: Agents,
) -> None:
    agents.mcp_json(old={"command": "aider"})
    decision = agents.decide("claude", policy={"FLOORGUARD_ADAPTER_FLOOR_POLICY": "warn"})
    assert decision.allowed
    assert servers_of(agents.receipt(decision))["old"]["verdict"] == "warn_override"
    report = agents.proof()
    assert not report.proven
    [violation] = report.violations
    assert "MCP server 'old' of 'claude'" in violation.reason
    assert "warn_override" in violation.reason


def test_a_server_env_that_preloads_code_into_a_tracked_server_refuses_the_agent(
    agents: Agents,
) -> None:
    fixed = str(agents.bin / "fixed" / "aider")
    agents.mcp_json(s={"command": fixed, "env": {"LD_PRELOAD": "/tmp/evil.so"}})
    decision = agents.decide("claude")
    assert decision.verdict == "refuse"
    assert "MCP server 's'" in decision.reason and "LD_PRELOAD" in decision.reason


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_server_that_is_node_under_another_name_refuses_the_agent(agents: Agents) -> None:
    """A copy of node in the workspace, declared with a script as its argument: node with a
    single-executable app injected would run the app, whatever the script."""
    tools = agents.project / "tools"
    tools.mkdir()
    helper = tools / "mcp-helper"
    shutil.copy2(os.path.realpath(str(shutil.which("node"))), helper)
    (tools / "server.js").write_text("console.log('served')\n", encoding="utf-8")
    agents.mcp_json(s={"command": "./tools/mcp-helper", "args": ["tools/server.js"]})
    decision = agents.decide("claude")
    assert decision.verdict == "refuse", decision
    assert "MCP server 's'" in decision.reason and "node under another name" in decision.reason


@pytest.mark.parametrize("name", ["BASH_FUNC_aider%%", "BASH_FUNC_aider()"])
def test_a_server_env_that_exports_a_shell_function_refuses_the_agent(
    agents: Agents, name: str
) -> None:
    # Any bash the server starts (npm's `sh -c BIN` where sh is bash) runs the function
    # instead of the command of its name.
    fixed = str(agents.bin / "fixed" / "aider")
    agents.mcp_json(s={"command": fixed, "env": {name: "() { /tmp/old/aider; }"}})
    decision = agents.decide("claude")
    assert decision.verdict == "refuse"
    assert "MCP server 's'" in decision.reason and name in decision.reason


@pytest.mark.parametrize(
    "loosening",
    [
        {"FLOORGUARD_UNTRACKED_POLICY": "allow"},
        {"FLOORGUARD_ADAPTER_FLOOR_POLICY": "warn"},
    ],
)
def test_a_server_env_cannot_loosen_the_hosts_policies(
    agents: Agents, loosening: dict[str, str]
) -> None:
    agents.mcp_json(old={"command": "aider", "env": loosening}, tool={"command": "helper"})
    decision = agents.decide("claude", policy={"FLOORGUARD_UNTRACKED_POLICY": "refuse"})
    assert decision.verdict == "refuse"
    listed = servers_of(agents.receipt(decision))
    assert listed["old"]["verdict"] == "refuse" and listed["tool"]["verdict"] == "refuse"


# ------------------------------------------------------------------ permitted, on the record


def test_an_agent_whose_servers_all_pass_is_permitted_with_them_in_its_receipt(
    agents: Agents,
) -> None:
    declared = agents.mcp_json(
        fixed={
            "command": str(agents.bin / "fixed" / "aider"),
            "args": ["--serve"],
            "env": {"TOKEN": "secret"},
        },
        tool={"command": "helper"},
        far={"type": "http", "url": "https://user:pw@mcp.example/x?key=secret"},
    )
    child = floorguard.spawn("claude", ["-p", "task"], binary=str(agents.bin / "claude"),
                             env=agents.run_env(), cwd=agents.project, stdout=-1)  # fmt: skip
    child.communicate(timeout=30)
    assert child.returncode == 0
    [record] = AuditChain.shared(agents.host_env()).records()
    receipt = dict(record.receipt)
    assert receipt["verdict"] == "permit", receipt["reason"]
    assert shape_problem(SPAWN_PREFLIGHT, receipt) is None
    listed = servers_of(receipt)
    assert sorted(listed) == ["far", "fixed", "tool"]
    assert listed["fixed"]["verdict"] == "permit" and listed["fixed"]["version"] == "0.70.0"
    assert listed["fixed"]["declared_in"] == str(declared)
    assert listed["tool"]["verdict"] == "untracked"
    assert listed["far"]["verdict"] == "remote"
    assert listed["far"]["url"] == "https://mcp.example/x"
    assert "secret" not in json.dumps(receipt)  # env values, user info, queries: not recorded
    decision = agents.decide("claude", "-p", "task")  # and preflight's Decision lists them
    assert decision.mcp_servers is not None
    assert [server["name"] for server in decision.mcp_servers] == ["fixed", "tool", "far"]
    report = agents.proof()
    assert report.proven, [v.reason for v in report.violations]


def test_other_agents_read_no_configuration(agents: Agents) -> None:
    agents.mcp_json(old={"command": "aider"})
    decision = agents.decide("aider")  # aider itself, below its floor: refused for itself
    assert "MCP server" not in decision.reason
    assert "mcp_servers" not in agents.receipt(decision)


@pytest.mark.parametrize(
    ("forged_server", "violation"),
    [
        ({}, "permit of 'claude', yet its MCP server 'old'"),
        ({"verdict": "permit"}, "permit of aider 0.50.0, below the floor 0.60.0"),
        ({"verdict": "untracked"}, "untracked 'aider', but the pinned map has the floor 0.60.0"),
        ({"verdict": "waived"}, "waived spawn of 'aider' names no version or no waiver id"),
        ({"verdict": "permit", "adapter": "AIDER"}, "names the adapter 'AIDER'"),
        # Not judged, says the record, of a local enabled server: the gate judges such a one.
        ({"verdict": "remote"}, "is recorded as remote, but its transport is 'stdio'"),
        ({"verdict": "disabled"}, "is recorded as disabled, but it is enabled"),
    ],
)
def test_the_window_proof_finds_a_permitted_agent_with_an_unsafe_server(
    agents: Agents, forged_server: dict[str, Any], violation: str
) -> None:
    # A forged or buggy record: the agent permitted although one of its servers is unsafe.
    agents.mcp_json(old={"command": "aider"})
    refused = agents.receipt(agents.decide("claude"))
    forged = {k: v for k, v in refused.items() if k not in ("kind", "ts", "schema_version")}
    forged["verdict"] = "permit"
    forged["mcp_servers"] = [forged["mcp_servers"][0] | forged_server]
    chain = AuditChain.shared(agents.host_env())
    chain.append(SPAWN_PREFLIGHT, new_receipt(SPAWN_PREFLIGHT, forged))
    report = agents.proof()
    [found] = report.violations
    assert "MCP server 'old'" in found.reason and "'claude'" in found.reason, found.reason
    assert violation in found.reason, found.reason


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ({"old": "refuse"}, "receipt mcp_servers is not a list"),
        (["old"], "receipt mcp_servers[0] is not an object"),
        ([{"name": "old", "verdict": "permit", "declared_in": "f", "enabled": 1}], "enabled"),
        ([{"name": 1, "verdict": "permit", "declared_in": "f", "enabled": True}], "name"),
    ],
)
def test_verification_refuses_a_malformed_server_list(servers: object, problem: str) -> None:
    receipt = new_receipt(SPAWN_PREFLIGHT, {"adapter": "claude", "verdict": "permit",
                                            "mcp_servers": servers})  # fmt: skip
    found = shape_problem(SPAWN_PREFLIGHT, receipt)
    assert found is not None and problem in found, found


def test_a_server_started_by_a_name_whose_path_search_gives_up_is_refused(
    agents: Agents,
) -> None:
    # The client starts it by name with execvp, which gives up at a link loop before the
    # aider that would pass: nothing would start, so no permit may stand for it.
    loop = agents.root / "loop"
    loop.mkdir()
    (loop / "aider").symlink_to("aider")
    path = f"{loop}:{agents.bin / 'fixed'}:/usr/bin:/bin"
    settings = agents.project / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps({"mcpServers": {"s": {"command": "aider", "env": {"PATH": path}}}})
    )
    decision = agents.decide("gemini")
    assert decision.verdict == "refuse"
    # (the folder, an entry of the server's own PATH, named by its place: a value)
    assert "<env PATH entry 1>/aider" in decision.reason and "gives up" in decision.reason
    assert str(loop) not in decision.reason


@pytest.mark.parametrize("kind", ["fifo", "socket", "link to a fifo"])
def test_a_server_name_whose_first_file_on_path_the_kernel_passes_over_is_refused(
    agents: Agents, kind: str
) -> None:
    # The client's execvp passes over a FIFO or socket with execute bits (execve refuses
    # it) and starts the next file of the name, here the old aider under a name with no
    # floor. What was judged must be what runs: such a first file refuses, whatever the
    # policy says of a name with no floor.
    import os
    import socket

    first, second = agents.root / "first", agents.root / "second"
    first.mkdir()
    second.mkdir()
    (second / "tool").symlink_to(agents.bin / "aider")
    shadow = first / "tool"
    if kind == "socket":
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(shadow))
    elif kind == "link to a fifo":
        os.mkfifo(agents.root / "fifo")
        (agents.root / "fifo").chmod(0o755)
        shadow.symlink_to(agents.root / "fifo")
    else:
        os.mkfifo(shadow)
    if kind != "link to a fifo":
        shadow.chmod(0o755)
    agents.mcp_json(s={"command": "tool", "env": {"PATH": f"{first}:{second}:/usr/bin:/bin"}})
    decision = agents.decide("claude")
    assert decision.verdict == "refuse", decision.reason
    assert "MCP server 's'" in decision.reason, decision.reason
    assert "cannot tell what tool will run" in decision.reason, decision.reason


def test_a_server_name_first_found_as_a_program_with_no_floor_starts(agents: Agents) -> None:
    """The control: the first file of the name is a program the kernel starts."""
    first = agents.root / "first"
    first.mkdir()
    (first / "tool").symlink_to(agents.bin / "helper")
    agents.mcp_json(s={"command": "tool", "env": {"PATH": f"{first}:/usr/bin:/bin"}})
    decision = agents.decide("claude")
    assert decision.verdict == "permit", decision.reason
    assert servers_of(agents.receipt(decision))["s"]["verdict"] == "untracked"
