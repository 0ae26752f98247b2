"""The audit chain as a transparency log, end to end with the real CLIs: records from real
refreshes and preflights, a signed checkpoint, one receipt proven without the rest of the
log, more records, a second checkpoint and a consistency proof; and what must be refused (a
rewritten record between the two, an edited proof, an old-format checkpoint)."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key
from helpers.proof_support import relink
from helpers.tlog_support import (
    ctl,
    forked,
    guard,
    name_of,
    ok,
    witnessed,
)

from floorguard._proofs import checkpoint, tlog

pytestmark = pytest.mark.slow  # (not in CI: run before a release)


def mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, read directly: what a generic client computes."""
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def test_the_checkpoint_root_is_the_rfc_6962_hash_of_the_export_lines(log: Path) -> None:
    lines = ok(ctl(log, "chain", "export")).stdout.splitlines()
    for name in ("one.cp", "two.cp"):
        origin, size, root = (log / name).read_text().splitlines()[:3]
        leaves = [line.encode() for line in lines[: int(size)]]
        assert base64.b64decode(root) == mth(leaves)
        assert origin == "floorguard/" + json.loads(lines[0])["chain_id"]
    assert [(log / n).read_text().splitlines()[1] for n in ("one.cp", "two.cp")] == ["5", "11"]


@pytest.mark.parametrize("by", ["seq", "receipt-id"])
def test_one_receipt_is_proven_in_the_log_without_the_rest_of_it(log: Path, by: str) -> None:
    lines = ok(ctl(log, "chain", "export")).stdout.splitlines()
    record = json.loads(lines[2])  # a refused spawn (0.59.0)
    assert record["receipt"]["verdict"] == "refuse"
    which = "2" if by == "seq" else record["receipt_id"]
    ok(ctl(log, "chain", "prove", f"--{by}", which, "--checkpoint", "one.cp",
           "--out", f"proof-{by}.json"))  # fmt: skip
    proof = json.loads((log / f"proof-{by}.json").read_text())
    assert set(proof) == {"origin", "tree_size", "leaf_index", "record", "hashes"}
    assert (proof["tree_size"], proof["leaf_index"], proof["record"]) == (5, 2, lines[2])
    assert len(proof["hashes"]) == 3  # ceil(log2 5)
    # An auditor with only the proof, the checkpoint and the public key:
    auditor = log / f"auditor-{by}"
    auditor.mkdir()
    for name in (f"proof-{by}.json", "one.cp"):
        (auditor / name).write_bytes((log / name).read_bytes())
    (auditor / "log.pub").write_bytes((log / "keys" / "signing.pub").read_bytes())
    args = ("verify", "inclusion", f"proof-{by}.json", "--checkpoint", "one.cp",
            "--pubkey", "log.pub")  # fmt: skip
    for extra in ((), ("--json",)):
        ours = ok(ctl(auditor, *args, *extra))
        theirs = ok(guard(auditor, *args, *extra))
        assert ours.stdout == theirs.stdout
    document = json.loads(ours.stdout)
    assert document == {
        "verified": True, "origin": proof["origin"], "tree_size": 5, "leaf_index": 2,
        "event": "adapter.spawn_preflight_receipt", "receipt_id": record["receipt_id"],
        "ts": record["ts"],
    }  # fmt: skip


def test_the_head_is_proven_without_a_checkpoint_and_verifies_against_a_later_one(
    log: Path,
) -> None:
    ok(ctl(log, "chain", "prove", "--seq", "7", "--out", "head.json"))
    assert json.loads((log / "head.json").read_text())["tree_size"] == 11
    ok(ctl(log, "verify", "inclusion", "head.json", "--checkpoint", "two.cp",
           "--pubkey", "keys/signing.pub"))  # fmt: skip
    # The same proof against the smaller tree is refused: sizes differ.
    done = ctl(log, "verify", "inclusion", "head.json", "--checkpoint", "one.cp",
               "--pubkey", "keys/signing.pub")  # fmt: skip
    assert done.returncode == 1
    assert "the proof is for a tree of 11 records, the checkpoint's has 5" in done.stderr


