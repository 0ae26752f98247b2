"""The doctor: every tracked adapter's installed posture, sealed as a receipt.

Real binaries on a PATH made by the test: one at its floor, one below, one whose version
cannot be read; the rest of the tracked adapters are not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers.cli import floorctl
from hosts import Host, floor, receipt_in_chain, write_script
from probes import aider_at

REPO = Path(__file__).resolve().parents[2]


def statuses(document: dict[str, object]) -> dict[str, str]:
    adapters = document["adapters"]
    assert isinstance(adapters, list)
    return {a["adapter"]: a["status"] for a in adapters}


def test_floorctl_doctor_reports_each_status_and_seals_the_posture(
    tmp_path: Path, doctor_path: Path
) -> None:
    done = floorctl("doctor", "--json", cwd=REPO, state=tmp_path / "state", PATH=str(doctor_path))
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert statuses(document) == {
        "aider": "ok",
        "claude": "below_floor",
        "codex": "unknown_version",
        "gemini": "not_installed",
        "goose": "not_installed",
        "gptme": "not_installed",
    }
    aider = next(a for a in document["adapters"] if a["adapter"] == "aider")
    assert aider["binary"] == os.path.realpath(doctor_path / "aider")  # pip's script
    assert aider["version"] == "0.60.0"
    assert aider["detected_by"] == "pip-metadata"
    assert aider["floor"] == "0.60.0"
    claude = next(a for a in document["adapters"] if a["adapter"] == "claude")
    assert (claude["version"], claude["detected_by"]) == ("1.0.3", "probe")
    exported = floorctl("chain", "export", cwd=REPO, state=tmp_path / "state")
    [record] = [json.loads(line) for line in exported.stdout.splitlines()]
    assert record["event"] == "adapter.version_posture"
    assert record["receipt_id"] == document["receipt_id"]
    assert record["receipt"]["floor_map_hash"] == document["floor_map_hash"]


def test_doctor_reports_a_native_stand_in_for_aider_as_the_gate_judges_it(
    tmp_path: Path,
) -> None:
    """aider is published only as a Python package: a native program answering as aider is
    no aider the gate would run, whatever version it prints."""
    doctor_path = tmp_path / "bin"
    doctor_path.mkdir()
    write_script(doctor_path / "aider", "echo 'aider 0.90.0'")
    done = floorctl("doctor", "--json", cwd=REPO, state=tmp_path / "state", PATH=str(doctor_path))
    assert done.returncode == 1, done.stderr
    aider = next(a for a in json.loads(done.stdout)["adapters"] if a["adapter"] == "aider")
    assert (aider["status"], aider["version"]) == ("unknown_version", None), aider
    assert "published only as a Python package" in aider["reason"], aider


def test_doctor_exits_0_when_every_installed_adapter_meets_its_floor(tmp_path: Path) -> None:
    doctor_path = tmp_path / "bin"
    doctor_path.mkdir()
    aider_at(doctor_path / "aider", "0.61.2")
    done = floorctl("doctor", cwd=REPO, state=tmp_path / "state", PATH=str(doctor_path))
    assert done.returncode == 0, done.stderr
    assert "posture receipt sha256:" in done.stdout
    assert "not_installed" in done.stdout


def test_runtime_doctor_works_without_floorctl_and_records_the_receipt(
    tmp_path: Path, doctor_path: Path
) -> None:
    host = Host(tmp_path / "host", {"aider": floor("0.60.0"), "claude": floor("1.0.20")})
    done = host.python("-m", "floorguard", "doctor", "--json", PATH=str(doctor_path))
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert statuses(document) == {"aider": "ok", "claude": "below_floor"}
    assert receipt_in_chain(host, document["receipt_id"])["kind"] == "adapter.version_posture"
    imported = host.python(
        "-c", "import sys, floorguard.__main__; print('floorctl' in sys.modules)"
    )
    assert imported.stdout.strip() == "False"


def test_doctor_refuses_to_report_on_a_tampered_floor_map(
    tmp_path: Path, doctor_path: Path
) -> None:
    host = Host(tmp_path / "host", {"aider": floor("0.60.0")})
    host.set_map(host.map_file.read_text().replace('"0.60.0"', '"0.1.0"'))
    done = host.python("-m", "floorguard", "doctor", PATH=str(doctor_path))
    assert done.returncode == 1
    assert "tampered" in done.stderr
    assert host.chain_records() == []


def test_doctor_reports_a_launcher_as_of_unknown_version_as_the_gate_refuses_it(
    tmp_path: Path,
) -> None:
    """A shell script named aider answering a safe ``--version`` is a launcher: the gate
    refuses to spawn it, so the doctor never shows it ``ok`` (and never probes it)."""
    from probes import sh_script

    doctor_path = tmp_path / "bin"
    ran = tmp_path / "probed"
    sh_script(doctor_path / "aider", f": > '{ran}'\necho 'aider 0.99.0'")
    done = floorctl("doctor", "--json", cwd=REPO, state=tmp_path / "state", PATH=str(doctor_path))
    assert done.returncode == 1, done.stderr
    [aider] = [a for a in json.loads(done.stdout)["adapters"] if a["adapter"] == "aider"]
    assert aider["status"] == "unknown_version", aider
    assert not ran.exists()


def test_doctor_fails_on_a_variable_an_agent_s_settings_give_it_that_loads_code(
    tmp_path: Path,
) -> None:
    bin_dir, home, project = tmp_path / "bin", tmp_path / "home", tmp_path / "project"
    for folder in (bin_dir, home, project):
        folder.mkdir()
    write_script(bin_dir / "claude", "echo '1.0.30 (Claude Code)'")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"env": {"BASH_ENV": "x"}}))
    env = {"PATH": str(bin_dir), "HOME": str(home)}
    done = floorctl("doctor", "--json", cwd=project, state=tmp_path / "state", **env)
    assert done.returncode == 1, done.stderr
    [refused] = json.loads(done.stdout)["mcp_servers"]
    assert (refused["agent"], refused["verdict"]) == ("claude", "refuse"), refused
    assert "BASH_ENV" in refused["reason"] and "settings" in refused["reason"], refused


def test_doctor_lists_each_agents_mcp_servers_and_fails_on_a_refused_one(tmp_path: Path) -> None:
    bin_dir, home, project = tmp_path / "bin", tmp_path / "home", tmp_path / "project"
    for folder in (bin_dir, home, project):
        folder.mkdir()
    write_script(bin_dir / "claude", "echo '1.0.30 (Claude Code)'")
    aider_at(bin_dir / "aider", "0.50.0")  # below its floor, as a server
    declared = project / ".mcp.json"
    declared.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "old": {"command": "aider"},
                    "far": {"type": "http", "url": "https://a.example"},
                }
            }
        )
    )
    env = {"PATH": str(bin_dir), "HOME": str(home)}
    done = floorctl("doctor", "--json", cwd=project, state=tmp_path / "state", **env)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    servers = {s["name"]: s for s in document["mcp_servers"]}
    assert servers["old"] | {"reason": None} == {
        "agent": "claude", "name": "old", "verdict": "refuse", "declared_in": str(declared),
        "at": "mcpServers.old", "command": "aider", "version": "0.50.0", "reason": None,
    }  # fmt: skip
    assert "below the floor 0.60.0" in servers["old"]["reason"]
    assert servers["far"]["verdict"] == "remote"
    assert "claude's MCP server old (refused)" in done.stderr
    table = floorctl("doctor", cwd=project, state=tmp_path / "state", **env).stdout
    assert f"  claude: old (aider 0.50.0) refuse, {declared} at mcpServers.old: " in table
    sarif = floorctl("doctor", "--format", "sarif", cwd=project, state=tmp_path / "state", **env)
    assert sarif.returncode == 1, sarif.stderr
    [run] = json.loads(sarif.stdout)["runs"]
    [refused] = [r for r in run["results"] if r["ruleId"] == "FG005"]
    assert refused["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == ".mcp.json"
    markdown = floorctl("doctor", "--format", "markdown", cwd=project, state=tmp_path / "state",
                        **env).stdout  # fmt: skip
    [row] = [line for line in markdown.splitlines() if line.startswith("| claude | old |")]
    assert row.startswith("| claude | old | aider | 0.50.0 | refuse | ")
    assert row.endswith(".mcp.json at mcpServers.old |")  # (the path's _ escaped in the cell)
