"""``--format text|json|sarif|markdown`` on the real commands: ``doctor`` and ``verify chain``
of both CLIs print the same bytes and valid SARIF 2.1.0; other commands refuse sarif and
markdown as usage errors; ``--json`` is ``--format json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env
from helpers.proof_support import (
    MAP_V1,
    SPAWN,
    UPDATE,
    build,
    spawn_receipt,
    update_receipt,
)
from helpers.sarif import assert_valid_sarif

REPO = Path(__file__).resolve().parents[2]
FORMATTED = ("json", "sarif", "markdown")


def guard(
    cwd: Path, state: Path, *args: str | Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        cwd=cwd,
        env=isolated_env(state, **extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ctl(
    cwd: Path, state: Path, *args: str | Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=cwd, state=state, **extra)


TOOLS = {"floorctl": ctl, "floorguard": guard}


# --- doctor -------------------------------------------------------------------------------------


def without_receipt(text: str, receipt_id: str) -> str:
    """Each doctor run seals a new posture receipt: its id is the one expected difference."""
    assert receipt_id in text
    return text.replace(receipt_id, "RECEIPT")


def test_doctor_sarif_is_valid_and_has_one_error_per_unsafe_adapter(
    tmp_path: Path, doctor_path: Path
) -> None:
    done = ctl(REPO, tmp_path / "state", "doctor", "--format", "sarif", PATH=str(doctor_path))
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert_valid_sarif(document)
    [run] = document["runs"]
    results = {
        r["locations"][0]["logicalLocations"][0]["name"]: (r["ruleId"], r["level"])
        for r in run["results"]
    }
    assert results == {"claude": ("FG001", "error"), "codex": ("FG003", "error")}
    for result in run["results"]:
        location = result["locations"][0]["physicalLocation"]["artifactLocation"]
        assert location["uri"] == "generated/floorguard/floor_map.py"
    assert run["tool"]["driver"]["name"] == "floorguard"
    assert done.stderr.startswith("floorctl: error: not ok or waived: claude (below_floor)")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_each_doctor_sarif_result_points_at_the_line_of_its_adapters_entry(
    tool: str, tmp_path: Path, doctor_path: Path
) -> None:
    """A region with a startLine (Microsoft's validator warns SARIF2017 without one): the
    line of the adapter's key in the floor-map module in force."""
    done = TOOLS[tool](REPO, tmp_path / "state", "doctor", "--format", "sarif",
                       PATH=str(doctor_path))  # fmt: skip
    assert done.returncode == 1, done.stderr
    [run] = json.loads(done.stdout)["runs"]
    module = (REPO / "generated" / "floorguard" / "floor_map.py").read_text().splitlines()
    assert len(run["results"]) == 2
    for result in run["results"]:
        [location] = result["locations"]
        name = location["logicalLocations"][0]["name"]
        line = location["physicalLocation"]["region"]["startLine"]
        assert module[line - 1].strip() == f'"{name}": {{', (name, line)


def test_both_doctors_print_the_same_sarif_and_markdown(tmp_path: Path, doctor_path: Path) -> None:
    for output_format in ("sarif", "markdown"):
        outputs = []
        for tool in TOOLS.values():
            state = tmp_path / f"state-{len(outputs)}-{output_format}"
            done = tool(REPO, state, "doctor", "--format", output_format, PATH=str(doctor_path))
            assert done.returncode == 1, done.stderr
            exported = ctl(REPO, state, "chain", "export")
            receipt_id = json.loads(exported.stdout.splitlines()[-1])["receipt_id"]
            outputs.append(without_receipt(done.stdout, receipt_id))
        assert outputs[0] == outputs[1], output_format


def test_doctor_markdown_is_a_table_for_a_pull_request_comment(
    tmp_path: Path, doctor_path: Path
) -> None:
    done = ctl(REPO, tmp_path / "state", "doctor", "--format", "markdown", PATH=str(doctor_path))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0] == "### floorguard doctor: 2 finding(s)"
    assert "| adapter | installed | floor | status |" in lines
    assert any(line.startswith("| claude | 1.0.3 | ") for line in lines), lines
    assert "| gemini | - | " in done.stdout


# --- verify chain -------------------------------------------------------------------------------


@pytest.fixture
def chain_slice(tmp_path: Path) -> tuple[Path, Path]:
    """A slice whose seq 1 is a spawn allowed below the floor (a warn override), its key."""
    built = build(
        tmp_path / "chain",
        [
            (UPDATE, update_receipt(MAP_V1)),
            (SPAWN, spawn_receipt("aider", "0.50.0", "warn_override")),
            (SPAWN, spawn_receipt("aider", "0.61.0", "permit")),
        ],
    )
    (tmp_path / "slice.jsonl").write_text("".join(built.lines()))
    return tmp_path, tmp_path / "chain" / "chain.key"


