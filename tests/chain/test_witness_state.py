"""`floorctl witness cosign` keeps its state (the last size it cosigned) safe: a dangling link,
a folder others can write, a concurrent cosign or a corrupt file is refused, never a reset."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from helpers.tlog_support import _same, ctl, name_of, witnessed

pytestmark = pytest.mark.slow


def _cosign(log: Path, state: Path, old: str, new: str, proof: str) -> tuple[int, str]:
    done = ctl(log, "witness", "cosign", "--old", old, "--new", new, "--proof", proof,
               "--key", "w1/signing.key", "--pubkey", "keys/signing.pub",
               "--state", str(state))  # fmt: skip
    return done.returncode, done.stderr


def test_a_dangling_link_as_state_file_does_not_reset_the_witness(
    log: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    witnessed(log, state)
    file = state / f"{name_of(log)}.json"
    file.unlink()
    file.symlink_to(tmp_path / "nowhere.json")
    code, err = _cosign(log, state, "one.cp", "two.cp", "c12.json")
    assert code == 1 and "state" in err  # not silently treated as a first cosigning


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_state_folder_others_can_write_is_refused(log: Path, tmp_path: Path, mode: int) -> None:
    # Anyone who can delete the state file makes the witness forget and cosign a fork.
    state = tmp_path / "state"
    witnessed(log, state)
    os.chmod(state, mode)
    code, err = _cosign(log, state, "two.cp", "two.cp", _same(log))
    assert code == 1 and "writable by others" in err and str(state) in err
    os.chmod(state, 0o700)
    os.chmod(state / f"{name_of(log)}.json", mode & 0o666)
    code, err = _cosign(log, state, "two.cp", "two.cp", _same(log))
    assert code == 1 and "writable by others" in err and str(state) in err


def test_a_cosign_while_another_holds_the_state_is_refused_not_raced(
    log: Path, tmp_path: Path
) -> None:
    # Two cosigns at once could both read size 5 and cosign two forks of size 11.
    state = tmp_path / "state"
    witnessed(log, state)
    with open(state / ".lock", "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, err = _cosign(log, state, "two.cp", "two.cp", _same(log))
    assert code == 1 and "in use by another" in err
    ok_code, _ = _cosign(log, state, "two.cp", "two.cp", "c22.json")
    assert ok_code == 0


@pytest.mark.parametrize(
    "content", [b"", b'{"origin": "floorguard/x", "size": 5', b'{"origin": 1}', b"\xff"]
)
def test_a_corrupt_state_file_is_refused_and_left_as_it_was(
    log: Path, tmp_path: Path, content: bytes
) -> None:
    state = tmp_path / "state"
    witnessed(log, state)
    file = state / f"{name_of(log)}.json"
    file.write_bytes(content)
    code, err = _cosign(log, state, "one.cp", "two.cp", "c12.json")
    assert code == 1 and str(file) in err and "Traceback" not in err
    assert file.read_bytes() == content