@pytest.mark.parametrize(
    "edit",
    ["record", "hash", "index"],
)
def test_an_edited_inclusion_proof_is_refused(log: Path, edit: str) -> None:
    ok(ctl(log, "chain", "prove", "--seq", "3", "--checkpoint", "two.cp", "--out", "p3.json"))
    proof = json.loads((log / "p3.json").read_text())
    if edit == "record":
        record = json.loads(proof["record"])
        record["receipt"]["verdict"] = (
            "permit" if record["receipt"]["verdict"] != "permit" else "refuse"
        )
        proof["record"] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    elif edit == "hash":
        raw = bytearray(base64.b64decode(proof["hashes"][1]))
        raw[0] ^= 1
        proof["hashes"][1] = base64.b64encode(bytes(raw)).decode()
    else:
        proof["leaf_index"] = 4
    (log / f"edited-{edit}.json").write_text(json.dumps(proof))
    for tool in (ctl, guard):
        done = tool(log, "verify", "inclusion", f"edited-{edit}.json", "--checkpoint", "two.cp",
                    "--pubkey", "keys/signing.pub")  # fmt: skip
        assert done.returncode == 1, done.stdout
        assert f"edited-{edit}.json: " in done.stderr and "VERIFIED" not in done.stdout


def test_the_second_checkpoint_extends_the_first(log: Path) -> None:
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp",
           "--out", "c.json"))  # fmt: skip
    proof = json.loads((log / "c.json").read_text())
    assert set(proof) == {"origin", "old_size", "new_size", "hashes"}
    assert (proof["old_size"], proof["new_size"]) == (5, 11)
    args = ("verify", "consistency", "--old", "one.cp", "--new", "two.cp", "--proof", "c.json",
            "--pubkey", "keys/signing.pub")  # fmt: skip
    ours, theirs = ok(ctl(log, *args)), ok(guard(log, *args))
    assert ours.stdout == theirs.stdout
    assert ours.stdout.startswith("VERIFIED: the 11-record log")
    # Without --new: to the head, the same proof.
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--out", "c-head.json"))
    assert (log / "c-head.json").read_text() == (log / "c.json").read_text()
    # Swapped, the older cannot extend the newer.
    done = ctl(log, "verify", "consistency", "--old", "two.cp", "--new", "one.cp",
               "--proof", "c.json", "--pubkey", "keys/signing.pub")  # fmt: skip
    assert done.returncode == 1


def test_a_checkpoint_signed_by_another_key_is_refused(log: Path) -> None:
    if not (log / "other").exists():
        ok(ctl(log, "keygen", "--out", "other"))
    ok(ctl(log, "chain", "prove", "--seq", "1", "--checkpoint", "one.cp", "--out", "p1.json"))
    done = ctl(log, "verify", "inclusion", "p1.json", "--checkpoint", "one.cp",
               "--pubkey", "other/signing.pub")  # fmt: skip
    assert done.returncode == 1
    assert "one.cp: checkpoint is signed by an unknown key" in done.stderr


def _copy_log(log: Path, tmp_path: Path) -> Path:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(log, root, symlinks=True)
    return root


def test_a_record_rewritten_in_the_chain_is_never_proven_consistent(
    log: Path, tmp_path: Path
) -> None:
    # Someone with file access rewrites record 1 and drops the tree to have it rebuilt.
    root = _copy_log(log, tmp_path)
    db = root / "state" / "floorguard" / "chain.sqlite3"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("DELETE FROM tree")
    (receipt,) = conn.execute("SELECT receipt FROM records WHERE seq = 1").fetchone()
    conn.execute(
        "UPDATE records SET receipt = ? WHERE seq = 1", (receipt.replace("0.61.0", "0.61.1"),)
    )
    conn.close()
    done = ctl(root, "chain", "consistency", "--old", "one.cp")
    assert done.returncode == 1
    # No tree is built over a record that does not hold together: named before any root.
    assert "record 1's receipt_id is not its receipt's digest" in done.stderr, done.stderr
    fork = ctl(root, "chain", "checkpoint", "--signing-key", "keys/signing.key")
    assert fork.returncode == 1  # the rewritten record does not verify: never signed
    assert "refusing to sign a checkpoint" in fork.stderr


