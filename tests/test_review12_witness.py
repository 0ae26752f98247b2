"""Review of issue 12's witnesses and how proofs feed the window proof: attacks on `floorctl
witness cosign` (its state folder), on the verifiers' --witness-key / --witnesses quorum and
on `verify chain --previous-checkpoint`, each test named after the attack it stops."""

from __future__ import annotations

import base64
import fcntl
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from helpers.tlog_support import ctl, forked, guard, name_of, ok, witnessed

from floorguard import checkpoint, tlog

pytestmark = pytest.mark.slow  # (run by .ci/run, not by the README's test command)


def both(log: Path, *args: str) -> tuple[int, str, str]:
    """Run both CLIs; they must agree on exit code, stdout and the error after its prefix."""
    ours, theirs = ctl(log, *args), guard(log, *args)
    assert ours.returncode == theirs.returncode, (ours.stderr, theirs.stderr)
    assert ours.stdout == theirs.stdout
    assert ours.stderr.removeprefix("floorctl: ") == theirs.stderr.removeprefix("floorguard: ")
    return ours.returncode, ours.stdout, ours.stderr


def _inclusion_args(log: Path, cp: Path, *extra: str) -> tuple[str, ...]:
    ok(ctl(log, "chain", "prove", "--seq", "6", "--checkpoint", "two.cp", "--out", "p6.json"))
    return ("verify", "inclusion", "p6.json", "--checkpoint", str(cp), "--pubkey",
            "keys/signing.pub", *extra)  # fmt: skip


# --- the verifiers' quorum ------------------------------------------------------------------


def test_one_witness_key_given_twice_does_not_count_as_two_witnesses(
    log: Path, tmp_path: Path
) -> None:
    _, second = witnessed(log, tmp_path / "state")
    (tmp_path / "copy.pub").write_bytes((log / "w1" / "signing.pub").read_bytes())
    for keys in (
        ("w1/signing.pub", "w1/signing.pub"),
        ("w1/signing.pub", str(tmp_path / "copy.pub")),
    ):
        flags = [flag for key in keys for flag in ("--witness-key", key)]
        code, _, err = both(log, *_inclusion_args(log, second, *flags, "--witnesses", "2"))
        assert code == 1, err
        assert "the same witness key" in err


def test_the_logs_own_key_is_refused_as_a_witness_key(log: Path, tmp_path: Path) -> None:
    # The log operator cosigning its own checkpoint is no independent witness.
    ok(ctl(log, "witness", "cosign", "--old", "two.cp", "--new", "two.cp", "--proof",
           _same(log), "--key", "keys/signing.key", "--pubkey", "keys/signing.pub", "--state",
           str(tmp_path / "self"), "--out", str(tmp_path / "self.cp")))  # fmt: skip
    code, _, err = both(log, *_inclusion_args(log, tmp_path / "self.cp", "--witness-key",
                                              "keys/signing.pub"))  # fmt: skip
    assert code == 1 and "is the log's own key" in err


def _same(log: Path) -> str:
    ok(ctl(log, "chain", "consistency", "--old", "two.cp", "--new", "two.cp", "--out", "c22.json"))
    return "c22.json"


@pytest.mark.parametrize("quorum", ["-1", "3"])
def test_an_unmeetable_quorum_is_a_usage_error_in_both_clis(
    log: Path, tmp_path: Path, quorum: str
) -> None:
    _, second = witnessed(log, tmp_path / "state")
    args = _inclusion_args(log, second, "--witness-key", "w1/signing.pub", "--witnesses", quorum)
    for tool in (ctl, guard):
        done = tool(log, *args)
        assert done.returncode == 2 and "--witnesses" in done.stderr and not done.stdout


def test_a_cosignature_copied_from_another_checkpoint_of_the_log_does_not_count(
    log: Path, tmp_path: Path
) -> None:
    first, _ = witnessed(log, tmp_path / "state")
    line = first.read_text().splitlines(keepends=True)[-1]
    (tmp_path / "copied.cp").write_text((log / "two.cp").read_text() + line)
    code, _, err = both(log, *_inclusion_args(log, tmp_path / "copied.cp", "--witness-key",
                                              "w1/signing.pub"))  # fmt: skip
    assert code == 1 and "cosignature of" in err and "does not verify" in err


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


# --- the witness's state --------------------------------------------------------------------


