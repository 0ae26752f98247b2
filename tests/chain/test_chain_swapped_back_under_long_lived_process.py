"""Another chain put in place of a long-lived process's chain between two of its appends,
then its own chain put back; a view of the other chain copied in with it; a chain whose
stored id is not its records' id.

A chain that is not the one the host saw is refused as replaced (or forked) and recorded,
never appended to; the host's own chain put back is appended to again, and every record
still verifies with its key.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import isolated_env
from helpers.long_lived import LongLived, backup_chain, restore_chain


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path / "a")


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["FLOORGUARD_HOME"])


@pytest.fixture
def other(tmp_path: Path) -> dict[str, str]:
    """Another FLOORGUARD_HOME whose own process wrote a chain of 5 records."""
    other_env = isolated_env(tmp_path / "b")
    with LongLived(other_env) as process:
        process.appended(5)
    return other_env


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorctl", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def _export(env: dict[str, str]) -> list[dict[str, Any]]:
    done = _run(env, "chain", "export")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _verifies(env: dict[str, str], home: Path, tmp_path: Path) -> None:
    slice_file = tmp_path / "slice.jsonl"
    exported = _run(env, "chain", "export", "--out", str(slice_file))
    assert exported.returncode == 0, exported.stderr
    verified = _run(env, "verify", "chain", str(slice_file), "--key-file",
                    str(home / "chain.key"), "--json")  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _refusals(home: Path) -> list[dict[str, Any]]:
    path = home / "chain-refusals.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _chain_id(home: Path) -> str:
    with sqlite3.connect(home / "chain.sqlite3") as db:
        return str(db.execute("SELECT value FROM meta WHERE key = 'chain_id'").fetchone()[0])


def _swap_in(source: Path, home: Path, tmp_path: Path, name: str) -> None:
    """The chain and key of ``source`` put in place of ``home``'s by rename."""
    restore_chain(backup_chain(source, tmp_path / name), home)


def test_the_host_s_own_chain_put_back_after_another_was_refused_is_appended_to_again(
    home: Path, env: dict[str, str], other: dict[str, str], tmp_path: Path
) -> None:
    with LongLived(env) as host:
        host.appended(3)
        own = backup_chain(home, tmp_path / "own")
        _swap_in(Path(other["FLOORGUARD_HOME"]), home, tmp_path, "swap")
        refused = host.append()
        assert "replaced by another chain" in refused.get("refused", ""), refused
        assert len(_export(env)) == 5  # the other chain: nothing written onto it
        restore_chain(own, home)
        assert host.appended(2) == [3, 4]
    records = _export(env)
    assert [r["seq"] for r in records] == [0, 1, 2, 3, 4]
    assert {r["chain_id"] for r in records} == {_chain_id(home)}
    _verifies(env, home, tmp_path)
    assert [r["event"] for r in _refusals(home)] == ["replaced"]


def test_a_view_of_another_chain_copied_in_with_that_chain_is_the_host_s_memory_of_it(
    home: Path, env: dict[str, str], other: dict[str, str], tmp_path: Path
) -> None:
    # A host's memory is its files (fleet.md): the other home's view, copied in place of
    # this one, names only the other chain; with that chain swapped in, the next append is
    # judged on that view, never written onto a chain smaller than it or forked from it.
    other_home = Path(other["FLOORGUARD_HOME"])
    with LongLived(env) as host:
        host.appended(3)
        shutil.copy2(other_home / "chain-view", tmp_path / "view-copy")
        os.replace(tmp_path / "view-copy", home / "chain-view")
        _swap_in(other_home, home, tmp_path, "swap")
        answer = host.append()
    records = _export(env)
    assert "refused" in answer or answer == {"seq": 5}, answer
    assert [r["seq"] for r in records][:5] == [0, 1, 2, 3, 4]
    assert {r["chain_id"] for r in records} == {_chain_id(other_home)}
    _verifies(env, home, tmp_path)


def test_a_view_naming_only_another_chain_is_no_memory_of_this_one(
    home: Path, env: dict[str, str], other: dict[str, str], tmp_path: Path
) -> None:
    # A host's memory is its files (fleet.md): a view copied in from another home names
    # only the other chain, so this host starts afresh on its own chain, even in a process
    # that saw more of it, as when the view is deleted. What it adopts is still whole.
    other_home = Path(other["FLOORGUARD_HOME"])
    with LongLived(env) as host:
        host.appended(1)
        backup = backup_chain(home, tmp_path / "backup")
        host.appended(3)
        shutil.copy2(other_home / "chain-view", tmp_path / "view-copy")
        os.replace(tmp_path / "view-copy", home / "chain-view")
        restore_chain(backup, home)
        assert host.append() == {"seq": 1}
    assert [r["seq"] for r in _export(env)] == [0, 1]
    _verifies(env, home, tmp_path)