def test_a_forked_log_fails_the_consistency_check_with_the_first_checkpoint(
    log: Path, tmp_path: Path
) -> None:
    fork_cp, fork_proof = forked(log, tmp_path)
    for tool in (ctl, guard):
        done = tool(log, "verify", "consistency", "--old", "one.cp", "--new", str(fork_cp),
                    "--proof", str(fork_proof), "--pubkey", "keys/signing.pub")  # fmt: skip
        assert done.returncode == 1
        assert "the newer log does not extend the older one" in done.stderr


def test_an_old_format_checkpoint_is_named_as_such(log: Path, tmp_path: Path) -> None:
    # Before the tree, the root line was the digest of record size-1 (the hash-chain head).
    lines = ok(ctl(log, "chain", "export")).stdout.splitlines()
    head = tlog.record_of_line(lines[4])
    old = checkpoint.Checkpoint(head.chain_id, 5, bytes.fromhex(head.digest()[7:]),
                                "2026-01-01T00:00:00.000000Z")  # fmt: skip
    key = load_pem_private_key((log / "keys" / "signing.key").read_bytes(), None)
    (tmp_path / "old.cp").write_text(checkpoint.sign(old, key))  # type: ignore[arg-type]
    root = _copy_log(log, tmp_path)
    (root / "old.cp").write_bytes((tmp_path / "old.cp").read_bytes())
    # Proving against it: the chain's tree is not what it states.
    done = ctl(root, "chain", "prove", "--seq", "4", "--checkpoint", "old.cp")
    assert done.returncode == 1
    assert "the checkpoint is in the old format" in done.stderr
    # An honest proof of the last record checked against it: named, not misread.
    ok(ctl(root, "chain", "prove", "--seq", "4", "--checkpoint", "one.cp", "--out", "p4.json"))
    for tool in (ctl, guard):
        done = tool(root, "verify", "inclusion", "p4.json", "--checkpoint", "old.cp",
                    "--pubkey", "keys/signing.pub")  # fmt: skip
        assert done.returncode == 1
        assert "the checkpoint is in the old format" in done.stderr
    # The slice with it: named too.
    ok(ctl(root, "chain", "export", "--out", "all.jsonl"))
    done = ctl(root, "verify", "chain", "all.jsonl", "--checkpoint", "old.cp",
               "--pubkey", "keys/signing.pub")  # fmt: skip
    assert done.returncode == 1 and "the checkpoint is in the old format" in done.stdout


# --- witnesses ------------------------------------------------------------------------------


def test_a_witness_cosigns_a_consistent_checkpoint_in_the_c2sp_form(
    log: Path, tmp_path: Path
) -> None:
    _, second = witnessed(log, tmp_path / "state")
    text = second.read_text()
    assert text.startswith((log / "two.cp").read_text())
    line = text.splitlines()[-1]
    dash, name, blob = line.split(" ")
    raw = base64.b64decode(blob)
    assert dash == "\u2014" and name.startswith("floorguard-witness/") and len(raw) == 76
    # By hand from tlog-cosignature: key id, u64 timestamp, Ed25519 over the v1 message.
    public = load_pem_public_key((log / "w1" / "signing.pub").read_bytes())
    raw_public = public.public_bytes_raw()  # type: ignore[union-attr]
    assert raw[:4] == hashlib.sha256(name.encode() + b"\n\x04" + raw_public).digest()[:4]
    body = (log / "two.cp").read_text().split("\n\n")[0] + "\n"
    stamp = int.from_bytes(raw[4:12], "big")
    public.verify(raw[12:], f"cosignature/v1\ntime {stamp}\n{body}".encode())  # type: ignore[call-arg,union-attr]
    state = json.loads((tmp_path / "state" / f"{name_of(log)}.json").read_text())
    assert state["size"] == 11


