"""The SARIF and Markdown renderings of the doctor and verify-chain documents, as pure
functions, checked against the official SARIF 2.1.0 JSON Schema (tests/assets/README.md
says where the schema comes from)."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.advisory_maps import entry, extended_module
from helpers.sarif import SCHEMA_FILE, assert_valid_sarif, sarif_validator

from floorguard._commands import doctor, report_formats
from floorguard._maps import active_map

SCHEMA_SHA256 = "ddddcccbf95c7c50c037b5b07eff4140556278ca574ff374db46786b5fce7949"
OASIS_ID = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


def posture(*adapters: tuple[str, str]) -> dict[str, Any]:
    """A ``doctor --json`` document with one adapter per (name, status)."""
    return {
        "receipt_id": "sha256:" + "1" * 64,
        "floor_map_hash": "sha256:" + "2" * 64,
        "adapters": [
            {
                "adapter": name,
                "binary": f"/usr/bin/{name}",
                "version": "1.0.0",
                "detected_by": "probe",
                "floor": "1.0.20",
                "status": status,
                "reason": f"reason for {name}",
                "advisory_id": "BSA-0002" if status in ("below_floor", "affected") else None,
                "waiver_id": "WVR-1" if status == "waived" else None,
                "waiver_days_left": 3 if status == "waived" else None,
            }
            for name, status in adapters
        ],
    }


def proof(proven: bool) -> dict[str, Any]:
    """A ``verify chain --json`` document."""
    return {
        "proven": proven,
        "since": None,
        "until": "2030-01-01T00:00:00Z",
        "records": 5,
        "authenticated_by": "mac",
        "violations": [] if proven else [{"seq": 3, "reason": "permitted aider 0.50.0 | below"}],
        "integrity_errors": [] if proven else [{"seq": None, "reason": "records 0..1 missing"}],
    }


EVERY_STATUS = (
    ("aider", "ok"),
    ("claude", "below_floor"),
    ("codex", "affected"),
    ("gemini", "unknown_version"),
    ("goose", "not_installed"),
    ("gptme", "waived"),
    ("openhands", "ahead_of_last_green"),
)


# --- the schema asset ---------------------------------------------------------------------------


def test_the_schema_asset_is_the_official_sarif_2_1_0_schema_unchanged() -> None:
    data = SCHEMA_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256
    schema = json.loads(data)
    assert schema["id"] == OASIS_ID
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    assert report_formats.SARIF_SCHEMA == OASIS_ID


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda d: d.pop("version"), "'version' is a required property"),
        (lambda d: d.update(version="2.0.0"), "'2.0.0' is not one of ['2.1.0']"),
        (lambda d: d["runs"][0]["results"][0].update(level="fatal"), "'fatal' is not one of"),
        (lambda d: d["runs"][0]["results"][0].pop("message"), "'message' is a required"),
        (lambda d: d["runs"][0]["tool"]["driver"].pop("name"), "'name' is a required property"),
        (lambda d: d["runs"][0]["results"][0].update(ruleId=7), "7 is not of type 'string'"),
        (lambda d: d["runs"][0]["results"][0].update(colour="red"), "Additional properties"),
        (lambda d: d["runs"][0]["invocations"][0].pop("executionSuccessful"), "required"),
    ],
)
def test_the_schema_rejects_a_damaged_log(damage: Any, why: str) -> None:
    document = report_formats.doctor_sarif(posture(("claude", "below_floor")), map_uri="m.py")
    assert_valid_sarif(document)
    damaged = copy.deepcopy(document)
    damage(damaged)
    messages = [e.message for e in sarif_validator().iter_errors(damaged)]
    assert any(why in m for m in messages), messages


# --- doctor -------------------------------------------------------------------------------------


def test_doctor_sarif_has_one_result_per_finding_with_its_rule_and_level() -> None:
    document = report_formats.doctor_sarif(posture(*EVERY_STATUS), map_uri="floor_map.py")
    assert_valid_sarif(document)
    [run] = document["runs"]
    found = {
        r["locations"][0]["logicalLocations"][0]["name"]: (r["ruleId"], r["level"])
        for r in run["results"]
    }
    assert found == {
        "claude": ("FG001", "error"),
        "codex": ("FG002", "error"),
        "gemini": ("FG003", "error"),
        "openhands": ("FG004", "warning"),
    }
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
            "floor_map.py"
        )
    claude = next(r for r in run["results"] if r["ruleId"] == "FG001")
    assert claude["message"]["text"] == "claude 1.0.0 is below_floor: reason for claude"
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["informationUri"]) == (
        "floorguard",
        report_formats.INFORMATION_URI,
    )
    assert driver["version"] == report_formats.__version__
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]


def test_every_physical_location_of_a_doctor_result_has_a_region_with_a_start_line() -> None:
    document = posture(("claude", "below_floor"), ("codex", "unknown_version"))
    located = report_formats.doctor_sarif(document, map_uri="m.py", map_lines={"claude": 19})
    assert_valid_sarif(located)
    regions = {
        r["locations"][0]["logicalLocations"][0]["name"]: r["locations"][0]["physicalLocation"][
            "region"
        ]
        for r in located["runs"][0]["results"]
    }
    # A line that is not known is the file's first: never a location without a region.
    assert regions == {"claude": {"startLine": 19}, "codex": {"startLine": 1}}


def test_entry_lines_are_the_lines_of_the_adapters_keys_in_any_layout() -> None:
    entries = {"aider": entry("PyPI", floor="0.60.0"), "claude": entry("npm", floor="1.0.20")}
    text = "# a host module\n\n" + extended_module(entries)  # pprint's layout, not floorctl's
    lines = active_map.entry_lines(text, "host.py")
    assert set(lines) == {"aider", "claude"}
    for name, line in lines.items():
        assert f"'{name}': " in text.splitlines()[line - 1]


def test_findings_of_one_rule_in_one_file_have_distinct_stable_fingerprints() -> None:
    document = posture(("claude", "below_floor"), ("codex", "below_floor"))
    first = report_formats.doctor_sarif(document, map_uri="m.py")["runs"][0]["results"]
    again = report_formats.doctor_sarif(document, map_uri="m.py")["runs"][0]["results"]
    prints = [r["partialFingerprints"]["floorguardFinding/v1"] for r in first]
    assert len(set(prints)) == 2
    assert prints == [r["partialFingerprints"]["floorguardFinding/v1"] for r in again]


def test_doctor_sarif_of_a_healthy_posture_has_no_results_and_exit_0() -> None:
    document = report_formats.doctor_sarif(posture(("aider", "ok")), map_uri=None)
    assert_valid_sarif(document)
    assert document["runs"][0]["results"] == []
    assert document["runs"][0]["invocations"][0]["exitCode"] == 0


def test_a_status_without_a_rule_is_reported_as_an_error_not_dropped() -> None:
    document = report_formats.doctor_sarif(posture(("aider", "brand_new")), map_uri=None)
    assert_valid_sarif(document)
    [result] = document["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("FG000", "error")


def test_every_doctor_status_has_a_place_in_the_table() -> None:
    # The doctor's status constants (OK = "ok", ...): a new one must join the table.
    statuses = {
        value
        for name, value in vars(doctor).items()
        if name.isupper() and isinstance(value, str) and re.fullmatch(r"[a-z_]+", value)
    }
    assert {"ok", "below_floor", "affected", "unknown_version"} <= statuses
    for status in statuses:
        assert status in report_formats.NO_FINDING or status in report_formats.DOCTOR_RULES, status


def test_rule_ids_are_stable() -> None:
    # A code-scanning service tracks alerts by rule id: changing one is a breaking change.
    assert {r.name: r.id for r in report_formats.ALL_RULES} == {
        "BelowFloor": "FG001",
        "AffectedByAdvisory": "FG002",
        "UnknownVersion": "FG003",
        "AheadOfLastGreen": "FG004",
        "UnclassifiedStatus": "FG000",
        "McpServerRefused": "FG005",
        "SpawnPermittedWhileUnsafe": "FG101",
        "ChainIntegrity": "FG102",
    }


def test_doctor_markdown_is_a_table_of_adapter_installed_floor_status() -> None:
    text = report_formats.doctor_markdown(posture(("aider", "ok"), ("claude", "below_floor")))
    lines = text.splitlines()
    assert lines[0] == "### floorguard doctor: 1 finding(s)"
    assert "| adapter | installed | floor | status |" in lines
    assert "| claude | 1.0.0 | 1.0.20 | below\\_floor (BSA-0002) |" in lines
    assert "| aider | 1.0.0 | 1.0.20 | ok |" in lines


def test_markdown_cells_cannot_break_the_table() -> None:
    document = posture(("aider", "ok"))
    document["adapters"][0]["version"] = "1.0|x\n| forged | row |"
    lines = report_formats.doctor_markdown(document).splitlines()
    rows = [line for line in lines if line.startswith("| ") and "adapter |" not in line]
    assert rows == ["| aider | 1.0\\|x \\| forged \\| row \\| | 1.0.20 | ok |"]


def test_markdown_cells_show_bidi_and_control_characters_as_escapes() -> None:
    document = with_servers(server("x\u202ey\u200bz\x07", "refuse", "/p/.mcp.json"))
    [row] = [
        line
        for line in report_formats.doctor_markdown(document).splitlines()
        if line.startswith("| claude |")
    ]
    assert r"x\\u202ey\\u200bz\\u0007" in row  # (the escape's backslash escaped too)
    assert not any(ord(c) < 32 or c in "\u202e\u200b" for c in row)


def server(name: str | None, verdict: str, declared_in: str | None = None) -> dict[str, Any]:
    """One entry of a ``doctor --json`` document's ``mcp_servers``."""
    return {
        "agent": "claude", "name": name, "verdict": verdict, "declared_in": declared_in,
        "at": None if name is None else f"mcpServers.{name}", "command": "mcp-remote",
        "version": "0.1.15", "reason": f"reason for {name}",
    }  # fmt: skip


