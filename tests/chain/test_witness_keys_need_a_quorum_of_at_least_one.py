"""Witness keys count only under a quorum of at least one: ``--witnesses 0`` with one or
more ``--witness-key`` would let a checkpoint no witness cosigned pass as witnessed, so every
verifier that takes the options refuses it as a usage error (exit 2) before reading any
file. Without ``--witnesses`` every key given must have cosigned. Both CLIs agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from helpers.tlog_support import _inclusion_args, both, ctl, guard, ok, witnessed

from floorguard._commands.verify_commands import witness_quorum
from floorguard._proofs import witness
from floorguard.errors import VerificationError

ZERO_QUORUM = "--witnesses 0 with --witness-key"


def _slice(log: Path) -> str:
    (log / "slice.jsonl").write_text(ok(ctl(log, "chain", "export")).stdout)
    return "slice.jsonl"


def _consistency(log: Path) -> str:
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c12.json"))
    return "c12.json"


def _commands(log: Path, cp: Path) -> dict[str, tuple[str, ...]]:
    """Each verifier that takes --witness-key, over the checkpoint ``cp`` (of size 11)."""
    return {
        "inclusion": _inclusion_args(log, cp),
        "consistency": ("verify", "consistency", "--old", "one.cp", "--new", str(cp),
                        "--proof", _consistency(log), "--pubkey", "keys/signing.pub"),
        "chain": ("verify", "chain", _slice(log), "--checkpoint", str(cp), "--pubkey",
                  "keys/signing.pub", "--maps", "."),
    }  # fmt: skip


@pytest.mark.parametrize("command", ["inclusion", "consistency", "chain"])
def test_witness_keys_under_a_quorum_of_zero_are_a_usage_error_in_both_clis(
    log: Path, command: str
) -> None:
    # two.cp carries no cosignature: with a quorum of 0 it passed as witnessed.
    args = _commands(log, log / "two.cp")[command]
    for keys in (("w1/signing.pub",), ("w1/signing.pub", "w2/signing.pub")):
        for name in keys:
            if not (log / name).exists():
                ok(ctl(log, "keygen", "--out", name.split("/")[0]))
        flags = [flag for key in keys for flag in ("--witness-key", key)]
        for tool in (ctl, guard):
            done = tool(log, *args, *flags, "--witnesses", "0")
            assert done.returncode == 2, (tool, keys, done.stdout, done.stderr)
            assert not done.stdout, done.stdout
            assert ZERO_QUORUM in done.stderr, done.stderr
            assert "would count for nothing" in done.stderr, done.stderr
            # (--json: the same refusal as the JSON error document, never a verdict)
            done = tool(log, *args, *flags, "--witnesses", "0", "--json")
            error = json.loads(done.stdout)["error"]
            assert done.returncode == 2 and error["exit_status"] == 2, done.stdout
            assert ZERO_QUORUM in error["message"], error


def test_a_checkpoint_no_witness_cosigned_fails_with_a_witness_key(log: Path) -> None:
    if not (log / "w1").exists():
        ok(ctl(log, "keygen", "--out", "w1"))
    for quorum in ((), ("--witnesses", "1")):
        code, _, err = both(log, *_inclusion_args(
            log, log / "two.cp", "--witness-key", "w1/signing.pub", *quorum,
        ))  # fmt: skip
        assert code == 1, err
        assert "0 valid witness cosignature(s) of the given keys, 1 required" in err


def test_a_witnessed_checkpoint_verifies_under_a_quorum_of_one(log: Path, tmp_path: Path) -> None:
    _, second = witnessed(log, tmp_path / "state")
    for quorum in ((), ("--witnesses", "1")):
        code, out, err = both(log, *_inclusion_args(
            log, second, "--witness-key", "w1/signing.pub", *quorum,
        ))  # fmt: skip
        assert code == 0, err
        assert "VERIFIED" in out, out


def test_a_quorum_of_zero_without_witness_keys_still_needs_only_the_logs_signature(
    log: Path,
) -> None:
    code, out, err = both(log, *_inclusion_args(log, log / "two.cp", "--witnesses", "0"))
    assert code == 0, err
    assert "VERIFIED" in out, out


def test_a_cosignature_that_does_not_verify_is_an_error(log: Path, tmp_path: Path) -> None:
    _, second = witnessed(log, tmp_path / "state")
    lines = second.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("— floorguard-witness/"))
    line = lines[index]
    lines[index] = line[:-6] + ("A" if line[-6] != "A" else "B") + line[-5:]
    (tmp_path / "bad.cp").write_text("\n".join(lines) + "\n")
    code, _, err = both(log, *_inclusion_args(
        log, tmp_path / "bad.cp", "--witness-key", "w1/signing.pub", "--witnesses", "1",
    ))  # fmt: skip
    assert code == 1 and "does not verify" in err, err


def test_the_library_refuses_a_quorum_of_zero_with_witness_keys_too(log: Path) -> None:
    # (fail closed below the command lines: a caller of the library gets no quiet pass)
    if not (log / "w1").exists():
        ok(ctl(log, "keygen", "--out", "w1"))
    with pytest.raises(VerificationError, match="would count for nothing"):
        witness_quorum([log / "w1" / "signing.pub"], 0)
    key = load_pem_public_key((log / "w1" / "signing.pub").read_bytes())
    assert isinstance(key, Ed25519PublicKey)
    with pytest.raises(VerificationError, match="would count none of them"):
        witness.require_witnesses((log / "two.cp").read_bytes(), [key], 0)
