"""One process calls ``floorguard.preflight("claude")`` again and again while the MCP
configuration it reads changes between two calls: the parse of a file is reused only while
its bytes are the same, and never in place of the checks on what the file is and where it
lies (docs/mcp-servers.md, "Strict reading").

A file that is not there, or a link leading nowhere, declares nothing; a folder, a FIFO, a
link out of the folder the file was looked for in (same bytes as before), a file where a
folder belongs, an unreadable file, and bytes changed at the same size and times each
refuse the agent, naming the file; a link inside the project is followed.
"""

from __future__ import annotations

import json
import os
import shutil
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


@dataclass
class Host:
    root: Path
    home: Path
    project: Path
    claude: Path

    def preflight(self) -> Decision:
        try:
            return floorguard.preflight("claude", binary=str(self.claude))
        except floorguard.SpawnRefused as refused:
            assert refused.decision is not None, refused
            return refused.decision

    def permitted(self, *servers: str) -> Decision:
        decision = self.preflight()
        assert decision.verdict == "permit", decision.reason
        assert [s["name"] for s in decision.mcp_servers] == list(servers)
        return decision

    def refused(self, *named: str) -> Decision:
        decision = self.preflight()
        assert decision.verdict == "refuse", decision
        for text in named:
            assert text in decision.reason, decision.reason
        return decision


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
    yield Host(tmp_path, home, project, claude)
    AuditChain.shared({"FLOORGUARD_HOME": str(tmp_path / "fg")}).close()


def _write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_a_file_removed_after_it_was_read_declares_nothing(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    declared.unlink()
    host.permitted()


def test_a_file_made_after_a_preflight_in_any_folder_looked_in_is_read_at_the_next(
    host: Host,
) -> None:
    # The paths looked for are joined once a process (the same text every time); whether a
    # file is at each is looked at every time.
    host.permitted()
    for folder in (host.project, host.root / "work", host.home):
        name = ".claude.json" if folder == host.home else ".mcp.json"
        declared = _write(folder / name, GOOD)
        host.permitted("ok")
        declared.unlink()
        host.permitted()


def test_a_file_replaced_by_a_dangling_link_declares_nothing(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    declared.unlink()
    declared.symlink_to(host.project / "nowhere.json")
    host.permitted()


def test_the_same_bytes_behind_a_link_out_of_the_project_refuse(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    outside = _write(host.root / "outside.json", GOOD)
    declared.unlink()
    declared.symlink_to(outside)
    host.refused(str(declared))


def test_the_same_bytes_behind_a_link_inside_the_project_are_read(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    inside = _write(host.project / "conf" / "mcp.json", GOOD)
    declared.unlink()
    declared.symlink_to(inside)
    host.permitted("ok")


def test_a_home_file_replaced_by_a_link_out_of_home_with_the_same_bytes_refuses(
    host: Host,
) -> None:
    declared = _write(host.home / ".claude.json", GOOD)
    host.permitted("ok")
    outside = _write(host.root / "elsewhere.json", GOOD)
    declared.unlink()
    declared.symlink_to(outside)
    host.refused(str(declared))


def test_a_parent_folders_file_linked_out_of_that_folder_refuses(host: Host) -> None:
    declared = _write(host.project.parent / ".mcp.json", GOOD)
    host.permitted("ok")
    outside = _write(host.root / "outside.json", GOOD)
    declared.unlink()
    declared.symlink_to(outside)
    host.refused(str(declared))


def test_a_folder_where_the_file_was_refuses(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    declared.unlink()
    declared.mkdir()
    host.refused(str(declared))


def test_a_fifo_where_the_file_was_refuses_without_blocking(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    declared.unlink()
    os.mkfifo(declared)
    host.refused(str(declared))


def test_a_file_where_a_settings_folder_belongs_refuses(host: Host) -> None:
    _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    (host.project / ".claude").write_text("{}", encoding="utf-8")  # .claude/settings.json
    host.refused(".claude")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_a_file_made_unreadable_after_it_was_read_refuses(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    declared.chmod(0)
    host.refused(str(declared))


def test_bytes_changed_at_the_same_size_and_times_are_read_again(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    before = os.stat(declared)
    text = declared.read_text(encoding="utf-8").replace('"fixed-aider"', '"aider"      ')
    assert len(text) == before.st_size
    with declared.open("r+", encoding="utf-8") as file:  # in place: the same inode
        file.write(text)
    os.utime(declared, ns=(before.st_atime_ns, before.st_mtime_ns))
    host.refused("MCP server 'ok'", "aider 0.50.0", "below the floor")


def test_a_file_replaced_by_a_rename_of_other_bytes_is_read_again(host: Host) -> None:
    declared = _write(host.project / ".mcp.json", GOOD)
    host.permitted("ok")
    _write(host.project / "next.json", {"mcpServers": {"old": {"command": "aider"}}})
    os.replace(host.project / "next.json", declared)
    host.refused("MCP server 'old'", "aider 0.50.0")
    os.replace(_write(host.project / "back.json", GOOD), declared)
    host.permitted("ok")


def test_the_same_home_file_read_from_another_project_folder_is_judged_for_that_folder(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same bytes, parsed once: which project's servers apply is the working folder's
    old = {"mcpServers": {"old": {"command": "aider"}}}
    _write(host.home / ".claude.json", {"projects": {str(host.project): old}})
    elsewhere = host.root / "work" / "other"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    host.permitted()
    monkeypatch.chdir(host.project)
    host.refused("MCP server 'old'", "aider 0.50.0")


def test_two_files_of_the_same_bytes_are_each_named_as_declaring(host: Host) -> None:
    parent = _write(host.project.parent / ".mcp.json", GOOD)
    host.permitted("ok")
    own = _write(host.project / ".mcp.json", GOOD)
    decision = host.permitted("ok", "ok")
    assert sorted(s["declared_in"] for s in decision.mcp_servers) == sorted([str(parent), str(own)])


# A folder the client keeps its files in (``.claude``) that is not there at all is looked
# for once a reading, not once a file: whatever appears there by the next preflight is read.
_PLUGIN = {"enabledPlugins": {"plugin": True}}
_AGENT = "---\nname: helper\nmcpServers:\n  x:\n    command: aider\n---\n"


def test_a_claude_folder_made_after_a_preflight_is_read_at_the_next(host: Host) -> None:
    host.permitted()
    for folder in (host.project / ".claude", host.root / "work" / ".claude", host.home / ".claude"):
        settings = _write(folder / "settings.json", _PLUGIN)
        host.refused(str(settings), "enabled plugin")
        settings.unlink()
        host.permitted()
        agent = folder / "agents" / "helper.md"
        agent.parent.mkdir()
        agent.write_text(_AGENT, encoding="utf-8")
        host.refused(str(agent), "an agent's own MCP servers")
        shutil.rmtree(folder)
        host.permitted()
    _write(host.home / ".claude" / ".config.json", GOOD)  # (the legacy global file)
    host.permitted("ok")


def test_a_link_where_the_claude_folder_belongs_is_followed(host: Host) -> None:
    elsewhere = host.root / "elsewhere"
    (host.project / ".claude").symlink_to(elsewhere)  # (leading nowhere yet)
    host.permitted()
    agent = elsewhere / "agents" / "helper.md"
    agent.parent.mkdir(parents=True)
    agent.write_text(_AGENT, encoding="utf-8")
    host.refused("helper.md", "an agent's own MCP servers")
