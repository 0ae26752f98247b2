"""`verify chain` with the last audit's checkpoint (--previous-checkpoint) and the proofs that
feed the window proof: a log forked from genesis is not proven, an old-format previous
checkpoint is named as such, and an inclusion proof given is checked, never ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from helpers.tlog_support import _same, both, ctl, forked, guard, ok

from floorguard._proofs import checkpoint, tlog

pytestmark = pytest.mark.slow


# --- verify chain --previous-checkpoint -----------------------------------------------------


def test_a_forked_log_from_genesis_is_not_proven_against_the_last_audits_checkpoint(
    log: Path, tmp_path: Path
) -> None:
    # The last audit ended at one.cp; since then the operator rewrote record 1 and re-signed.
    # The forked slice from genesis matches its own checkpoint, but not where the audit ended.
    fork_cp, fork_proof = forked(log, tmp_path)
    fork = tmp_path / "fork.jsonl"
    code, out, _ = both(log, "verify", "chain", str(fork), "--checkpoint", str(fork_cp),
                        "--pubkey", "keys/signing.pub", "--previous-checkpoint", "one.cp",
                        "--consistency", str(fork_proof))  # fmt: skip
    assert code == 1 and "previous checkpoint" in out, out
    # The honest log from genesis with the honest proof still passes.
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c.json"))
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp",
                        "--pubkey", "keys/signing.pub", "--previous-checkpoint", "one.cp",
                        "--consistency", "c.json")  # fmt: skip
    assert code == 0 and out.startswith("PROVEN"), out
    # No record since the last audit: the same checkpoint, the empty proof.
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp",
                        "--pubkey", "keys/signing.pub", "--previous-checkpoint", "two.cp",
                        "--consistency", _same(log))  # fmt: skip
    assert code == 0 and out.startswith("PROVEN"), out
    # A real proof, but between other sizes than the two checkpoints.
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp",
                        "--pubkey", "keys/signing.pub", "--previous-checkpoint", "one.cp",
                        "--consistency", "c22.json")  # fmt: skip
    assert code == 1 and "the proof is from size 11 to 11" in out, out


def test_an_old_format_previous_checkpoint_is_named_as_such_when_the_slice_holds_its_record(
    log: Path, tmp_path: Path
) -> None:
    lines = ok(ctl(log, "chain", "export")).stdout.splitlines()
    head = tlog.record_of_line(lines[4])
    old = checkpoint.Checkpoint(head.chain_id, 5, bytes.fromhex(head.digest()[7:]),
                                "2026-01-01T00:00:00.000000Z")  # fmt: skip
    key = load_pem_private_key((log / "keys" / "signing.key").read_bytes(), None)
    (tmp_path / "old.cp").write_text(checkpoint.sign(old, key))  # type: ignore[arg-type]
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c.json"))
    (tmp_path / "since4.jsonl").write_text("".join(line + "\n" for line in lines[4:]))
    since = json.loads(lines[5])["ts"]
    for slice_args in (("all.jsonl",), (str(tmp_path / "since4.jsonl"), "--since", since)):
        code, out, _ = both(log, "verify", "chain", *slice_args, "--checkpoint", "two.cp",
                            "--pubkey", "keys/signing.pub", "--previous-checkpoint",
                            str(tmp_path / "old.cp"), "--consistency", "c.json")  # fmt: skip
        assert code == 1
        assert "previous checkpoint: the checkpoint is in the old format" in out, out


def test_an_inclusion_proof_given_is_checked_never_ignored(log: Path) -> None:
    # A proof of another record: wrong for this checkpoint even if the slice needs none.
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    ok(ctl(log, "chain", "prove", "--seq", "6", "--checkpoint", "two.cp", "--out", "p6.json"))
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp",
                        "--pubkey", "keys/signing.pub", "--inclusion", "p6.json")  # fmt: skip
    assert code == 1 and "the inclusion proof is for leaf 6 of 11" in out, out
    ok(ctl(log, "chain", "prove", "--seq", "10", "--checkpoint", "two.cp", "--out", "p10.json"))
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp",
                        "--pubkey", "keys/signing.pub", "--inclusion", "p10.json")  # fmt: skip
    assert code == 0, out
    # Without a checkpoint there is no root to check it against; with a previous
    # checkpoint it would go unused.
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c.json"))
    for extra in ((), ("--checkpoint", "two.cp", "--pubkey", "keys/signing.pub",
                       "--previous-checkpoint", "one.cp", "--consistency", "c.json")):  # fmt: skip
        for tool in (ctl, guard):
            done = tool(log, "verify", "chain", "all.jsonl", "--inclusion", "p10.json", *extra)
            assert done.returncode == 2 and "--inclusion" in done.stderr, done.stderr
