"""Option values are read strictly, and alike by floorctl and ``python -m floorguard``.

A whole number is ASCII digits (Python's ``int()`` also takes ``٣``, ``1_0`` and `` 3``,
which no timestamp option takes either), and a folder option names a folder: anything else
is a usage error (exit 2) naming the option, before anything is read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env

NOT_WHOLE_NUMBERS = ["٣", "1_0", " 3", "+3", "3 ", "0x3", "３", "-0", "-00"]


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


# --- an empty path --------------------------------------------------------------------------

EMPTY_PATHS = [
    ["keygen", "--out", ""],
    ["init", "--module", ""],
    ["chain", "export", "--out", ""],
    ["refresh", "--module", "", "--feed", "feed.json"],
    ["refresh", "--module", "floor_map.py", "--feed", ""],
    ["verify", "receipt", ""],
    ["verify", "chain", ""],
]


@pytest.mark.parametrize("args", EMPTY_PATHS, ids=lambda args: "-".join(a or "''" for a in args))
def test_an_empty_path_is_a_usage_error_that_writes_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    """``''`` names no file: read as the working directory, ``keygen --out ''`` wrote its keys
    there and ``init --module ''`` refused the folder as an existing module."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "feed.json").write_text('{"schema_version": 1, "adapters": {}}')
    before = sorted(os.listdir(work))
    done = floorctl(*args, cwd=work, state=tmp_path / "state")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "empty" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert sorted(os.listdir(work)) == before


def _commands(group: object, ctx: object) -> Iterator[tuple[str, object]]:
    import click

    assert isinstance(group, click.Group) and isinstance(ctx, click.Context)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield name, command
        if isinstance(command, click.Group):
            for inner, found in _commands(command, click.Context(command, parent=ctx)):
                yield f"{name} {inner}", found


def test_every_path_option_and_argument_of_floorctl_refuses_an_empty_value() -> None:
    """Every path parameter, including those of commands added later, is of the type that
    refuses ``''`` (the subprocess test above tries a few for real)."""
    import click

    from floorctl.cli import cli
    from floorctl.commands._values import GivenPath

    paths = [
        (name, param.name)
        for name, command in _commands(cli, click.Context(cli))
        for param in command.params  # type: ignore[attr-defined]
        if isinstance(param.type, click.Path)
    ]
    assert len(paths) >= 40, paths  # (the walk reached the lazily loaded commands)
    loose = [
        (name, param.name)
        for name, command in _commands(cli, click.Context(cli))
        for param in command.params  # type: ignore[attr-defined]
        if isinstance(param.type, click.Path) and not isinstance(param.type, GivenPath)
    ]
    assert loose == []
