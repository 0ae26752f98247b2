"""Inclusion and consistency proof documents: made from the chain's stored tree, refused
when malformed, and checked against signed checkpoints."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helpers.chain_support import execute, filled_chain

from floorguard._chain.chain import AuditChain, ChainRecord
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog
from floorguard.errors import ChainError, VerificationError

SIGNER = Ed25519PrivateKey.generate()


@pytest.fixture
def chain(tmp_path: Path) -> AuditChain:
    return filled_chain(tmp_path, 13)


def signed(cp: checkpoint.Checkpoint) -> bytes:
    return checkpoint.sign(cp, SIGNER).encode()


def test_every_record_is_proven_in_every_tree_that_holds_it(chain: AuditChain) -> None:
    for size in range(1, 14):
        cp = checkpoint.of_chain(chain, size - 1)
        note = signed(cp)
        for seq in range(size):
            proof = tlog.prove_inclusion(chain, seq=seq, checkpoint=cp)
            result = tlog.verify_inclusion(
                tlog.proof_text(proof).encode(), note, SIGNER.public_key()
            )
            assert result.record.seq == seq
        for old in range(1, size + 1):
            older = checkpoint.of_chain(chain, old - 1)
            proof_c = tlog.prove_consistency(chain, older, cp)
            tlog.verify_consistency(
                signed(older), note, tlog.proof_text(proof_c).encode(), SIGNER.public_key()
            )


def test_a_proof_document_has_exactly_the_contract_keys(chain: AuditChain) -> None:
    proof = tlog.prove_inclusion(chain, seq=4)
    document = json.loads(tlog.proof_text(proof))
    assert list(document) == ["hashes", "leaf_index", "origin", "record", "tree_size"]
    assert document["record"] == list(chain.export_lines())[4]
    assert all(len(base64.b64decode(h)) == 32 for h in document["hashes"])


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda d: {**d, "extra": 1}, "exactly"),
        (lambda d: {k: v for k, v in d.items() if k != "hashes"}, "exactly"),
        (lambda d: {**d, "tree_size": "13"}, "tree_size is not an integer"),
        (lambda d: {**d, "tree_size": True}, "tree_size is not an integer"),
        (lambda d: {**d, "leaf_index": -1}, "leaf_index is not an integer"),
        (lambda d: {**d, "hashes": ["AAAA"]}, "base64 of 32 bytes"),
        (lambda d: {**d, "hashes": "x"}, "not a list"),
        (lambda d: {**d, "origin": "elsewhere/x"}, "origin"),
        (lambda d: {**d, "record": {"seq": 1}}, "record is not a string"),
    ],
)
def test_refuses_a_malformed_inclusion_proof(chain: AuditChain, edit: object, reason: str) -> None:
    document = tlog.prove_inclusion(chain, seq=4).document()
    assert callable(edit)
    with pytest.raises(VerificationError, match=reason):
        tlog.parse_inclusion(json.dumps(edit(document)).encode())


def test_refuses_a_proof_that_repeats_a_key(chain: AuditChain) -> None:
    text = tlog.proof_text(tlog.prove_inclusion(chain, seq=4))
    with pytest.raises(VerificationError, match="repeats a key"):
        tlog.parse_inclusion(text.replace('{"hashes"', '{"tree_size":1,"hashes"', 1).encode())


def test_refuses_a_record_that_is_not_the_canonical_export_line(chain: AuditChain) -> None:
    cp = checkpoint.of_chain(chain)
    proof = tlog.prove_inclusion(chain, seq=4, checkpoint=cp)
    spaced = json.dumps(json.loads(proof.record))  # the same record, spelled with spaces
    with pytest.raises(VerificationError, match="not a canonical export line"):
        tlog.check_inclusion(tlog.InclusionProof(**{**proof.__dict__, "record": spaced}), cp)


@pytest.mark.parametrize(("field", "value"), [("schema_version", True), ("schema_version", 1.5)])
def test_refuses_a_canonical_record_whose_receipt_is_malformed(
    chain: AuditChain, field: str, value: object
) -> None:
    line = next(chain.export_lines())
    fields = json.loads(line)
    fields["receipt"][field] = value
    record = ChainRecord(**fields)
    with pytest.raises(VerificationError, match="the record's receipt is malformed"):
        tlog.record_of_line(record.to_json_line())


def test_refuses_a_record_placed_at_another_index(chain: AuditChain) -> None:
    cp = checkpoint.of_chain(chain)
    proof = tlog.prove_inclusion(chain, seq=4, checkpoint=cp)
    moved = tlog.InclusionProof(**{**proof.__dict__, "leaf_index": 5})
    with pytest.raises(VerificationError, match="the record is seq 4 but the proof places"):
        tlog.check_inclusion(moved, cp)


def test_refuses_to_prove_beyond_the_checkpoint(chain: AuditChain) -> None:
    cp = checkpoint.of_chain(chain, 5)
    with pytest.raises(VerificationError, match="no record 9"):
        tlog.prove_inclusion(chain, seq=9, checkpoint=cp)
    with pytest.raises(VerificationError, match="no record of receipt"):
        tlog.prove_inclusion(chain, receipt_id="sha256:" + "0" * 64)


def test_refuses_a_checkpoint_of_another_chain(chain: AuditChain, tmp_path: Path) -> None:
    other = filled_chain(tmp_path / "other", 13)
    with pytest.raises(VerificationError, match="is for floorguard/"):
        tlog.prove_inclusion(chain, seq=1, checkpoint=checkpoint.of_chain(other))


def test_refuses_an_old_tree_larger_than_the_new(chain: AuditChain) -> None:
    with pytest.raises(VerificationError, match="more than the new one's"):
        tlog.prove_consistency(chain, checkpoint.of_chain(chain), checkpoint.of_chain(chain, 3))


def test_a_chain_from_before_the_tree_is_checkpointed_and_proven(tmp_path: Path) -> None:
    chain = filled_chain(tmp_path / "old", 9)
    expected = checkpoint.of_chain(chain)
    chain.close()
    execute(chain.db_path, "DROP TABLE tree")
    again = AuditChain(chain.db_path, chain.key_file)
    assert checkpoint.of_chain(again).root == expected.root
    proof = tlog.prove_inclusion(again, seq=3, checkpoint=expected)
    tlog.check_inclusion(proof, expected)


def test_refuses_to_sign_when_the_stored_tree_disagrees_with_the_records(
    chain: AuditChain,
) -> None:
    chain.close()
    execute(chain.db_path, "UPDATE tree SET hash = ? WHERE level = 3 AND idx = 0", b"\x00" * 32)
    with pytest.raises(VerificationError, match=r"stored in .* does not match its records"):
        checkpoint.of_chain(chain)


@pytest.mark.parametrize(
    ("level", "index"),
    [(0, 2), (1, 0), (2, 1), (0, 12)],
    ids=["a-leaf-under-a-stored-parent", "an-inner-node", "a-level-2-node", "the-last-leaf"],
)
def test_refuses_to_sign_when_any_stored_node_disagrees_with_the_records(
    chain: AuditChain, level: int, index: int
) -> None:
    # Of 13 leaves the root hashes (3, 0), (2, 2) and (0, 12): a node below them changes no
    # root, yet every proof through it is wrong. What is signed must back every proof.
    chain.close()
    execute(
        chain.db_path, "UPDATE tree SET hash = ? WHERE level = ? AND idx = ?",
        b"\x00" * 32, level, index,
    )  # fmt: skip
    with pytest.raises(VerificationError, match=rf"stored .* node \({level}, {index}\)"):
        checkpoint.of_chain(chain)


def test_refuses_to_sign_a_tree_that_holds_a_node_no_record_made(chain: AuditChain) -> None:
    chain.close()
    execute(chain.db_path, "INSERT INTO tree (level, idx, hash) VALUES (1, 6, ?)", b"\x00" * 32)
    with pytest.raises(VerificationError, match=r"node \(1, 6\)"):
        checkpoint.of_chain(chain)


def test_signs_a_prefix_whose_nodes_all_match_while_later_records_exist(
    chain: AuditChain,
) -> None:
    lines = list(chain.export_lines())
    cp = checkpoint.of_chain(chain, 6)
    assert cp.size == 7
    assert cp.root == merkle.hash_of_leaves([merkle.leaf_hash(line.encode()) for line in lines[:7]])


def test_refuses_to_hand_out_a_proof_the_stored_tree_cannot_back(chain: AuditChain) -> None:
    chain.close()
    execute(chain.db_path, "UPDATE tree SET hash = ? WHERE level = 0 AND idx = 2", b"\x00" * 32)
    with pytest.raises(VerificationError, match="does not hash to the leaf the stored tree holds"):
        tlog.prove_inclusion(chain, seq=2)
    execute(chain.db_path, "UPDATE tree SET hash = ? WHERE level = 0 AND idx = 9", b"\x00" * 32)
    with pytest.raises(VerificationError, match="stored Merkle tree"):
        tlog.prove_inclusion(chain, seq=8)


def test_a_process_that_made_proofs_refuses_once_the_records_table_is_dropped_beside_it(
    chain: AuditChain,
) -> None:
    # The process's read connection is kept between proofs, and knows the tables it saw:
    # a table dropped since is no proof, whatever that connection remembers.
    assert tlog.prove_inclusion(chain, seq=3).tree_size == 13
    execute(chain.db_path, "DROP TABLE records")
    for _ in range(2):
        with pytest.raises((ChainError, VerificationError)):
            tlog.prove_inclusion(chain, seq=3)
