"""One process calls ``floorguard.preflight("claude")`` twice while the MCP configuration
file is a link whose target appears, or turns into a folder, between the two calls
(docs/mcp-servers.md, "Strict reading").

A link leading nowhere declares nothing; once the folder it leads into is created and the
file written there, the next preflight reads it (inside the project) or refuses it (out of
the project); a link to a folder, or to a path that becomes a folder, refuses the agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hosts import write_script
from probes import aider_at

import floorguard
from floorguard._chain.chain import AuditChain
from floorguard._gate.decision import Decision

GOOD = {"mcpServers": {"ok": {"command": "fixed-aider"}}}
BELOW_FLOOR = {"mcpServers": {"old": {"command": "aider"}}}


@dataclass
class Host:
    root: Path
    project: Path
    claude: Path

    def preflight(self) -> Decision:
        try:
            return floorguard.preflight("claude", binary=str(self.claude))
        except floorguard.SpawnRefused as refused:
            assert refused.decision is not None, refused
            return refused.decision

    def permitted(self, *servers: str) -> None:
        decision = self.preflight()
        assert decision.verdict == "permit", decision.reason
        assert [s["name"] for s in decision.mcp_servers or ()] == list(servers)

    def refused(self, *named: str) -> None:
        decision = self.preflight()
        assert decision.verdict == "refuse", decision
        for text in named:
            assert text in decision.reason, decision.reason


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    for variable in (
        "FLOORGUARD_FLOOR_MAP", "FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_UNTRACKED_POLICY",
        "CLAUDE_CONFIG_DIR",
    ):  # fmt: skip
        monkeypatch.delenv(variable, raising=False)
    bin_dir, home, project = tmp_path / "bin", tmp_path / "home", tmp_path / "work" / "project"
    for folder in (bin_dir, home, project):
        folder.mkdir(parents=True)
    claude = write_script(bin_dir / "claude", "echo '1.0.30 (Claude Code)'")
    aider_at(bin_dir / "fixed-aider", "0.70.0")
    aider_at(bin_dir / "aider", "0.50.0")  # below its floor of 0.60.0
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "fg"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.chdir(project)
    yield Host(tmp_path, project, claude)
    AuditChain.shared({"FLOORGUARD_HOME": str(tmp_path / "fg")}).close()


def _write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_a_link_into_a_folder_created_later_in_the_project_is_read_once_it_leads_somewhere(
    host: Host,
) -> None:
    declared = host.project / ".mcp.json"
    declared.symlink_to(host.project / "later" / "mcp.json")
    host.permitted()
    _write(host.project / "later" / "mcp.json", BELOW_FLOOR)
    host.refused("'old'", str(declared))


def test_a_link_into_a_folder_created_later_in_the_project_declares_its_servers(
    host: Host,
) -> None:
    declared = host.project / ".mcp.json"
    declared.symlink_to(host.project / "later" / "mcp.json")
    host.permitted()
    _write(host.project / "later" / "mcp.json", GOOD)
    host.permitted("ok")


def test_a_link_into_a_folder_created_later_out_of_the_project_refuses(host: Host) -> None:
    declared = host.project / ".mcp.json"
    declared.symlink_to(host.root / "later" / "mcp.json")
    host.permitted()
    _write(host.root / "later" / "mcp.json", GOOD)
    host.refused(str(declared))


def test_a_link_whose_target_becomes_a_folder_refuses(host: Host) -> None:
    declared = host.project / ".mcp.json"
    declared.symlink_to(host.project / "later")
    host.permitted()
    (host.project / "later").mkdir()
    host.refused(str(declared))


def test_a_file_replaced_by_a_link_to_a_folder_refuses(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    (host.project / "conf").mkdir()
    declared.unlink()
    declared.symlink_to(host.project / "conf", target_is_directory=True)
    host.refused(str(declared))


def test_a_file_replaced_by_a_link_to_a_folder_holding_the_same_name_refuses(
    host: Host,
) -> None:
    # the folder holds a file of the same name and bytes: the link still leads to a folder
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    _write(host.project / "conf" / ".mcp.json", GOOD)
    declared.unlink()
    declared.symlink_to(host.project / "conf", target_is_directory=True)
    host.refused(str(declared))


def test_a_home_file_linked_into_a_home_folder_created_later_is_read(host: Host) -> None:
    home = host.root / "home"
    declared = home / ".claude.json"
    declared.symlink_to(home / "later" / "claude.json")
    host.permitted()
    _write(home / "later" / "claude.json", BELOW_FLOOR)
    host.refused("'old'", str(declared))


def test_a_home_file_replaced_by_a_link_to_a_home_folder_refuses(host: Host) -> None:
    home = host.root / "home"
    declared = _write(home / ".claude.json", GOOD)
    host.permitted("ok")
    (home / "conf").mkdir()
    declared.unlink()
    declared.symlink_to(home / "conf", target_is_directory=True)
    host.refused(str(declared))
