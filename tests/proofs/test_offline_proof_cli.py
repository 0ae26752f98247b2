"""The offline proof end to end: real preflights, ``floorctl chain export --checkpoint-out``,
``floorctl chain checkpoint``, and both verifiers, each run as a real command."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import copy_host, floorctl, isolated_env

FLOORGUARD = [sys.executable, "-m", "floorguard"]
BUILTIN_MAPS = Path(__file__).resolve().parents[2] / "generated" / "floorguard" / "maps"


def preflight(root: Path, version: str, *, policy: str = "") -> None:
    """One real spawn decision through floorguard.preflight, recorded in the chain."""
    code = (
        "import floorguard, sys\n"
        "try:\n"
        f"    floorguard.preflight('aider', version={version!r})\n"
        "except floorguard.SpawnRefused:\n"
        "    pass\n"
    )
    extra = {"FLOORGUARD_ADAPTER_FLOOR_POLICY": policy} if policy else {}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        env=isolated_env(root / "state", **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def ctl(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=root, state=root / "state")


def guard(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FLOORGUARD, *map(str, args)],
        cwd=root,
        env=isolated_env(root / "state"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


TOOLS = {"floorctl": ctl, "floorguard": guard}


@pytest.fixture(scope="module")
def three_decisions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signing key and a chain of three real preflight decisions, made once."""
    made = tmp_path_factory.mktemp("three-decisions")
    assert ctl(made, "keygen", "--out", "keys").returncode == 0
    for version in ("0.60.0", "0.59.0", "0.61.3"):
        preflight(made, version)
    return made


@pytest.fixture
def root(three_decisions: Path, tmp_path: Path) -> Path:
    """A copy of those files for one test."""
    copy_host(three_decisions, tmp_path)
    return tmp_path