def _cosign(log: Path, state: Path, old: str, new: str, proof: str) -> tuple[int, str]:
    done = ctl(log, "witness", "cosign", "--old", old, "--new", new, "--proof", proof,
               "--key", "w1/signing.key", "--pubkey", "keys/signing.pub",
               "--state", str(state))  # fmt: skip
    return done.returncode, done.stderr


def test_a_dangling_link_as_state_file_does_not_reset_the_witness(
    log: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    witnessed(log, state)
    file = state / f"{name_of(log)}.json"
    file.unlink()
    file.symlink_to(tmp_path / "nowhere.json")
    code, err = _cosign(log, state, "one.cp", "two.cp", "c12.json")
    assert code == 1 and "state" in err  # not silently treated as a first cosigning


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_state_folder_others_can_write_is_refused(log: Path, tmp_path: Path, mode: int) -> None:
    # Anyone who can delete the state file makes the witness forget and cosign a fork.
    state = tmp_path / "state"
    witnessed(log, state)
    os.chmod(state, mode)
    code, err = _cosign(log, state, "two.cp", "two.cp", _same(log))
    assert code == 1 and "writable by others" in err and str(state) in err
    os.chmod(state, 0o700)
    os.chmod(state / f"{name_of(log)}.json", mode & 0o666)
    code, err = _cosign(log, state, "two.cp", "two.cp", _same(log))
    assert code == 1 and "writable by others" in err and str(state) in err


def test_a_cosign_while_another_holds_the_state_is_refused_not_raced(
    log: Path, tmp_path: Path
) -> None:
    # Two cosigns at once could both read size 5 and cosign two forks of size 11.
    state = tmp_path / "state"
    witnessed(log, state)
    with open(state / ".lock", "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        code, err = _cosign(log, state, "two.cp", "two.cp", _same(log))
    assert code == 1 and "in use by another" in err
    ok_code, _ = _cosign(log, state, "two.cp", "two.cp", "c22.json")
    assert ok_code == 0


@pytest.mark.parametrize(
    "content", [b"", b'{"origin": "floorguard/x", "size": 5', b'{"origin": 1}', b"\xff"]
)
def test_a_corrupt_state_file_is_refused_and_left_as_it_was(
    log: Path, tmp_path: Path, content: bytes
) -> None:
    state = tmp_path / "state"
    witnessed(log, state)
    file = state / f"{name_of(log)}.json"
    file.write_bytes(content)
    code, err = _cosign(log, state, "one.cp", "two.cp", "c12.json")
    assert code == 1 and str(file) in err and "Traceback" not in err
    assert file.read_bytes() == content


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


def test_a_line_under_one_witnesses_name_signed_by_another_is_refused_and_stray_lines_ignored(
    log: Path, tmp_path: Path
) -> None:
    from floorguard import witness

    for name in ("w1", "w2"):
        if not (log / name).exists():
            ok(ctl(log, "keygen", "--out", name))
    data = (log / "two.cp").read_text()
    body, _ = checkpoint.split_note(data.encode())
    a, b = (
        load_pem_private_key((log / n / "signing.key").read_bytes(), None) for n in ("w1", "w2")
    )
    public_a = checkpoint.raw_public(a.public_key())  # type: ignore[arg-type]
    name_a = witness.default_name(public_a)
    signed_by_b = b.sign(witness.signed_message(body, 5))  # type: ignore[union-attr,call-arg]
    blob = witness.witness_key_id(name_a, public_a) + (5).to_bytes(8, "big") + signed_by_b
    (tmp_path / "ab.cp").write_text(data + f"\u2014 {name_a} {base64.b64encode(blob).decode()}\n")
    code, _, err = both(log, *_inclusion_args(log, tmp_path / "ab.cp", "--witness-key",
                                              "w1/signing.pub"))  # fmt: skip
    assert code == 1 and f"cosignature of {name_a} does not verify" in err
    stray = f"\u2014 someone.example/w {base64.b64encode(bytes(76)).decode()}\n"
    line = witness.cosignature_line(body, name_a, a, 0)  # type: ignore[arg-type]
    (tmp_path / "stray.cp").write_text(data + stray + line)
    code, _, err = both(log, *_inclusion_args(log, tmp_path / "stray.cp", "--witness-key",
                                              "w1/signing.pub"))  # fmt: skip
    assert code == 0, err


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
