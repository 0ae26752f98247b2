"""The signed-note verifier key (``name+keyhash+base64``, as Go's
golang.org/x/mod/sumdb/note reads it) that ``floorctl keygen --chain-id`` and ``floorctl
chain checkpoint --json`` print: parsed here by hand and used, with ``cryptography`` alone,
to verify a checkpoint the real command signed."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from helpers.cli import floorctl, isolated_env


def ctl(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return floorctl(*args, cwd=root, state=root / "state")


def record_a_spawn(root: Path) -> None:
    code = (
        "import floorguard\n"
        "try:\n"
        "    floorguard.preflight('aider', version='0.61.3')\n"
        "except floorguard.SpawnRefused:\n"
        "    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=isolated_env(root / "state"),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def verify_with_vkey(vkey: str, note: str) -> str:
    """Verify ``note`` with ``vkey`` as Go's note.NewVerifier and note.Open do; its name."""
    # As Go's chop: cut at the first two '+' (base64 may hold more).
    name, keyhash, key64 = vkey.split("+", 2)
    assert re.fullmatch(r"[0-9a-f]{8}", keyhash)
    key = base64.b64decode(key64, validate=True)
    assert len(key) == 33 and key[0] == 0x01  # the Ed25519 algorithm byte, then the key
    # The key hash: SHA-256(name || "\n" || 0x01 || key)[:4], big-endian.
    expected = hashlib.sha256(name.encode() + b"\n" + key).digest()[:4]
    assert int(keyhash, 16) == int.from_bytes(expected, "big")
    text, _, signatures = note.partition("\n\n")
    lines = [line for line in signatures.splitlines() if line.split(" ")[1] == name]
    (line,) = lines
    blob = base64.b64decode(line.split(" ")[2], validate=True)
    assert blob[:4] == expected
    Ed25519PublicKey.from_public_bytes(key[1:]).verify(blob[4:], (text + "\n").encode())
    return name


def raw_public(path: Path) -> bytes:
    key = serialization.load_pem_public_key(path.read_bytes())
    assert isinstance(key, Ed25519PublicKey)
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    assert ctl(tmp_path, "keygen", "--out", "keys").returncode == 0
    record_a_spawn(tmp_path)
    return tmp_path


@pytest.mark.parametrize("to_file", [False, True])
def test_chain_checkpoint_json_carries_the_verifier_key_that_verifies_it(
    root: Path, to_file: bool
) -> None:
    out = ("--out", "head.cp") if to_file else ()
    done = ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--json", *out)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    note = (root / "head.cp").read_text() if to_file else document["checkpoint"]
    assert document["checkpoint"] == note
    name = verify_with_vkey(document["vkey"], note)
    assert name == note.splitlines()[0] == document["origin"]
    assert base64.b64decode(document["vkey"].split("+", 2)[2])[1:] == raw_public(
        root / "keys" / "signing.pub"
    )


def test_the_verifier_key_refuses_an_edited_checkpoint(root: Path) -> None:
    done = ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key", "--json")
    document = json.loads(done.stdout)
    lines = document["checkpoint"].split("\n")
    lines[1] = str(int(lines[1]) + 1)
    with pytest.raises(InvalidSignature):
        verify_with_vkey(document["vkey"], "\n".join(lines))


@pytest.mark.parametrize("as_json", [False, True])
def test_keygen_prints_the_verifier_key_for_the_chain_it_is_given(
    root: Path, as_json: bool
) -> None:
    head = ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key")
    chain_id = head.stdout.splitlines()[0].removeprefix("floorguard/")
    flags = ("--json",) if as_json else ()
    done = ctl(root, "keygen", "--out", "checkpoint-keys", "--chain-id", chain_id, *flags)
    assert done.returncode == 0, done.stderr
    if as_json:
        vkey = json.loads(done.stdout)["vkey"]
    else:
        (line,) = [line for line in done.stdout.splitlines() if line.startswith("vkey ")]
        vkey = line.removeprefix("vkey ")
    assert vkey.startswith(f"floorguard/{chain_id}+")
    signed = ctl(root, "chain", "checkpoint", "--signing-key", "checkpoint-keys/signing.key")
    assert signed.returncode == 0, signed.stderr
    assert verify_with_vkey(vkey, signed.stdout) == f"floorguard/{chain_id}"


def test_keygen_without_a_chain_has_no_verifier_key_to_print(tmp_path: Path) -> None:
    # The key name of a checkpoint is its origin, floorguard/<chain id>: without the chain
    # there is no name, and a key under another name would verify nothing.
    done = ctl(tmp_path, "keygen", "--out", "keys", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["vkey"] is None
    text = ctl(tmp_path, "keygen", "--out", "more")
    assert "vkey" not in text.stdout


def test_keygen_refuses_a_chain_id_that_no_checkpoint_can_have_before_writing_a_key(
    tmp_path: Path,
) -> None:
    done = ctl(tmp_path, "keygen", "--out", "keys", "--chain-id", "not+a-chain")
    assert done.returncode == 2
    assert "--chain-id" in done.stderr
    assert not (tmp_path / "keys").exists()