def with_servers(*servers: dict[str, Any]) -> dict[str, Any]:
    return {**posture(("aider", "ok")), "mcp_servers": list(servers)}


def test_doctor_sarif_reports_each_refused_mcp_server_in_the_file_declaring_it(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    document = with_servers(
        server("old", "refuse", str(project / ".mcp.json")),
        server(None, "refuse", str(tmp_path / "home" / ".claude.json")),  # unreadable file
        server("new", "permit", str(project / ".mcp.json")),
        server("far", "remote", str(project / ".mcp.json")),
        server("off", "disabled", str(project / ".mcp.json")),
        server("let", "warn_override", str(project / ".mcp.json")),
    )
    sarif = report_formats.doctor_sarif(document, map_uri="m.py", cwd=project)
    assert_valid_sarif(sarif)
    [run] = sarif["runs"]
    found = {
        r["locations"][0]["logicalLocations"][0]["name"]: (
            r["ruleId"],
            r["level"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        )
        for r in run["results"]
    }
    home_file = (tmp_path / "home" / ".claude.json").as_uri()
    assert found == {
        "claude/old": ("FG005", "error", ".mcp.json"),
        "claude/-": ("FG005", "error", home_file),
    }
    old = next(r for r in run["results"] if r["properties"]["name"] == "old")
    assert old["message"]["text"] == (
        "claude's MCP server old (mcp-remote 0.1.15) is refused: reason for old"
    )
    assert old["properties"]["at"] == "mcpServers.old"
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]
    # Without a working directory to be relative to, every file is an absolute file: URI.
    [alone] = report_formats.doctor_sarif(
        with_servers(server("old", "refuse", str(project / ".mcp.json"))), map_uri=None
    )["runs"][0]["results"]
    assert alone["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        (project / ".mcp.json").as_uri()
    )


def test_a_server_verdict_the_renderer_does_not_know_is_a_finding_not_dropped() -> None:
    sarif = report_formats.doctor_sarif(with_servers(server("x", "brand_new")), map_uri=None)
    assert_valid_sarif(sarif)
    [result] = sarif["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("FG005", "error")


def test_servers_that_are_let_run_or_not_judged_are_no_finding() -> None:
    document = with_servers(*(server(v, v) for v in sorted(report_formats.SERVER_NO_FINDING)))
    sarif = report_formats.doctor_sarif(document, map_uri=None)
    assert sarif["runs"][0]["results"] == []
    assert sarif["runs"][0]["invocations"][0]["exitCode"] == 0
    assert report_formats.doctor_markdown(document).startswith(
        "### floorguard doctor: all installed adapters ok\n"
    )


def test_doctor_markdown_lists_each_server_and_counts_a_refused_one_as_a_finding() -> None:
    document = with_servers(
        server("old", "refuse", "/p/.mcp.json"), server("far|x", "remote", "/p/.mcp.json")
    )
    lines = report_formats.doctor_markdown(document).splitlines()
    assert lines[0] == "### floorguard doctor: 1 finding(s)"
    assert "| agent | MCP server | runs | version | verdict | declared in |" in lines
    assert "| claude | old | mcp-remote | 0.1.15 | refuse | /p/.mcp.json at mcpServers.old |" in (
        lines
    )
    assert (
        "| claude | far\\|x | mcp-remote | 0.1.15 | remote | /p/.mcp.json at mcpServers.far\\|x |"
        in lines
    )


# --- verify chain -------------------------------------------------------------------------------


def test_chain_sarif_has_one_error_per_violation_and_integrity_error_and_the_verdict() -> None:
    document = report_formats.chain_sarif(proof(False), slice_uri="slice.jsonl")
    assert_valid_sarif(document)
    [run] = document["runs"]
    assert run["properties"]["verdict"] == "NOT PROVEN"
    assert run["properties"]["proven"] is False
    assert run["invocations"][0]["exitCode"] == 1
    results = [(r["ruleId"], r["level"], r["message"]["text"]) for r in run["results"]]
    assert results == [
        ("FG102", "error", "slice: records 0..1 missing"),
        ("FG101", "error", "seq 3: permitted aider 0.50.0 | below"),
    ]
    violation = run["results"][1]["locations"][0]
    assert violation["physicalLocation"]["artifactLocation"]["uri"] == "slice.jsonl"
    assert violation["logicalLocations"][0]["fullyQualifiedName"] == "slice.jsonl#seq 3"


def test_chain_sarif_of_a_proven_slice_has_no_results() -> None:
    document = report_formats.chain_sarif(proof(True), slice_uri=None)
    assert_valid_sarif(document)
    assert document["runs"][0]["results"] == []
    assert document["runs"][0]["properties"]["verdict"] == "PROVEN"


def test_chain_markdown_says_proven_or_not_and_lists_every_finding() -> None:
    assert report_formats.chain_markdown(proof(True)).startswith(
        "### floorguard verify chain: **PROVEN**\n"
    )
    text = report_formats.chain_markdown(proof(False))
    assert text.startswith("### floorguard verify chain: **NOT PROVEN**\n")
    assert "| - | integrity | records 0..1 missing |" in text
    assert "| 3 | violation | permitted aider 0.50.0 \\| below |" in text


def test_artifact_uri_is_repository_relative_inside_cwd_and_a_file_uri_outside(
    tmp_path: Path,
) -> None:
    assert report_formats.artifact_uri("sub/slice.jsonl", tmp_path) == "sub/slice.jsonl"
    assert (
        report_formats.artifact_uri(tmp_path / "a b.json", tmp_path) == "a%20b.json"
    )  # an RFC 3986 URI reference
    outside = report_formats.artifact_uri("/etc/hosts", tmp_path)
    assert outside == "file:///etc/hosts"
    assert report_formats.artifact_uri("-", tmp_path) is None


def test_render_refuses_a_format_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="xml"):
        report_formats.render("chain", "xml", proof(True), None)


def test_importing_floorguard_does_not_load_the_renderers() -> None:
    code = "import floorguard, sys; print('floorguard._commands.report_formats' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
