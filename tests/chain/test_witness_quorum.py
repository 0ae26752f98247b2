"""The verifiers' witness quorum (--witness-key / --witnesses): each witness counts once, the
log's own key is no witness, an unmeetable quorum is a usage error, and only a cosignature
of this checkpoint by the named witness counts. Both CLIs must agree."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from helpers.tlog_support import _inclusion_args, _same, both, ctl, guard, ok, witnessed

from floorguard._proofs import checkpoint

pytestmark = pytest.mark.slow


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


def test_a_line_under_one_witnesses_name_signed_by_another_is_refused_and_stray_lines_ignored(
    log: Path, tmp_path: Path
) -> None:
    from floorguard._proofs import witness

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
