"""A verifier given witness keys says how many of them cosigned each checkpoint and how many
were required, in its text and its --json, in both CLIs: a run that passed on one
cosignature of three keys does not read like one that had all three. Without witness keys
the output names no witnesses at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.tlog_support import _inclusion_args, both, ctl, guard, ok, witnessed

pytestmark = pytest.mark.slow

TWO_KEYS = ("--witness-key", "w1/signing.pub", "--witness-key", "w2/signing.pub")


@pytest.fixture(scope="module")
def cosigned_by_w1(log: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """one.cp and two.cp as witness w1 cosigned them; w2 holds a key and cosigned nothing."""
    if not (log / "w2").exists():
        ok(ctl(log, "keygen", "--out", "w2"))
    return witnessed(log, tmp_path_factory.mktemp("witness") / "state")


def test_verify_inclusion_states_the_cosignatures_counted(
    log: Path, cosigned_by_w1: tuple[Path, Path]
) -> None:
    _, second = cosigned_by_w1
    args = _inclusion_args(log, second, *TWO_KEYS, "--witnesses", "1")
    code, out, err = both(log, *args)
    assert code == 0, err
    assert "the checkpoint cosigned by 1 of the 2 witness key(s) given (1 required)" in out
    code, out, err = both(log, *args, "--json")
    assert code == 0, err
    assert json.loads(out)["witnesses"] == {"cosigned": 1, "required": 1, "keys": 2}


def test_verify_consistency_states_each_checkpoints_cosignatures(
    log: Path, cosigned_by_w1: tuple[Path, Path]
) -> None:
    first, second = cosigned_by_w1
    args = ("verify", "consistency", "--old", str(first), "--new", str(second), "--proof",
            "c12.json", "--pubkey", "keys/signing.pub", *TWO_KEYS, "--witnesses", "1")  # fmt: skip
    code, out, err = both(log, *args)
    assert code == 0, err
    assert "the old checkpoint cosigned by 1 of the 2" in out
    assert "the new one cosigned by 1 of the 2" in out
    code, out, err = both(log, *args, "--json")
    assert code == 0, err
    counted = {"cosigned": 1, "required": 1, "keys": 2}
    assert json.loads(out)["witnesses"] == {"old": counted, "new": counted}


def test_verify_chain_states_the_checkpoints_cosignatures(
    log: Path, cosigned_by_w1: tuple[Path, Path]
) -> None:
    _, second = cosigned_by_w1
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    args = ("verify", "chain", "all.jsonl", "--checkpoint", str(second), "--pubkey",
            "keys/signing.pub", "--witness-key", "w1/signing.pub")  # fmt: skip
    text = ok(ctl(log, *args)).stdout
    assert "PROVEN" in text
    assert "cosigned by 1 of the 1 witness key(s) given (1 required)" in text
    for tool in (ctl, guard):
        document = json.loads(ok(tool(log, *args, "--json")).stdout)
        assert document["proven"] is True
        assert document["witnesses"] == {"cosigned": 1, "required": 1, "keys": 1}


def test_without_witness_keys_no_witnesses_are_claimed(
    log: Path, cosigned_by_w1: tuple[Path, Path]
) -> None:
    _, second = cosigned_by_w1
    code, out, err = both(log, *_inclusion_args(log, second), "--json")
    assert code == 0, err
    assert "witnesses" not in json.loads(out)
    text = both(log, *_inclusion_args(log, second))[1]
    assert "cosigned" not in text
    ok(ctl(log, "chain", "export", "--out", "all.jsonl"))
    args = ("verify", "chain", "all.jsonl", "--checkpoint", str(second), "--pubkey",
            "keys/signing.pub")  # fmt: skip
    assert "cosigned" not in ok(ctl(log, *args)).stdout
    assert "witnesses" not in json.loads(ok(ctl(log, *args, "--json")).stdout)
