"""Option values are read strictly, and alike by floorctl and ``python -m floorguard``.

A whole number is ASCII digits (Python's ``int()`` also takes ``٣``, ``1_0`` and `` 3``,
which no timestamp option takes either), and a folder option names a folder: anything else
is a usage error (exit 2) naming the option, before anything is read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env

NOT_WHOLE_NUMBERS = ["٣", "1_0", " 3", "+3", "3 ", "0x3", "３"]


def _floorguard(args: list[str], state: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *args],
        env=isolated_env(state), cwd=cwd, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("value", NOT_WHOLE_NUMBERS)
@pytest.mark.parametrize(
    "command",
    [
        ["chain", "prove", "--seq"],
        ["verify", "inclusion", "proof.json", "--checkpoint", "cp", "--pubkey", "k", "--witnesses"],
        ["verify", "chain", "slice.jsonl", "--witnesses"],
    ],
    ids=["chain-prove-seq", "verify-inclusion-witnesses", "verify-chain-witnesses"],
)
def test_a_whole_number_in_other_than_ascii_digits_is_a_usage_error_of_floorctl(
    tmp_path: Path, command: list[str], value: str
) -> None:
    for name in ("proof.json", "cp", "k", "slice.jsonl"):
        (tmp_path / name).write_text("x\n")
    done = floorctl(*command, value, cwd=tmp_path, state=tmp_path / "state")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert command[-1] in done.stderr and "whole number" in done.stderr


@pytest.mark.parametrize("value", NOT_WHOLE_NUMBERS)
def test_a_whole_number_in_other_than_ascii_digits_is_a_usage_error_of_floorguard(
    tmp_path: Path, value: str
) -> None:
    (tmp_path / "slice.jsonl").write_text("x\n")
    done = _floorguard(
        ["verify", "chain", "slice.jsonl", "--witnesses", value], tmp_path / "state", tmp_path
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--witnesses" in done.stderr and "whole number" in done.stderr


def test_ascii_digits_are_read_as_the_number_they_spell(tmp_path: Path) -> None:
    (tmp_path / "slice.jsonl").write_text("x\n")
    for run in (
        lambda args: floorctl(*args, cwd=tmp_path, state=tmp_path / "state"),
        lambda args: _floorguard(args, tmp_path / "state", tmp_path),
    ):
        done = run(["verify", "chain", "slice.jsonl", "--witnesses", "02"])
        assert done.returncode == 2
        assert "--witnesses 2 needs at least that many --witness-key" in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "file", "empty", "empty-beside-a-folder"])
def test_maps_must_name_a_folder_in_both_clis(tmp_path: Path, kind: str) -> None:
    (tmp_path / "slice.jsonl").write_text("\n")
    not_a_folder = tmp_path / "maps"
    if kind == "fifo":
        os.mkfifo(not_a_folder)
    elif kind == "file":
        not_a_folder.write_text("{}")
    else:
        (tmp_path / "real").mkdir()
    given = {"empty": [""], "empty-beside-a-folder": ["real", "--maps", ""]}.get(kind, ["maps"])
    args = ["verify", "chain", "slice.jsonl", "--maps", *given]
    by_floorctl = floorctl(*args, cwd=tmp_path, state=tmp_path / "state")
    by_floorguard = _floorguard(args, tmp_path / "state", tmp_path)
    for done in (by_floorctl, by_floorguard):
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert "--maps" in done.stderr and "PROVEN" not in done.stdout