def _relabel(home: Path, *, meta: str | None = None, records: str | None = None) -> None:
    """The stored chain id (``meta``) or every record's ``chain_id`` changed in place (the
    connection closed, so its log is folded into the file a restore copies)."""
    db = sqlite3.connect(home / "chain.sqlite3")
    with db:
        if meta is not None:
            db.execute("UPDATE meta SET value = ? WHERE key = 'chain_id'", (meta,))
        if records is not None:
            db.execute("UPDATE records SET chain_id = ?", (records,))
    db.close()
    assert not (home / "chain.sqlite3-wal").exists()


def _relabelled_other_chain_swapped_in(
    home: Path, env: dict[str, str], other: dict[str, str], tmp_path: Path
) -> list[dict[str, Any]]:
    """Another chain, its stored id made this chain's, swapped in between two appends."""
    with LongLived(env) as host:
        host.appended(3)
        swap = backup_chain(Path(other["FLOORGUARD_HOME"]), tmp_path / "swap")
        _relabel(swap, meta=_chain_id(home))  # its records keep their own chain id
        restore_chain(swap, home)
        return [host.append(), host.append()]


def test_another_chain_relabelled_with_this_chain_s_id_swapped_in_is_refused(
    home: Path, env: dict[str, str], other: dict[str, str], tmp_path: Path
) -> None:
    answers = _relabelled_other_chain_swapped_in(home, env, other, tmp_path)
    assert all("refused" in answer for answer in answers), answers
    assert len(_export(env)) == 5


def test_another_chain_relabelled_with_this_chain_s_id_is_recorded_as_replaced(
    home: Path, env: dict[str, str], other: dict[str, str], tmp_path: Path
) -> None:
    # Its records are another chain's than the one the host saw there (fleet.md:
    # replaced), whatever its stored id says; each refusal is recorded on the host.
    answers = _relabelled_other_chain_swapped_in(home, env, other, tmp_path)
    assert all("replaced by another chain" in a.get("refused", "") for a in answers), answers
    refusals = _refusals(home)
    assert [r["event"] for r in refusals] == ["replaced", "replaced"]
    assert {r["chain_id"] for r in refusals} == {_chain_id(Path(other["FLOORGUARD_HOME"]))}


def test_this_chain_with_only_its_stored_id_changed_is_refused(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    with LongLived(env) as host:
        host.appended(3)
        own = backup_chain(home, tmp_path / "own")
        _relabel(own, meta="0" * 32)  # its records keep the id the host saw
        restore_chain(own, home)
        answer = host.append()
        assert "metadata does not name the chain" in answer.get("refused", ""), answer
    with sqlite3.connect(home / "chain.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 3


def test_this_chain_s_stored_id_changed_in_place_beside_the_process_is_refused(
    home: Path, env: dict[str, str]
) -> None:
    with LongLived(env) as host:
        host.appended(3)
        db = sqlite3.connect(home / "chain.sqlite3")  # another connection, the file kept
        with db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'chain_id'", ("0" * 32,))
        db.close()
        answer = host.append()
        assert "metadata does not name the chain" in answer.get("refused", ""), answer
    with sqlite3.connect(home / "chain.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 3


def test_a_fresh_process_refuses_a_chain_whose_stored_id_is_not_its_records(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    with LongLived(env) as host:
        host.appended(3)
    _relabel(home, meta="0" * 32)
    with LongLived(env) as fresh:
        answer = fresh.append()
    assert "metadata does not name the chain" in answer.get("refused", ""), answer
    with sqlite3.connect(home / "chain.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 3


def test_this_chain_with_its_records_relabelled_under_the_same_stored_id_is_refused(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    with LongLived(env) as host:
        host.appended(3)
        own = backup_chain(home, tmp_path / "own")
        _relabel(own, records="f" * 32)
        restore_chain(own, home)
        answer = host.append()
        assert "refused" in answer, answer
    with sqlite3.connect(home / "chain.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 3