def export_with_checkpoint(root: Path) -> None:
    done = ctl(
        root, "chain", "export", "--out", "slice.jsonl",
        "--checkpoint-out", "slice.checkpoint", "--signing-key", "keys/signing.key",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_real_slice_with_its_checkpoint_is_proven_without_the_hmac_key(
    root: Path, tool: str
) -> None:
    export_with_checkpoint(root)
    note = (root / "slice.checkpoint").read_text()
    assert note.splitlines()[1] == "3" and "\n\n\u2014 floorguard/" in note
    done = TOOLS[tool](
        root, "verify", "chain", "slice.jsonl",
        "--checkpoint", "slice.checkpoint", "--pubkey", "keys/signing.pub",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "PROVEN"
    assert "checkpoint: size 3" in done.stdout


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_detects_deleted_tail_records_by_the_checkpoint(root: Path, tool: str) -> None:
    export_with_checkpoint(root)
    lines = (root / "slice.jsonl").read_text().splitlines(keepends=True)
    (root / "slice.jsonl").write_text("".join(lines[:-1]))
    done = TOOLS[tool](
        root, "verify", "chain", "slice.jsonl", "--json",
        "--checkpoint", "slice.checkpoint", "--pubkey", "keys/signing.pub",
    )  # fmt: skip
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["proven"] is False
    assert document["integrity_errors"] == [
        {"seq": 1, "reason": "the checkpoint covers 3 records but the slice ends at seq 1: "
                             "records 2..2 are missing (truncated), and without them the "
                             "records present cannot be checked against its root (any of them "
                             "may differ from those it signed)"},
    ]  # fmt: skip


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_refuses_a_slice_whose_first_records_were_dropped_without_since(
    tmp_path: Path, tool: str
) -> None:
    # 3 permits, a warn_override (seq 3), 21 more decisions; then the first 21 lines go.
    assert ctl(tmp_path, "keygen", "--out", "keys").returncode == 0
    code = (
        "import floorguard, os\n"
        "for n in range(25):\n"
        "    os.environ['FLOORGUARD_ADAPTER_FLOOR_POLICY'] = 'warn' if n == 3 else 'block'\n"
        "    floorguard.preflight('aider', version='0.50.0' if n == 3 else '0.61.0')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=isolated_env(tmp_path / "state"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    export_with_checkpoint(tmp_path)
    lines = (tmp_path / "slice.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) == 25 and json.loads(lines[3])["receipt"]["verdict"] == "warn_override"
    (tmp_path / "slice.jsonl").write_text("".join(lines[21:]))
    # The cut slice reaches the checkpoint's root through its last record's inclusion proof.
    proved = ctl(tmp_path, "chain", "prove", "--seq", "24", "--checkpoint", "slice.checkpoint",
                 "--out", "last.proof")  # fmt: skip
    assert proved.returncode == 0, proved.stderr
    args = ("verify", "chain", "slice.jsonl", "--checkpoint", "slice.checkpoint",
            "--pubkey", "keys/signing.pub", "--inclusion", "last.proof")  # fmt: skip
    done = TOOLS[tool](tmp_path, *args)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "NOT PROVEN"
    assert "records 0..20 are missing from the slice" in done.stdout
    document = json.loads(TOOLS[tool](tmp_path, *args, "--json").stdout)
    assert document["proven"] is False
    assert [e["seq"] for e in document["integrity_errors"]] == [21]


def test_both_verifiers_print_the_same_document_for_a_warn_override(root: Path) -> None:
    preflight(root, "0.50.0", policy="warn")
    key = root / "state" / "floorguard" / "chain.key"
    assert ctl(root, "chain", "export", "--out", "slice.jsonl").returncode == 0
    documents = []
    for tool in (ctl, guard):
        done = tool(root, "verify", "chain", "slice.jsonl", "--key-file", key, "--json")
        assert done.returncode == 1
        documents.append(json.loads(done.stdout))
    assert documents[0] == documents[1]
    assert documents[0]["integrity_errors"] == []
    assert documents[0]["violations"] == [
        {"seq": 3, "reason": "warn_override: 'aider' '0.50.0' was allowed by the warn policy, "
                             "below the floor 0.60.0 (BSA-0001) of the pinned map"},
    ]  # fmt: skip
    assert set(documents[0]) == {
        "proven", "since", "until", "records", "authenticated_by", "violations",
        "integrity_errors",
    }  # fmt: skip
    assert documents[0]["authenticated_by"] == "mac"


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_window_before_the_override_is_proven(root: Path, tool: str) -> None:
    preflight(root, "0.50.0", policy="warn")
    records = [json.loads(line) for line in ctl(root, "chain", "export").stdout.splitlines()]
    until = records[2]["ts"]
    done = ctl(root, "chain", "export", "--until", until, "--out", "slice.jsonl")
    assert done.returncode == 0
    key = root / "state" / "floorguard" / "chain.key"
    verdict = TOOLS[tool](
        root, "verify", "chain", "slice.jsonl", "--key-file", key, "--until", until
    )
    # The slice ends at the override, the first record after T2: the window is covered.
    assert verdict.returncode == 0, verdict.stdout
    later = TOOLS[tool](root, "verify", "chain", "slice.jsonl", "--key-file", key)
    assert later.returncode == 1 and "violation: warn_override" in later.stdout


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_checkpoint_needs_a_pubkey(root: Path, tool: str) -> None:
    export_with_checkpoint(root)
    done = TOOLS[tool](root, "verify", "chain", "slice.jsonl", "--checkpoint", "slice.checkpoint")
    assert done.returncode == 2
    assert "--pubkey" in done.stderr


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_refuses_a_checkpoint_signed_by_an_unknown_key(root: Path, tool: str) -> None:
    export_with_checkpoint(root)
    assert ctl(root, "keygen", "--out", "other").returncode == 0
    done = TOOLS[tool](
        root, "verify", "chain", "slice.jsonl",
        "--checkpoint", "slice.checkpoint", "--pubkey", "other/signing.pub",
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.splitlines()[1].startswith(
        "checkpoint: checkpoint is signed by an unknown key"
    )


def test_chain_checkpoint_signs_the_head(root: Path) -> None:
    done = ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--out", "head.cp")
    assert done.returncode == 0, done.stderr
    assert ctl(root, "chain", "export", "--out", "slice.jsonl").returncode == 0
    verdict = ctl(
        root, "verify", "chain", "slice.jsonl", "--checkpoint", "head.cp",
        "--pubkey", "keys/signing.pub",
    )  # fmt: skip
    assert verdict.returncode == 0, verdict.stdout


def test_chain_checkpoint_uses_the_development_key_and_says_so(root: Path) -> None:
    done = ctl(root, "chain", "checkpoint")
    assert done.returncode == 0
    assert "development signing key" in done.stderr
    assert done.stdout.startswith("floorguard/")


def test_chain_checkpoint_refuses_to_sign_a_tampered_chain(root: Path) -> None:
    db = root / "state" / "floorguard" / "chain.sqlite3"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE records SET receipt = replace(receipt, '0.59.0', '0.69.0')")
    conn.close()
    done = ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key")
    assert done.returncode == 1
    assert "refusing to sign a checkpoint" in done.stderr and done.stdout == ""


def test_chain_checkpoint_of_no_chain_fails(tmp_path: Path) -> None:
    done = ctl(tmp_path, "chain", "checkpoint")
    assert done.returncode == 1
    assert "nothing to sign" in done.stderr


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_forged_map_archive_is_not_used(root: Path, tool: str) -> None:
    assert ctl(root, "chain", "export", "--out", "slice.jsonl").returncode == 0
    pinned = json.loads((root / "slice.jsonl").read_text().splitlines()[0])["receipt"]
    name = pinned["floor_map_hash"].replace(":", "-") + ".json"
    archive = root / "forged-maps"
    archive.mkdir()
    real = json.loads((BUILTIN_MAPS / name).read_bytes())
    real["aider"]["min_safe_version"] = "0.0.1"
    (archive / name).write_text(json.dumps(real))
    loose = ("--unauthenticated",)
    done = TOOLS[tool](root, "verify", "chain", "slice.jsonl", "--maps", archive, *loose)
    assert done.returncode == 1
    assert "does not hash to its name" in done.stdout
    honest = TOOLS[tool](root, "verify", "chain", "slice.jsonl", "--maps", BUILTIN_MAPS, *loose)
    assert honest.returncode == 0, honest.stdout


def test_verify_receipt_reports_a_map_changed_after_the_receipt_was_sealed(root: Path) -> None:
    line = ctl(root, "chain", "export").stdout.splitlines()[0]
    (root / "receipt.json").write_text(line)
    pinned: dict[str, Any] = json.loads(line)["receipt"]
    name = pinned["floor_map_hash"].replace(":", "-") + ".json"
    (root / "map.json").write_bytes((BUILTIN_MAPS / name).read_bytes())
    checked = ctl(
        root, "verify", "receipt", "receipt.json", "--content-only", "--floor-map", "map.json"
    )
    assert checked.returncode == 0, checked.stderr
    changed = json.loads((root / "map.json").read_text())
    changed["aider"]["min_safe_version"] = "0.10.0"
    (root / "map.json").write_text(json.dumps(changed))
    done = ctl(
        root, "verify", "receipt", "receipt.json", "--content-only", "--floor-map", "map.json"
    )
    assert done.returncode == 1
    assert "floor-map hash mismatch" in done.stderr
    assert "changed after the receipt was sealed" in done.stderr