def test_verifiers_count_only_checkpoints_with_the_required_witnesses(
    log: Path, tmp_path: Path
) -> None:
    first, second = witnessed(log, tmp_path / "state")
    ok(ctl(log, "chain", "prove", "--seq", "6", "--checkpoint", "two.cp", "--out", "p6.json"))
    base = ("verify", "inclusion", "p6.json", "--pubkey", "keys/signing.pub")
    for tool in (ctl, guard):
        ok(tool(log, *base, "--checkpoint", str(second), "--witness-key", "w1/signing.pub"))
        done = tool(log, *base, "--checkpoint", "two.cp", "--witness-key", "w1/signing.pub")
        assert done.returncode == 1
        assert "0 valid witness cosignature(s) of the given keys, 1 required" in done.stderr
        ok(tool(log, "verify", "consistency", "--old", str(first), "--new", str(second),
                "--proof", "c12.json", "--pubkey", "keys/signing.pub",
                "--witness-key", "w1/signing.pub", "--witnesses", "1"))  # fmt: skip
        usage = tool(log, *base, "--checkpoint", str(second), "--witness-key", "w1/signing.pub",
                     "--witnesses", "2")  # fmt: skip
        assert usage.returncode == 2 and "--witnesses 2 needs at least" in usage.stderr
    # A window proof with the witnessed checkpoint, and without the cosignature it needs.
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    ok(ctl(log, "verify", "chain", "all.jsonl", "--checkpoint", str(second), "--pubkey",
           "keys/signing.pub", "--witness-key", "w1/signing.pub"))  # fmt: skip
    done = ctl(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp", "--pubkey",
               "keys/signing.pub", "--witness-key", "w1/signing.pub")  # fmt: skip
    assert done.returncode == 1 and "witness cosignature" in done.stdout


def test_a_forged_cosignature_is_refused_not_ignored(log: Path, tmp_path: Path) -> None:
    _, second = witnessed(log, tmp_path / "state")
    lines = second.read_text().splitlines(keepends=True)
    dash, name, blob = lines[-1].split(" ")
    raw = bytearray(base64.b64decode(blob))
    raw[-1] ^= 1
    lines[-1] = f"{dash} {name} {base64.b64encode(bytes(raw)).decode()}\n"
    (tmp_path / "forged.cp").write_text("".join(lines))
    ok(ctl(log, "chain", "prove", "--seq", "6", "--checkpoint", "two.cp", "--out", "p6.json"))
    done = ctl(log, "verify", "inclusion", "p6.json", "--checkpoint", str(tmp_path / "forged.cp"),
               "--pubkey", "keys/signing.pub", "--witness-key", "w1/signing.pub")  # fmt: skip
    assert done.returncode == 1 and "does not verify" in done.stderr


def test_a_witness_refuses_a_fork_and_a_smaller_tree(log: Path, tmp_path: Path) -> None:
    witnessed(log, tmp_path / "state")
    fork_cp, fork_proof = forked(log, tmp_path)
    cosign = ("witness", "cosign", "--key", "w1/signing.key", "--pubkey", "keys/signing.pub",
              "--state", str(tmp_path / "state"))  # fmt: skip
    before = (tmp_path / "state" / f"{name_of(log)}.json").read_text()
    # After two.cp (size 11): the rewritten log's size-11 checkpoint is a second root.
    done = ctl(log, *cosign, "--old", "two.cp", "--new", str(fork_cp), "--proof", "c12.json")
    assert done.returncode == 1
    assert "refusing to cosign a fork: a second root for size 11" in done.stderr
    # From one.cp, with the forger's best consistency proof: it does not verify.
    done = ctl(log, *cosign, "--old", "one.cp", "--new", str(fork_cp), "--proof", str(fork_proof))
    assert done.returncode == 1 and "refusing to cosign" in done.stderr
    # A smaller tree than the last one cosigned.
    done = ctl(log, *cosign, "--old", "two.cp", "--new", "one.cp", "--proof", "c11.json")
    assert done.returncode == 1
    assert "refusing to cosign a smaller tree: 5 records, after 11" in done.stderr
    assert (tmp_path / "state" / f"{name_of(log)}.json").read_text() == before
    # A fresh witness shown only the fork refuses it too: the proof from one.cp fails.
    done = ctl(log, "witness", "cosign", "--key", "w1/signing.key", "--pubkey",
               "keys/signing.pub", "--state", str(tmp_path / "fresh"), "--old", "one.cp",
               "--new", str(fork_cp), "--proof", str(fork_proof))  # fmt: skip
    assert done.returncode == 1 and not (tmp_path / "fresh" / f"{name_of(log)}.json").exists()
    # And a verifier given the fork, the old checkpoint and that proof fails it.
    done = guard(log, "verify", "consistency", "--old", "one.cp", "--new", str(fork_cp),
                 "--proof", str(fork_proof), "--pubkey", "keys/signing.pub")  # fmt: skip
    assert done.returncode == 1


