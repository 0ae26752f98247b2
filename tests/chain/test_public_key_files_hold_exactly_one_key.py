"""A public key file holds exactly one PEM key and nothing else but white space around it.

PEM loading reads the first block and ignores the rest, so a file with text after its key
verified, one holding another key first was refused as the wrong key although it held the
right one, and one holding two keys trusted only the first. Every key a verifier reads
(the log's --pubkey of verify inclusion and verify chain, each --witness-key) is refused,
exit 1, naming the file and what else it holds; a file of one key verifies. Both CLIs
agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.tlog_support import _inclusion_args, both, ctl, guard, ok, witnessed

MORE_THAN_ONE = "holds more than one key"
TEXT_AFTER = "holds text after its key"
TEXT_BEFORE = "holds text before its key"


def _key_files(log: Path, folder: Path) -> dict[str, tuple[Path, str]]:
    """Files around the log's key (keys/signing.pub), each with what is wrong with it."""
    if not (log / "other").exists():
        ok(ctl(log, "keygen", "--out", "other"))
    right = (log / "keys" / "signing.pub").read_bytes()
    other = (log / "other" / "signing.pub").read_bytes()
    private = (log / "other" / "signing.key").read_bytes()
    contents = {
        "trailing-junk": (right + b"trailing junk\n", TEXT_AFTER),
        "junk-without-newline": (right.rstrip() + b"junk", TEXT_AFTER),
        "leading-junk": (b"junk\n" + right, TEXT_BEFORE),
        "other-key-first": (other + right, MORE_THAN_ONE),
        "right-key-first": (right + other, MORE_THAN_ONE),
        "right-key-twice": (right + right, MORE_THAN_ONE),
        "a-private-key-after": (right + private, MORE_THAN_ONE),
    }
    files = {}
    for name, (data, said) in contents.items():
        (folder / f"{name}.pub").write_bytes(data)
        files[name] = (folder / f"{name}.pub", said)
    return files


CASES = [
    "trailing-junk",
    "junk-without-newline",
    "leading-junk",
    "other-key-first",
    "right-key-first",
    "right-key-twice",
    "a-private-key-after",
]


@pytest.mark.parametrize("case", CASES)
def test_a_log_key_file_holding_more_than_its_key_is_refused_by_verify_inclusion(
    log: Path, tmp_path: Path, case: str
) -> None:
    path, said = _key_files(log, tmp_path)[case]
    args = list(_inclusion_args(log, log / "two.cp"))
    args[args.index("keys/signing.pub")] = str(path)
    code, out, err = both(log, *args)
    assert code == 1, (out, err)
    assert "VERIFIED" not in out, out
    assert f"{path}: {said}" in err, err


@pytest.mark.parametrize("case", ["trailing-junk", "right-key-first"])
def test_a_log_key_file_holding_more_than_its_key_is_refused_by_verify_chain(
    log: Path, tmp_path: Path, case: str
) -> None:
    path, said = _key_files(log, tmp_path)[case]
    (tmp_path / "slice.jsonl").write_text(ok(ctl(log, "chain", "export")).stdout)
    for tool, prefix in ((ctl, "floorctl"), (guard, "floorguard")):
        done = tool(log, "verify", "chain", str(tmp_path / "slice.jsonl"),
                    "--checkpoint", "two.cp", "--pubkey", str(path))  # fmt: skip
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert not done.stdout, done.stdout
        assert f"{prefix}: error: {path}: {said}" in done.stderr, done.stderr


@pytest.mark.parametrize("case", ["trailing-junk", "right-key-first", "leading-junk"])
def test_a_witness_key_file_holding_more_than_its_key_is_refused(
    log: Path, tmp_path: Path, case: str
) -> None:
    _, second = witnessed(log, tmp_path / "state")
    right = (log / "w1" / "signing.pub").read_bytes()
    other = (log / "keys" / "signing.pub").read_bytes()
    data, said = {
        "trailing-junk": (right + b"junk\n", TEXT_AFTER),
        "right-key-first": (right + other, MORE_THAN_ONE),
        "leading-junk": (b"junk\n" + right, TEXT_BEFORE),
    }[case]
    (tmp_path / "witness.pub").write_bytes(data)
    code, out, err = both(log, *_inclusion_args(
        log, second, "--witness-key", str(tmp_path / "witness.pub"), "--witnesses", "1",
    ))  # fmt: skip
    assert code == 1, (out, err)
    assert f"{tmp_path / 'witness.pub'}: {said}" in err, err


def test_a_key_file_of_one_key_in_white_space_verifies(log: Path, tmp_path: Path) -> None:
    _, second = witnessed(log, tmp_path / "state")
    for name in ("keys", "w1"):
        pem = (log / name / "signing.pub").read_bytes()
        (tmp_path / f"{name}.pub").write_bytes(
            b"\n \t\r\n" + pem.replace(b"\n", b"\r\n") + b"\n\n "
        )
    args = list(_inclusion_args(log, second, "--witness-key", str(tmp_path / "w1.pub")))
    args[args.index("keys/signing.pub")] = str(tmp_path / "keys.pub")
    code, out, err = both(log, *args)
    assert code == 0, err
    assert "VERIFIED" in out, out
    # and the files keygen writes, as they are
    code, out, err = both(log, *_inclusion_args(log, second, "--witness-key", "w1/signing.pub"))
    assert code == 0, err
