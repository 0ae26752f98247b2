"""Signed checkpoints: the C2SP tlog-checkpoint body in a C2SP signed note, and every refusal."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from floorguard._proofs import checkpoint
from floorguard.errors import VerificationError

# RFC 8032, section 7.1, TEST 1: a fixed Ed25519 key whose public half is published.
SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
CHAIN_ID = "0123456789abcdef" * 2
ORIGIN = f"floorguard/{CHAIN_ID}"
ROOT = b"\xab" * 32
TIME = "2026-01-01T00:00:10.000000Z"


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(SEED)


@pytest.fixture
def fixed() -> checkpoint.Checkpoint:
    return checkpoint.new_checkpoint(CHAIN_ID, 7, ROOT, TIME)


def test_the_test_vector_key_is_rfc_8032_test_1(key: Ed25519PrivateKey) -> None:
    assert checkpoint.raw_public(key.public_key()) == PUBLIC


def test_key_id_is_the_c2sp_ed25519_key_id() -> None:
    # By hand, from the signed-note definition: SHA-256(name || 0x0A || 0x01 || key)[:4].
    expected = hashlib.sha256(ORIGIN.encode() + bytes([0x0A, 0x01]) + PUBLIC).digest()[:4]
    assert checkpoint.key_id(ORIGIN, PUBLIC) == expected
    assert len(expected) == 4


def test_body_is_the_tlog_checkpoint_text(fixed: checkpoint.Checkpoint) -> None:
    head_b64 = base64.b64encode(b"\xab" * 32).decode()
    assert fixed.body() == f"{ORIGIN}\n7\n{head_b64}\ntime {TIME}\n"


def test_signed_note_has_a_blank_line_and_one_c2sp_signature_line(
    key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint
) -> None:
    note = checkpoint.sign(fixed, key)
    body, _, signature_block = note.partition("\n\n")
    assert body + "\n" == fixed.body()
    assert signature_block.endswith("\n") and signature_block.count("\n") == 1
    dash, name, blob = signature_block[:-1].split(" ")
    assert dash == "\u2014" and name == ORIGIN
    raw = base64.b64decode(blob, validate=True)
    expected_id = hashlib.sha256(ORIGIN.encode() + b"\n\x01" + PUBLIC).digest()[:4]
    assert raw[:4] == expected_id
    # The rest is the Ed25519 signature of the note text, final newline included.
    key.public_key().verify(raw[4:], fixed.body().encode())
    # Ed25519 is deterministic: the same statement always gives the same line.
    assert checkpoint.sign(fixed, key) == note


def test_a_signature_line_parses_back(key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint) -> None:
    note = checkpoint.sign(fixed, key)
    body, signatures = checkpoint.split_note(note.encode())
    assert body == fixed.body()
    (only,) = signatures
    assert (only.name, only.key_id) == (ORIGIN, checkpoint.key_id(ORIGIN, PUBLIC))
    assert checkpoint.signature_line(ORIGIN, PUBLIC, only.signature) == note.split("\n\n")[1]


def test_verify_returns_the_statement(key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint) -> None:
    assert checkpoint.verify(checkpoint.sign(fixed, key).encode(), key.public_key()) == fixed


def test_refuses_a_checkpoint_signed_by_an_unknown_key(fixed: checkpoint.Checkpoint) -> None:
    stranger = Ed25519PrivateKey.generate()
    note = checkpoint.sign(fixed, stranger).encode()
    with pytest.raises(VerificationError, match="signed by an unknown key"):
        checkpoint.verify(note, Ed25519PrivateKey.from_private_bytes(SEED).public_key())


def test_refuses_a_forged_signature_under_the_right_key_id(
    key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint
) -> None:
    stranger = Ed25519PrivateKey.generate()
    forged = stranger.sign(fixed.body().encode())
    note = fixed.body() + "\n" + checkpoint.signature_line(ORIGIN, PUBLIC, forged)
    with pytest.raises(VerificationError, match="does not verify"):
        checkpoint.verify(note.encode(), key.public_key())


def test_ignores_signatures_of_other_keys_beside_a_good_one(
    key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint
) -> None:
    other = Ed25519PrivateKey.generate()
    witness = checkpoint.signature_line(
        "witness.example/w1",
        checkpoint.raw_public(other.public_key()),
        other.sign(fixed.body().encode()),
    )
    note = checkpoint.sign(fixed, key) + witness
    assert checkpoint.verify(note.encode(), key.public_key()) == fixed


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("\n7\n", "\n8\n"),  # size
        ("\n7\n", "\n6\n"),
        ("q6urq6ur", "q6urq6uq"),  # root
        ("time 2026-01-01T00:00:10", "time 2026-01-01T00:00:11"),  # issue time
    ],
)
def test_refuses_an_edited_statement(
    key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint, old: str, new: str
) -> None:
    note = checkpoint.sign(fixed, key)
    assert old in note
    with pytest.raises(VerificationError):
        checkpoint.verify(note.replace(old, new, 1).encode(), key.public_key())


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda n: n.replace("\n\n", "\n", 1), "no blank line"),
        (lambda n: n[:-1], "does not end with a newline"),
        (lambda n: n.replace("\u2014", "-", 1), "malformed signature line"),
        (lambda n: n.replace("\ntime ", f"\ntime {TIME}\ntime ", 1), "more than one 'time"),
        (lambda n: n.replace("floorguard/", "elsewhere/", 1), "origin"),
        (lambda n: n.replace("\n7\n", "\n07\n", 1), "size"),
        (lambda n: n.replace("\n7\n", "\n0\n", 1), "size"),
        (lambda n: n.replace("\n7\n", "\n\n", 1), "non-empty lines"),
        (lambda n: n.replace("time 2026", "time \t2026", 1), "control character"),
        (lambda n: n + "\u2014 x\n", "malformed signature line"),
        (lambda n: n.split("\n\n")[0] + "\n\n", "no signature lines"),
        (lambda n: n.replace("T00:00:10.000000Z", "T00:00:10+00:00", 1), "UTC with Z"),
    ],
)
def test_refuses_a_malformed_note(
    key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint, edit: object, reason: str
) -> None:
    note = checkpoint.sign(fixed, key)
    assert callable(edit)
    with pytest.raises(VerificationError, match=reason):
        checkpoint.verify(edit(note).encode(), key.public_key())


def test_refuses_non_canonical_base64_in_a_signature(
    key: Ed25519PrivateKey, fixed: checkpoint.Checkpoint
) -> None:
    note = checkpoint.sign(fixed, key)
    body, line = note.split("\n\n")
    blob = line.split(" ")[2].rstrip("\n")
    # 68 bytes: the last character before '=' carries two unused bits; set one.
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = blob[-2]
    twin = alphabet[alphabet.index(last) ^ 1]
    assert base64.b64decode(blob[:-2] + twin + "=") == base64.b64decode(blob)
    mutated = f"{body}\n\n\u2014 {ORIGIN} {blob[:-2]}{twin}=\n"
    with pytest.raises(VerificationError, match="base64"):
        checkpoint.verify(mutated.encode(), key.public_key())


def test_refuses_an_oversized_note(key: Ed25519PrivateKey) -> None:
    with pytest.raises(VerificationError, match="larger than"):
        checkpoint.verify(b"x" * (checkpoint.MAX_NOTE_BYTES + 1), key.public_key())


def test_cannot_checkpoint_nothing() -> None:
    with pytest.raises(VerificationError, match="empty"):
        checkpoint.new_checkpoint(CHAIN_ID, 0, ROOT)
    with pytest.raises(VerificationError, match="chain id"):
        checkpoint.new_checkpoint("nope", 1, ROOT)


def test_cannot_checkpoint_a_root_that_is_not_32_bytes() -> None:
    with pytest.raises(VerificationError, match="32 bytes"):
        checkpoint.new_checkpoint(CHAIN_ID, 1, b"\xab" * 31)


def test_a_checkpoint_without_a_time_line_verifies(key: Ed25519PrivateKey) -> None:
    # C2SP tlog-checkpoint: origin, size, root; the time extension is ours and optional.
    bare = checkpoint.new_checkpoint(CHAIN_ID, 7, ROOT, stamped=False)
    assert bare.body() == f"{ORIGIN}\n7\n{base64.b64encode(ROOT).decode()}\n"
    assert checkpoint.verify(checkpoint.sign(bare, key).encode(), key.public_key()) == bare


def test_unknown_extension_lines_are_ignored(key: Ed25519PrivateKey) -> None:
    body = f"{ORIGIN}\n7\n{base64.b64encode(ROOT).decode()}\nother extension\ntime {TIME}\n"
    signature = key.sign(body.encode())
    note = body + "\n" + checkpoint.signature_line(ORIGIN, PUBLIC, signature)
    found = checkpoint.verify(note.encode(), key.public_key())
    assert (found.size, found.root, found.time) == (7, ROOT, TIME)


def test_an_old_format_root_is_named_as_such_given_the_last_record_digest() -> None:
    old = checkpoint.new_checkpoint(CHAIN_ID, 7, ROOT, TIME)
    reason = checkpoint.old_format_reason(old, "sha256:" + ROOT.hex())
    assert reason is not None and "old format" in reason and "record 6" in reason
    assert checkpoint.old_format_reason(old, "sha256:" + "cd" * 32) is None


def test_the_verifier_key_is_the_go_note_form_of_the_origin_key_id_and_key() -> None:
    # name+<key id as 8 hex>+base64(0x01 || key), as golang.org/x/mod/sumdb/note reads it.
    vkey = checkpoint.verifier_key(ORIGIN, PUBLIC)
    name, keyhash, encoded = vkey.split("+", 2)
    assert name == ORIGIN
    assert bytes.fromhex(keyhash) == checkpoint.key_id(ORIGIN, PUBLIC)
    assert base64.b64decode(encoded, validate=True) == b"\x01" + PUBLIC
