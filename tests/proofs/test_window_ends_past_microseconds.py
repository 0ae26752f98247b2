"""A window's ends given with more than six fractional digits: the chain's stamps are in
microseconds, so ``--since`` rounds up to the next one when a digit past the sixth is not
zero (cut there, a start between two stamps took in the earlier one) and ``--until`` is cut
(which keeps a stamp after it out); both CLIs alike."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import floorctl, isolated_env


@pytest.fixture
def slice_file(tmp_path: Path) -> Path:
    env = isolated_env(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "-c", "import floorguard; floorguard.preflight('aider', version='9.0.0')"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = tmp_path / "slice.jsonl"
    exported = floorctl("chain", "export", "--out", out, cwd=tmp_path, state=tmp_path / "state")
    assert exported.returncode == 0, exported.stderr
    return out


def _both_clis(tmp_path: Path, args: list[str]) -> list[subprocess.CompletedProcess[str]]:
    """``args`` run by floorctl and by ``python -m floorguard``, in the same state."""
    by_floorguard = subprocess.run(
        [sys.executable, "-m", "floorguard", *args], env=isolated_env(tmp_path / "state"),
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return [floorctl(*args, cwd=tmp_path, state=tmp_path / "state"), by_floorguard]


CASES = {
    "a digit past the sixth rounds the start up": ("2026-01-02T03:04:05.1234561Z", "--since",
                                                   "2026-01-02T03:04:05.123457Z"),
    "zeros past the sixth change nothing": ("2026-01-02T03:04:05.123456000Z", "--since",
                                            "2026-01-02T03:04:05.123456Z"),
    "the last microsecond of a second carries": ("2026-01-02T03:04:05.9999991Z", "--since",
                                                 "2026-01-02T03:04:06.000000Z"),
    "the end is cut": ("2026-01-02T03:04:05.1234569Z", "--until",
                       "2026-01-02T03:04:05.123456Z"),
}  # fmt: skip


@pytest.mark.parametrize("given, option, taken", CASES.values(), ids=CASES.keys())
def test_a_window_end_past_microseconds_is_taken_on_the_safe_side(
    slice_file: Path, tmp_path: Path, given: str, option: str, taken: str
) -> None:
    key = next((tmp_path / "state").rglob("chain.key"))
    args = ["verify", "chain", str(slice_file), "--key-file", str(key), option, given, "--json"]
    for done in _both_clis(tmp_path, args):
        assert done.returncode in (0, 1), done.stderr
        assert json.loads(done.stdout)[option[2:]] == taken, done.stdout


def test_a_start_rounded_past_the_last_time_held_is_a_usage_error(
    slice_file: Path, tmp_path: Path
) -> None:
    args = ["verify", "chain", str(slice_file), "--since", "9999-12-31T23:59:59.9999999Z"]
    for done in _both_clis(tmp_path, args):
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "range" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "since, until",
    [("2026-01-02T03:04:05.0000051Z", "2026-01-02T03:04:05.0000059Z"),
     ("2026-01-02T03:04:05.0000059Z", "2026-01-02T03:04:05.0000051Z")],
    ids=["in-order", "reversed"],
)  # fmt: skip
def test_a_window_inside_one_microsecond_is_refused_for_what_it_is(
    slice_file: Path, tmp_path: Path, since: str, until: str
) -> None:
    """Rounded (--since up, --until down) the window is empty in either order: the refusal
    says so, not that the start typed first is later than the end."""
    args = ["verify", "chain", str(slice_file), "--since", since, "--until", until]
    exported = floorctl("chain", "export", "--since", since, "--until", until, cwd=tmp_path,
                        state=tmp_path / "state")  # fmt: skip
    for done in [*_both_clis(tmp_path, args), exported]:
        assert done.returncode == 2, done.stderr
        assert "microsecond" in done.stderr and "no record's time" in done.stderr, done.stderr
        assert "is later than" not in done.stderr, done.stderr


def test_a_window_reversed_by_more_than_a_microsecond_says_the_start_is_later(
    slice_file: Path, tmp_path: Path
) -> None:
    args = ["verify", "chain", str(slice_file), "--since", "2026-01-02T03:04:05.000007Z",
            "--until", "2026-01-02T03:04:05.000005Z"]  # fmt: skip
    for done in _both_clis(tmp_path, args):
        assert done.returncode == 2, done.stderr
        assert "--since is later than --until" in done.stderr, done.stderr