def test_a_window_proof_starts_where_the_last_audit_ended(log: Path) -> None:
    # The last audit ended at one.cp (5 records); now only records 4.. are exported.
    lines = ok(ctl(log, "chain", "export")).stdout.splitlines(keepends=True)
    (log / "since.jsonl").write_text("".join(lines[4:]))
    since = json.loads(lines[5])["ts"]
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c.json"))
    args = ("verify", "chain", "since.jsonl", "--since", since, "--checkpoint", "two.cp",
            "--pubkey", "keys/signing.pub", "--previous-checkpoint", "one.cp",
            "--consistency", "c.json")  # fmt: skip
    ours, theirs = ok(ctl(log, *args)), ok(guard(log, *args))
    assert ours.stdout == theirs.stdout
    assert ours.stdout.startswith("PROVEN\n7 record(s), seq 4..10")
    assert "authenticated: records up to seq 10 by the signed checkpoint" in ours.stdout
    # A record rewritten after one.cp (links recomputed by a forger without the key): caught.
    records = [json.loads(line) for line in lines[4:]]
    records[3]["receipt"]["version"] = "0.99.0"
    (log / "forged.jsonl").write_text("".join(relink(records)))
    done = ctl(log, *(a if a != "since.jsonl" else "forged.jsonl" for a in args))
    assert done.returncode == 1
    assert "are not the records the consistency proof says were appended" in done.stdout
    # Without the consistency proof the slice cannot reach the checkpoint's root.
    done = ctl(log, "verify", "chain", "since.jsonl", "--since", since, "--checkpoint", "two.cp",
               "--pubkey", "keys/signing.pub")  # fmt: skip
    assert done.returncode == 1 and "not at genesis" in done.stdout
    usage = ctl(log, "verify", "chain", "since.jsonl", "--checkpoint", "two.cp", "--pubkey",
                "keys/signing.pub", "--previous-checkpoint", "one.cp")  # fmt: skip
    assert usage.returncode == 2


def test_an_exported_window_with_its_checkpoint_and_inclusion_proof_is_proven(log: Path) -> None:
    lines = ok(ctl(log, "chain", "export")).stdout.splitlines()
    since = json.loads(lines[6])["ts"]
    ok(ctl(log, "chain", "export", "--since", since, "--out", "w.jsonl", "--checkpoint-out",
           "w.cp", "--inclusion-out", "w.proof", "--signing-key", "keys/signing.key"))  # fmt: skip
    assert json.loads((log / "w.jsonl").read_text().splitlines()[0])["seq"] == 5
    args = ("verify", "chain", "w.jsonl", "--since", since, "--checkpoint", "w.cp",
            "--pubkey", "keys/signing.pub", "--inclusion", "w.proof")  # fmt: skip
    ours, theirs = ok(ctl(log, *args)), ok(guard(log, *args))
    assert ours.stdout == theirs.stdout and ours.stdout.startswith("PROVEN")
    usage = ctl(log, "chain", "export", "--inclusion-out", "x.proof")
    assert usage.returncode == 2 and "--inclusion-out needs --checkpoint-out" in usage.stderr
