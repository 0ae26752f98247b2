"""The chain's HMAC key, or the chain with its key, replaced under a process that keeps its
chain open (and the key's HMAC pads with it) between two appends.

Every record the process writes must be MACed with the key of the chain it is written to,
as that key is on disk when it writes; a head that no longer verifies under the key on
disk refuses the append of a chain only this host writes; and ``floorctl verify chain``
names every record whose MAC the key given does not make.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import isolated_env
from helpers.long_lived import LongLived, backup_chain

from floorguard._chain.chain import _row_body, record_mac

# A long attack suite: run by .ci/run after the README's command.
pytestmark = pytest.mark.attack


def _export(env: dict[str, str]) -> list[dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "floorctl", "chain", "export"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _verify(
    env: dict[str, str], key_file: Path, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    slice_file = tmp_path / "slice.jsonl"
    done = subprocess.run([sys.executable, "-m", "floorctl", "chain", "export", "--out",
                           str(slice_file)], env=env, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return subprocess.run(
        [sys.executable, "-m", "floorctl", "verify", "chain", str(slice_file),
         "--key-file", str(key_file), "--json"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _mac_ok(record: dict[str, Any], key: bytes) -> bool:
    row = tuple(
        json.dumps(record[k], separators=(",", ":"), sort_keys=True) if k == "receipt"
        else record[k]
        for k in ("seq", "ts", "chain_id", "event", "receipt_id", "receipt", "prev")
    )  # fmt: skip
    return bool(record_mac(key, _row_body((*row, "")).encode()) == record["mac"])  # type: ignore[arg-type]


def _new_key(path: Path, *, in_place: bool) -> bytes:
    key = secrets.token_bytes(32)
    if in_place:
        with path.open("r+") as file:
            file.write(key.hex())
    else:
        path.with_name("key.new").write_text(key.hex() + "\n")
        os.chmod(path.with_name("key.new"), 0o600)
        os.replace(path.with_name("key.new"), path)
    return key


@pytest.mark.parametrize("in_place", [False, True], ids=["by-rename", "in-place"])
def test_a_key_replaced_under_the_process_never_leaves_a_record_its_key_does_not_make(
    env: dict[str, str], home: Path, in_place: bool
) -> None:
    with LongLived(env) as host:
        host.appended(3)
        old = bytes.fromhex((home / "chain.key").read_text().strip())
        new = _new_key(home / "chain.key", in_place=in_place)
        answer = host.append()
    records = _export(env)
    # the head (MACed with the old key) does not verify under the key now on disk: refused
    assert "refused" in answer, answer
    assert len(records) == 3
    assert all(_mac_ok(r, old) for r in records)
    assert not any(_mac_ok(r, new) for r in records)


def test_the_key_put_back_lets_the_same_process_append_again(
    env: dict[str, str], home: Path
) -> None:
    with LongLived(env) as host:
        host.appended(2)
        kept = (home / "chain.key").read_bytes()
        _new_key(home / "chain.key", in_place=False)
        assert "refused" in host.append()
        (home / "chain.key").write_bytes(kept)
        assert host.appended(2) == [2, 3]
    key = bytes.fromhex(kept.decode().strip())
    assert all(_mac_ok(r, key) for r in _export(env))


def _swap_in_another_chain(env: dict[str, str], home: Path, tmp_path: Path) -> dict[str, Any]:
    """A process appends 3 records, another chain of 5 records (with its own key) is put
    in place of its chain and key by rename, and the process appends again: its answer."""
    other = isolated_env(tmp_path / "other")
    other_process = LongLived(other)
    other_process.appended(5)
    other_process.close()
    with LongLived(env) as host:
        host.appended(3)
        for name in ("chain.sqlite3-wal", "chain.sqlite3-shm"):
            (home / name).unlink(missing_ok=True)
        swapped = backup_chain(Path(other["FLOORGUARD_HOME"]), tmp_path / "swap")
        for name in ("chain.sqlite3", "chain.key"):
            os.replace(swapped / name, home / name)
        return host.append()


def test_another_chain_and_its_key_swapped_in_under_the_process_are_not_appended_to(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    answer = _swap_in_another_chain(env, home, tmp_path)
    assert "refused" in answer, answer
    assert len(_export(env)) == 5


def test_another_chain_swapped_in_under_the_process_is_refused_as_replaced_and_recorded(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    answer = _swap_in_another_chain(env, home, tmp_path)
    assert "replaced by another chain" in answer.get("refused", ""), answer
    refusals = home / "chain-refusals.jsonl"
    assert refusals.exists(), "the refusal was not recorded on the host"
    assert json.loads(refusals.read_text().splitlines()[-1])["event"] == "replaced"


def test_a_key_made_for_the_chain_by_another_process_is_the_key_the_next_record_verifies_with(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    # The chain restored with its own (older, same) key by rename: the key file is new, the
    # key is the same, so appends go on and every record verifies with the key on disk.
    with LongLived(env) as host:
        host.appended(2)
        shutil.copy2(home / "chain.key", tmp_path / "same.key")
        os.replace(tmp_path / "same.key", home / "chain.key")
        assert host.appended(2) == [2, 3]
    done = _verify(env, home / "chain.key", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_verify_chain_names_every_record_a_replaced_key_does_not_make(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    with LongLived(env) as host:
        host.appended(3)
    wrong = tmp_path / "wrong.key"
    wrong.write_text(secrets.token_hex(32) + "\n")
    wrong.chmod(0o600)
    done = _verify(env, wrong, tmp_path)
    assert done.returncode == 1, done.stdout
    report = json.loads(done.stdout)
    assert not report["proven"]
    assert sorted({e["seq"] for e in report["integrity_errors"]}) == [0, 1, 2]


def test_a_key_rewritten_in_place_at_the_same_size_and_times_is_read_again(
    env: dict[str, str], home: Path
) -> None:
    key_file = home / "chain.key"
    with LongLived(env) as host:
        host.appended(3)
        before = os.stat(key_file)
        new = _new_key(key_file, in_place=True)
        os.utime(key_file, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(key_file).st_size == before.st_size
        answer = host.append()
    records = _export(env)
    assert "refused" in answer, answer
    assert not any(_mac_ok(r, new) for r in records) and len(records) == 3


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_made_readable_by_others_under_the_process_refuses_its_next_append(
    env: dict[str, str], home: Path, mode: int
) -> None:
    with LongLived(env) as host:
        host.appended(2)
        (home / "chain.key").chmod(mode)
        answer = host.append()
    assert "refused" in answer, answer
    assert len(_export(env)) == 2


def test_a_key_replaced_by_a_fifo_under_the_process_refuses_without_blocking(
    env: dict[str, str], home: Path
) -> None:
    with LongLived(env) as host:
        host.appended(2)
        (home / "chain.key").unlink()
        os.mkfifo(home / "chain.key", 0o600)
        answer = host.append()
    assert "refused" in answer, answer


def test_a_key_removed_under_the_process_is_not_made_again_over_its_chain(
    env: dict[str, str], home: Path
) -> None:
    # the key is created on the first write only: a chain with records and no key refuses
    with LongLived(env) as host:
        host.appended(2)
        (home / "chain.key").unlink()
        answer = host.append()
    assert "refused" in answer, answer
    assert not (home / "chain.key").exists() or len(_export(env)) == 2
