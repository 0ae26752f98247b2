"""Every problem ``verify chain`` finds at a line of the slice names the file and the line
(``slice.jsonl line 3: ...``), in both CLIs; a slice read from standard input is named
``<stdin>``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.chain_support import filled_chain
from helpers.cli import floorctl, isolated_env

from floorguard._chain.chain import AuditChain

TOOLS = ("floorguard", "floorctl")


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    chain: AuditChain = filled_chain(tmp_path_factory.mktemp("chain"), 3)
    return [line + "\n" for line in chain.export_lines()]


def verify(
    tool: str, cwd: Path, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    if tool == "floorctl" and stdin is None:
        done = floorctl("verify", "chain", *args, "--unauthenticated", cwd=cwd, state=cwd)
    else:
        command = ["-m", tool, "verify", "chain", *args, "--unauthenticated"]
        raw = subprocess.run(
            [sys.executable, *command], input=stdin, capture_output=True, cwd=cwd,
            env=isolated_env(cwd), timeout=120, check=False,
        )  # fmt: skip
        done = subprocess.CompletedProcess(
            raw.args, raw.returncode, raw.stdout.decode(), raw.stderr.decode()
        )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.startswith("NOT PROVEN"), done.stdout
    return done


BROKEN = [
    ("\n", "blank line"),
    ("[1]\n", "not a JSON object"),
    ("{\n", "not valid JSON"),
    ('{"seq": 1}\n', "missing field(s)"),
    ("\xff\n", "not UTF-8"),
]


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize(("text", "problem"), BROKEN)
def test_a_line_that_is_not_a_record_is_named_by_file_and_line(
    lines: list[str], tmp_path: Path, tool: str, text: str, problem: str
) -> None:
    data = "".join(lines[:2]).encode() + text.encode("latin-1") + lines[2].encode()
    (tmp_path / "slice.jsonl").write_bytes(data)
    out = verify(tool, tmp_path, "slice.jsonl").stdout
    assert f"slice.jsonl line 3: {problem}" in out, out


@pytest.mark.parametrize("tool", TOOLS)
def test_a_seq_that_is_not_an_integer_is_named_by_file_and_line(
    lines: list[str], tmp_path: Path, tool: str
) -> None:
    edited = [lines[0], lines[1].replace('"seq":1,', '"seq":1.0,'), lines[2]]
    (tmp_path / "slice.jsonl").write_text("".join(edited))
    out = verify(tool, tmp_path, "slice.jsonl").stdout
    assert "slice.jsonl line 2: seq is not a non-negative integer" in out, out


def test_a_slice_on_standard_input_is_named_stdin(lines: list[str], tmp_path: Path) -> None:
    data = "".join([lines[0], "\n", *lines[1:]]).encode()
    out = verify("floorguard", tmp_path, "-", stdin=data).stdout
    assert "<stdin> line 2: blank line" in out, out
