"""SARIF and Markdown reports of a chain that is NOT PROVEN, or whose names are hostile: a
SARIF log always carries the result, a requested name adds no row, link or HTML, a slice
name is percent-encoded in a location, and the doctor's SARIF run keeps its exit code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env
from helpers.proof_support import MAP_V1, SPAWN, UPDATE, build, spawn_receipt, update_receipt
from helpers.sarif import assert_valid_sarif
from probes import aider_at

pytestmark = pytest.mark.attack


def guard(cwd: Path, state: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        cwd=cwd,
        env=isolated_env(state),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ctl(cwd: Path, state: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=cwd, state=state)


TOOLS = {"floorctl": ctl, "floorguard": guard}


@pytest.fixture
def permitted_slice(tmp_path: Path) -> Path:
    built = build(
        tmp_path / "chain",
        [
            (UPDATE, update_receipt(MAP_V1)),
            (SPAWN, spawn_receipt("aider", "0.61.0", "permit")),
            (SPAWN, spawn_receipt("aider", "0.62.0", "permit")),
        ],
    )
    (tmp_path / "slice.jsonl").write_text("".join(built.lines()))
    (tmp_path / "tail.jsonl").write_text("".join(built.lines()[1:]))
    return tmp_path


@pytest.mark.parametrize(
    ("slice_name", "extra", "said"),
    [
        ("slice.jsonl", [], "unauthenticated"),
        ("tail.jsonl", ["--key-file", "chain/chain.key"], "missing"),
    ],
    ids=["no-key", "missing-genesis"],
)
def test_a_not_proven_chain_never_yields_a_sarif_log_without_results(
    slice_name: str, extra: list[str], said: str, permitted_slice: Path
) -> None:
    # Code scanning reads a log with no results as "all clear": NOT PROVEN must carry one.
    outputs = []
    for run in TOOLS.values():
        done = run(permitted_slice, permitted_slice / "state", "verify", "chain", slice_name,
                   *extra, "--format", "sarif")  # fmt: skip
        assert done.returncode == 1, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    log = json.loads(outputs[0])
    assert_valid_sarif(log)
    run_ = log["runs"][0]
    assert run_["properties"]["verdict"] == "NOT PROVEN"
    assert run_["invocations"][0]["exitCode"] == 1
    assert run_["results"]
    assert all(r["level"] == "error" for r in run_["results"])
    assert said in json.dumps(run_["results"])


def test_a_hostile_requested_name_adds_no_row_link_or_html_to_the_markdown(
    tmp_path: Path,
) -> None:
    hostile = "x | 0 | ok |\n| [pwn](javascript:alert(1)) <img src=x> `code`"
    receipt = spawn_receipt("aider", "0.50.0", "permit")  # below the floor: a violation
    receipt["requested"] = hostile
    built = build(tmp_path / "chain", [(UPDATE, update_receipt(MAP_V1)), (SPAWN, receipt)])
    (tmp_path / "slice.jsonl").write_text("".join(built.lines()))
    for run in TOOLS.values():
        done = run(tmp_path, tmp_path / "state", "verify", "chain", "slice.jsonl",
                   "--key-file", "chain/chain.key", "--format", "markdown")  # fmt: skip
        assert done.returncode == 1, done.stderr
        rows = [line for line in done.stdout.splitlines() if line.startswith("|")]
        assert len(rows) == 3, done.stdout  # header, rule, the one finding
        finding = rows[2]
        # Every | inside the cell is escaped: the row keeps exactly its 4 cell borders.
        assert finding.replace("\\|", "").count("|") == 4, finding
        # No link, tag or code span survives unescaped.
        assert re.search(r"(?<!\\)[\[\]<>`]", finding) is None, finding


# --- doctor: ahead_of_last_green in SARIF -------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["warning", "strict"])
def test_doctor_sarif_exit_code_is_the_doctors_own_for_a_warning(
    strict: bool, tmp_path: Path
) -> None:
    # invocations[0].exitCode is the doctor's: a log whose doctor exited 0
    # (ahead_of_last_green is a warning) must not claim a failed run with 1.
    state = tmp_path / "state"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    aider_at(bin_dir / "aider", "0.90.0")
    done = ctl(tmp_path, state, "canary", "record", "--adapter", "aider", "--version", "0.86.0",
               "--result", "pass")  # fmt: skip
    assert done.returncode == 0, done.stderr
    path = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    outputs = []
    for program in ("floorctl", "floorguard"):
        command = [sys.executable, "-m", program, "doctor", "--format", "sarif"]
        done = subprocess.run([*command, *(["--strict"] if strict else [])],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env=isolated_env(state, PATH=path), check=False)  # fmt: skip
        assert done.returncode == (1 if strict else 0), done.stderr
        log = json.loads(done.stdout)
        assert_valid_sarif(log)
        run_ = log["runs"][0]
        assert [r["ruleId"] for r in run_["results"]] == ["FG004"]
        assert run_["invocations"][0]["exitCode"] == done.returncode
        outputs.append(run_["invocations"])
    assert outputs[0] == outputs[1]


# --- a slice's name in a SARIF location -----------------------------------------------------------


def test_a_slice_name_with_uri_delimiters_is_percent_encoded_in_the_sarif_location(
    permitted_slice: Path,
) -> None:
    # Taken as is, "slice #1?.jsonl" reads as "slice " and a fragment to a code-scanning
    # service, pointing the alert at another (or no) file.
    name = "slice #1?%.jsonl"
    (permitted_slice / name).write_bytes((permitted_slice / "slice.jsonl").read_bytes())
    outputs = []
    for run in TOOLS.values():
        done = run(permitted_slice, permitted_slice / "state", "verify", "chain", name,
                   "--format", "sarif")  # fmt: skip
        assert done.returncode == 1, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    result = json.loads(outputs[0])["runs"][0]["results"][0]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "slice%20%231%3F%25.jsonl"
    assert urllib.parse.unquote(uri) == name
