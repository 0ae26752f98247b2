"""Integers of the evidence formats are JSON integers: a slice line's ``seq``, the record an
inclusion proof carries, a proof's sizes and index. ``2.0``, ``true`` or ``"2"`` never pass
for one (Python reads true as 1 and 2.0 as equal to 2). Through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.chain_support import filled_chain
from helpers.cli import isolated_env

from floorguard._chain.chain import AuditChain
from floorguard._proofs import checkpoint, tlog


def floorguard(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "floorguard", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=isolated_env(cwd),
        timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> AuditChain:
    return filled_chain(tmp_path_factory.mktemp("chain"), 4)


@pytest.mark.parametrize("spelled", ["2.0", "2e0", "true", '"2"', "-2", "null"])
def test_a_slice_line_whose_seq_is_not_a_json_integer_is_refused(
    chain: AuditChain, tmp_path: Path, spelled: str
) -> None:
    lines = [line + "\n" for line in chain.export_lines()]
    assert '"seq":2,' in lines[2]
    lines[2] = lines[2].replace('"seq":2,', f'"seq":{spelled},')
    (tmp_path / "slice.jsonl").write_text("".join(lines))
    done = floorguard(tmp_path, "verify", "chain", "slice.jsonl")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "slice.jsonl line 3: seq is not a non-negative integer" in done.stdout


@pytest.fixture(scope="module")
def proved(chain: AuditChain, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signed checkpoint of the chain (checkpoint.txt, key.pub) and the inclusion proof of
    record 1 (proof.json), as a verifier receives them."""
    folder = tmp_path_factory.mktemp("proof")
    key = Ed25519PrivateKey.generate()
    (folder / "key.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    lines = list(chain.export_lines())
    chain_id = json.loads(lines[0])["chain_id"]
    cp = checkpoint.new_checkpoint(chain_id, len(lines), tlog_root(lines))
    proof = tlog.prove_inclusion(chain, seq=1, checkpoint=cp)
    (folder / "checkpoint.txt").write_text(checkpoint.sign(cp, key))
    (folder / "proof.json").write_text(tlog.proof_text(proof))
    done = floorguard(folder, "verify", "inclusion", "proof.json", "--checkpoint",
                      "checkpoint.txt", "--pubkey", "key.pub")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder


def tlog_root(lines: list[str]) -> bytes:
    """The RFC 6962 root of the export lines, computed here rather than by the chain."""
    import hashlib

    def mth(leaves: list[bytes]) -> bytes:
        if len(leaves) == 1:
            return hashlib.sha256(b"\x00" + leaves[0]).digest()
        k = 1 << ((len(leaves) - 1).bit_length() - 1)
        return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()

    return mth([line.encode() for line in lines])


def verify_edited_proof(proved: Path, tmp_path: Path, proof: dict[str, object]) -> str:
    (tmp_path / "proof.json").write_text(json.dumps(proof))
    done = floorguard(
        tmp_path, "verify", "inclusion", tmp_path / "proof.json",
        "--checkpoint", proved / "checkpoint.txt", "--pubkey", proved / "key.pub",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    return done.stderr


def test_an_inclusion_proofs_record_whose_seq_is_true_is_refused_as_not_an_integer(
    proved: Path, tmp_path: Path
) -> None:
    proof = json.loads((proved / "proof.json").read_text())
    assert '"seq":1,' in proof["record"]
    proof["record"] = proof["record"].replace('"seq":1,', '"seq":true,')
    message = verify_edited_proof(proved, tmp_path, proof)
    assert "proof.json: the record's seq is not an integer" in message, message


@pytest.mark.parametrize("field", ["tree_size", "leaf_index"])
@pytest.mark.parametrize("value", [True, 1.0, "1"])
def test_an_inclusion_proofs_size_and_index_are_json_integers(
    proved: Path, tmp_path: Path, field: str, value: object
) -> None:
    proof = json.loads((proved / "proof.json").read_text())
    proof[field] = value
    message = verify_edited_proof(proved, tmp_path, proof)
    assert f"{field} is not an integer" in message, message


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("field", ["receipt", "seq"])
def test_nan_or_infinity_in_a_slice_is_refused_naming_the_file_line_and_what_was_found(
    chain: AuditChain, tmp_path: Path, constant: str, field: str
) -> None:
    lines = [line + "\n" for line in chain.export_lines()]
    old = '"seq":2,' if field == "seq" else '"n":2'
    lines[2] = lines[2].replace(old, old.replace("2", constant))
    assert constant in lines[2]
    (tmp_path / "evidence.jsonl").write_text("".join(lines))
    done = floorguard(tmp_path, "verify", "chain", "evidence.jsonl", "--unauthenticated")
    assert done.returncode == 1, done.stdout
    assert f"evidence.jsonl line 3: {constant} is not JSON" in done.stdout, done.stdout
