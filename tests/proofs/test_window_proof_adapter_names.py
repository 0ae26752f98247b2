"""``verify chain`` re-judges a spawn record only under a name the gate could have written:
an adapter name outside the floor map's name pattern fails that record, never passes as
untracked. Through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import isolated_env
from helpers.proof_support import MAP_V1, SPAWN, UPDATE, build, spawn_receipt, update_receipt


def verify_chain(
    tmp_path: Path, receipts: list[tuple[str, Any]]
) -> subprocess.CompletedProcess[str]:
    built = build(tmp_path / "chain", receipts)
    slice_file = tmp_path / "slice.jsonl"
    slice_file.write_text("".join(built.lines()))
    return subprocess.run(
        [sys.executable, "-m", "floorguard", "verify", "chain", str(slice_file),
         "--key-file", str(built.folder / "chain.key")],
        capture_output=True, text=True, cwd=tmp_path, env=isolated_env(tmp_path),
        timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["AIDER", "-aider", "ai der", "a" * 65, ""])
@pytest.mark.parametrize("verdict", ["untracked", "permit", "warn_override"])
def test_a_spawn_record_under_an_invalid_adapter_name_fails_naming_the_record_and_the_name(
    tmp_path: Path, name: str, verdict: str
) -> None:
    done = verify_chain(
        tmp_path, [(UPDATE, update_receipt(MAP_V1)), (SPAWN, spawn_receipt(name, "1.0.0", verdict))]
    )
    assert done.returncode == 1, done.stdout
    assert done.stdout.startswith("NOT PROVEN")
    assert (
        f"seq 1: violation: the spawn record names the adapter {name!r}, not a valid adapter "
        "name ([a-z0-9][a-z0-9._-]{0,63}): the gate refuses such a name, yet the record says "
        f"{verdict!r}\n"
    ) in done.stdout


def test_a_refusal_under_an_invalid_name_is_what_the_gate_writes_and_stays_proven(
    tmp_path: Path,
) -> None:
    # The gate refuses an invalid name and records that refusal: a refusal is never a violation.
    done = verify_chain(
        tmp_path,
        [(UPDATE, update_receipt(MAP_V1)), (SPAWN, spawn_receipt("AIDER", None, "refuse"))],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PROVEN")


def test_a_valid_untracked_name_still_proves(tmp_path: Path) -> None:
    done = verify_chain(
        tmp_path,
        [
            (UPDATE, update_receipt(MAP_V1)),
            (SPAWN, spawn_receipt("goose.ai_x-1", "1.0.0", "untracked", floor=None)),
        ],
    )
    assert done.returncode == 0, done.stdout + done.stderr


def spawn_requested(requested: object, verdict: str) -> dict[str, Any]:
    receipt = spawn_receipt("aider", "0.61.0", verdict)
    receipt["requested"] = requested
    return receipt


@pytest.mark.parametrize("requested", ["AIDER", "../aider", "", 7, None, ["aider"]])
@pytest.mark.parametrize("verdict", ["permit", "untracked", "warn_override"])
def test_an_allowed_spawn_record_whose_requested_name_the_gate_refuses_fails(
    tmp_path: Path, requested: object, verdict: str
) -> None:
    # The gate refuses a requested name outside the pattern before judging anything, so an
    # allowed decision asked for under one was not the gate's.
    done = verify_chain(
        tmp_path, [(UPDATE, update_receipt(MAP_V1)), (SPAWN, spawn_requested(requested, verdict))]
    )
    assert done.returncode == 1, done.stdout
    assert done.stdout.startswith("NOT PROVEN")
    assert (
        f"seq 1: violation: the spawn record says it was requested as {requested!r}, not a "
        "valid adapter name ([a-z0-9][a-z0-9._-]{0,63}): the gate refuses such a name, yet "
        f"the record says {verdict!r}\n"
    ) in done.stdout


def test_a_refusal_requested_under_an_invalid_name_stays_proven(tmp_path: Path) -> None:
    done = verify_chain(
        tmp_path, [(UPDATE, update_receipt(MAP_V1)), (SPAWN, spawn_requested("AIDER", "refuse"))]
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("requested", ["aider", "codey"])
def test_an_allowed_spawn_requested_under_a_valid_name_still_proves(
    tmp_path: Path, requested: str
) -> None:
    done = verify_chain(
        tmp_path, [(UPDATE, update_receipt(MAP_V1)), (SPAWN, spawn_requested(requested, "permit"))]
    )
    assert done.returncode == 0, done.stdout + done.stderr