@pytest.mark.parametrize("output_format", FORMATTED)
def test_both_verifiers_print_the_same_bytes_in_every_format(
    chain_slice: tuple[Path, Path], output_format: str
) -> None:
    root, key = chain_slice
    args = ("verify", "chain", "slice.jsonl", "--key-file", key, "--format", output_format)
    outputs = [tool(root, root / "state", *args) for tool in TOOLS.values()]
    assert [o.returncode for o in outputs] == [1, 1], [o.stderr for o in outputs]
    assert outputs[0].stdout == outputs[1].stdout
    assert outputs[0].stdout.endswith("\n") and outputs[0].stdout.count("\n\n\n") == 0


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_verify_chain_sarif_locates_the_violation_in_the_slice_by_seq(
    chain_slice: tuple[Path, Path], tool: str
) -> None:
    root, key = chain_slice
    done = TOOLS[tool](
        root, root / "state", "verify", "chain", "slice.jsonl", "--key-file", key,
        "--format", "sarif",
    )  # fmt: skip
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert_valid_sarif(document)
    [run] = document["runs"]
    assert run["properties"]["verdict"] == "NOT PROVEN"
    [result] = run["results"]
    assert (result["ruleId"], result["level"]) == ("FG101", "error")
    assert result["message"]["text"].startswith("seq 1: warn_override: 'aider' '0.50.0'")
    location = result["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "slice.jsonl"
    assert location["logicalLocations"][0]["name"] == "seq 1"


def test_verify_chain_sarif_of_a_proven_window_has_no_results(
    chain_slice: tuple[Path, Path],
) -> None:
    root, key = chain_slice
    records = [json.loads(line) for line in (root / "slice.jsonl").read_text().splitlines()]
    done = ctl(
        root, root / "state", "verify", "chain", "slice.jsonl", "--key-file", key,
        "--since", records[2]["ts"], "--format", "sarif",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert_valid_sarif(document)
    assert document["runs"][0]["results"] == []
    assert document["runs"][0]["properties"]["verdict"] == "PROVEN"


def test_verify_chain_sarif_reports_a_tampered_record_as_an_integrity_error(
    chain_slice: tuple[Path, Path],
) -> None:
    root, key = chain_slice
    lines = (root / "slice.jsonl").read_text().splitlines(keepends=True)
    lines[2] = lines[2].replace('"0.61.0"', '"0.62.0"')
    (root / "slice.jsonl").write_text("".join(lines))
    done = guard(
        root, root / "state", "verify", "chain", "slice.jsonl", "--key-file", key,
        "--format", "sarif",
    )  # fmt: skip
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert_valid_sarif(document)
    rules = {(r["ruleId"], r["properties"]["seq"]) for r in document["runs"][0]["results"]}
    assert ("FG102", 2) in rules


def test_verify_chain_markdown_says_not_proven_and_lists_the_violation(
    chain_slice: tuple[Path, Path],
) -> None:
    root, key = chain_slice
    done = ctl(
        root, root / "state", "verify", "chain", "slice.jsonl", "--key-file", key,
        "--format", "markdown",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.startswith("### floorguard verify chain: **NOT PROVEN**\n")
    assert "| 1 | violation | warn\\_override: " in done.stdout


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_json_is_an_alias_of_format_json(chain_slice: tuple[Path, Path], tool: str) -> None:
    root, key = chain_slice
    base = ("verify", "chain", "slice.jsonl", "--key-file", key)
    alias = TOOLS[tool](root, root / "state", *base, "--json")
    named = TOOLS[tool](root, root / "state", *base, "--format", "json")
    assert alias.stdout == named.stdout and json.loads(alias.stdout)["proven"] is False
    text = TOOLS[tool](root, root / "state", *base)
    assert text.stdout.startswith("NOT PROVEN\n")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_json_with_another_format_is_a_usage_error(
    chain_slice: tuple[Path, Path], tool: str
) -> None:
    root, _ = chain_slice
    done = TOOLS[tool](
        root, root / "state", "verify", "chain", "slice.jsonl", "--json", "--format", "sarif"
    )
    assert done.returncode == 2
    assert "--json conflicts with --format sarif" in done.stderr
    assert done.stdout == ""


# --- commands without sarif or markdown -----------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("refresh", "--feed", "feeds/example.v1.json"),
        ("validate", "feeds/example.v1.json"),
        ("canary", "last-green"),
        ("keygen", "--out", "keys"),
    ],
)
@pytest.mark.parametrize("output_format", ["sarif", "markdown"])
def test_sarif_and_markdown_are_usage_errors_elsewhere(
    tmp_path: Path, args: tuple[str, ...], output_format: str
) -> None:
    done = ctl(REPO, tmp_path / "state", *args, "--format", output_format)
    assert done.returncode == 2
    command = " ".join(a for a in args if not a.startswith(("-", "feeds/", "keys")))
    assert done.stderr == (
        f"floorctl: error: Invalid value for '--format': '{output_format}' is not one of "
        f"'text', 'json' (see 'floorctl {command} --help')\n"
    )
    assert not (REPO / "keys").exists()


def test_format_json_works_wherever_json_does(tmp_path: Path) -> None:
    done = ctl(REPO, tmp_path / "state", "validate", "feeds/example.v1.json", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["valid"] is True
    text = ctl(REPO, tmp_path / "state", "validate", "feeds/example.v1.json", "--format", "text")
    assert text.stdout.startswith("ok  feeds/example.v1.json")


@pytest.mark.parametrize("tool", sorted(TOOLS))
@pytest.mark.parametrize("output_format", ["sarif", "markdown"])
def test_a_failed_verification_prints_no_report_that_could_pass_for_a_clean_one(
    tmp_path: Path, tool: str, output_format: str
) -> None:
    done = TOOLS[tool](
        tmp_path, tmp_path / "state", "verify", "chain", "missing.jsonl", "--unauthenticated",
        "--format", output_format,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert "missing.jsonl" in done.stderr
