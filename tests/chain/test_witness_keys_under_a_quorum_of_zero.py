"""A quorum of 0 (``--witnesses 0``) relies on no witness, but every witness key given is
still checked: a cosignature line of a given key that does not verify is an error, and so
is one key given twice or the log's own key given as a witness key. Both CLIs agree."""

from __future__ import annotations

from pathlib import Path

from helpers.tlog_support import _inclusion_args, both, witnessed


def _broken(cosigned: Path, out: Path) -> Path:
    """``cosigned`` with one base64 character of its witness line's signature changed."""
    lines = cosigned.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("— floorguard-witness/"))
    line = lines[index]
    lines[index] = line[:-6] + ("A" if line[-6] != "A" else "B") + line[-5:]
    out.write_text("\n".join(lines) + "\n")
    return out


def test_a_cosignature_that_does_not_verify_is_an_error_under_a_quorum_of_zero(
    log: Path, tmp_path: Path
) -> None:
    _, second = witnessed(log, tmp_path / "state")
    bad = _broken(second, tmp_path / "bad.cp")
    for quorum in ("1", "0"):
        code, out, err = both(log, *_inclusion_args(
            log, bad, "--witness-key", "w1/signing.pub", "--witnesses", quorum,
        ))  # fmt: skip
        assert code == 1 and "does not verify" in err, (quorum, out, err)


def test_a_key_given_twice_or_the_logs_own_key_is_an_error_under_a_quorum_of_zero(
    log: Path, tmp_path: Path
) -> None:
    _, second = witnessed(log, tmp_path / "state")
    for keys, said in (
        (("w1/signing.pub", "w1/signing.pub"), "the same witness key"),
        (("keys/signing.pub",), "is the log's own key"),
    ):
        flags = [flag for key in keys for flag in ("--witness-key", key)]
        code, _, err = both(log, *_inclusion_args(log, second, *flags, "--witnesses", "0"))
        assert code == 1 and said in err, (keys, err)


def test_a_quorum_of_zero_with_sound_cosignatures_verifies(log: Path, tmp_path: Path) -> None:
    _, second = witnessed(log, tmp_path / "state")
    code, out, err = both(log, *_inclusion_args(
        log, second, "--witness-key", "w1/signing.pub", "--witnesses", "0",
    ))  # fmt: skip
    assert code == 0, err
    assert "VERIFIED" in out or "verified" in out.lower(), out
