"""A checkpoint's time is a claim that no later record is stamped before it: `verify chain`
with the last audit's checkpoint refuses one that the records (or the next checkpoint)
show was ahead of the chain's clock, as a server reporting a clock ahead would make it.
The windows it closed may leave records out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cryptography.hazmat.primitives.serialization import load_pem_private_key
from helpers.tlog_support import _same, both, ctl, ok

from floorguard._proofs import checkpoint

AHEAD = "2099-01-01T00:00:00.000000Z"


def _dated(log: Path, name: str, time: str, out: Path) -> Path:
    """``log/name`` signed again with its key, stating ``time``."""
    body, _ = checkpoint.split_note((log / name).read_bytes())
    stated = dataclasses.replace(checkpoint.parse_body(body), time=time)
    key = load_pem_private_key((log / "keys" / "signing.key").read_bytes(), None)
    out.write_text(checkpoint.sign(stated, key))  # type: ignore[arg-type]
    return out


def _verify(log: Path, previous: Path, current: Path) -> tuple[int, str]:
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    ok(ctl(log, "chain", "consistency", "--old", "one.cp", "--new", "two.cp", "--out", "c.json"))
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", str(current),
                        "--pubkey", "keys/signing.pub", "--previous-checkpoint", str(previous),
                        "--consistency", "c.json")  # fmt: skip
    return code, out


def test_records_after_the_previous_checkpoint_stamped_before_its_time_refuse(
    log: Path, tmp_path: Path
) -> None:
    previous = _dated(log, "one.cp", AHEAD, tmp_path / "one-ahead.cp")
    current = _dated(log, "two.cp", "2099-01-02T00:00:00.000000Z", tmp_path / "two-later.cp")
    code, out = _verify(log, previous, current)
    assert code == 1, out
    # (listed under the record it is about)
    assert "seq 5: record 5, after the previous checkpoint's 5 records, is stamped" in out, out


def test_a_checkpoint_dated_before_the_previous_one_refuses(log: Path, tmp_path: Path) -> None:
    previous = _dated(log, "one.cp", AHEAD, tmp_path / "one-ahead.cp")
    code, out = _verify(log, previous, log / "two.cp")
    assert code == 1, out
    assert "before the previous checkpoint" in out, out


def test_checkpoints_in_the_order_of_their_records_pass(log: Path) -> None:
    code, out = _verify(log, log / "one.cp", log / "two.cp")
    assert code == 0 and out.startswith("PROVEN"), out


def test_a_checkpoint_of_the_same_size_dated_earlier_is_no_contradiction(
    log: Path, tmp_path: Path
) -> None:
    """A checkpoint signed without the chain's lock (an auditor's role) states its last
    record's time: earlier than one of the same size signed with it, and both hold."""
    later = _dated(log, "two.cp", AHEAD, tmp_path / "two-ahead.cp")
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    code, out, _ = both(log, "verify", "chain", "all.jsonl", "--checkpoint", "two.cp",
                        "--pubkey", "keys/signing.pub", "--previous-checkpoint", str(later),
                        "--consistency", _same(log))  # fmt: skip
    assert code == 0 and out.startswith("PROVEN"), out
