"""The newest copy in the host's view (``chain-view``) damaged in place under its header,
the older copy left intact, and the chain then rolled back under a long-lived process.

The older copy is still the host's memory: the next append must refuse a chain smaller than
the size that copy remembers, record the rollback, and never write onto it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.long_lived import LongLived, another_process, backup_chain, restore_chain


def _slots(view: Path) -> list[tuple[int, int, int, dict[str, Any]]]:
    """(generation, offset of the body, its length, its view) of each slot."""
    data = view.read_bytes()
    half = len(data) // 2
    found = []
    for start in (0, half):
        end = data.index(b"\n", start)
        _, generation, length, _ = data[start:end].split()
        body = end + 1
        found.append(
            (int(generation), body, int(length), json.loads(data[body : body + int(length)]))
        )
    return found


def _damage_newest_body(view: Path) -> int:
    """The newest slot's body overwritten under its header; the size the older one holds."""
    newest, older = sorted(_slots(view), reverse=True)
    _, body, length, _ = newest
    with view.open("r+b") as file:
        file.seek(body + 1)
        file.write(b"#" * (length - 2))
    [chain] = older[3]["chains"].values()
    return int(chain["size"])


def _refusals(home: Path) -> list[dict[str, Any]]:
    path = home / "chain-refusals.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _records(home: Path) -> int:
    import sqlite3

    with sqlite3.connect(home / "chain.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM records").fetchone()[0])


def test_the_older_slot_still_refuses_a_rollback_below_it_when_the_newest_is_damaged(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    with LongLived(env) as host:
        host.appended(1)
        backup = backup_chain(home, tmp_path / "backup")  # 1 record
        host.appended(3)
        assert _damage_newest_body(home / "chain-view") == 3
        restore_chain(backup, home)
        refused = host.append()
        assert "rollback" in refused.get("refused", ""), refused
        assert _refusals(home)[-1]["event"] == "rollback"
        assert _records(home) == 1
        again = host.append()
        assert "refused" in again, again
    assert _records(home) == 1


def test_a_fresh_process_refuses_a_rollback_below_the_older_slot_when_the_newest_is_damaged(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    another_process(env, 1)
    backup = backup_chain(home, tmp_path / "backup")
    another_process(env, 3)
    assert _damage_newest_body(home / "chain-view") == 3
    restore_chain(backup, home)
    fresh = LongLived(env)
    try:
        refused = fresh.append()
    finally:
        fresh.close()
    assert "rollback" in refused.get("refused", ""), refused
    assert _records(home) == 1


def test_a_rollback_to_the_older_slots_size_is_never_appended_below_it(
    home: Path, env: dict[str, str], tmp_path: Path
) -> None:
    # The chain put back at exactly the size the intact copy remembers: whatever the answer,
    # the chain never ends up smaller than that copy's size, nor forked from it.
    with LongLived(env) as host:
        host.appended(3)
        backup = backup_chain(home, tmp_path / "backup")  # 3 records
        host.appended(1)
        remembered = _damage_newest_body(home / "chain-view")
        assert remembered == 3
        restore_chain(backup, home)
        answer = host.append()
        assert "refused" in answer or answer == {"seq": 3}, answer
        assert _records(home) >= remembered


def test_a_damaged_newest_copy_is_recorded_when_the_older_one_is_used(
    home: Path, env: dict[str, str]
) -> None:
    # The host's memory went back one copy (a write torn by a crash, or the file altered):
    # it goes on from the older copy, and says so in its refusals record, once.
    with LongLived(env) as host:
        host.appended(3)
        assert _damage_newest_body(home / "chain-view") == 2
        host.appended(2)
    [damaged] = [r for r in _refusals(home) if r["event"] == "damaged-view-copy"]
    assert "older copy" in damaged["message"] and damaged["remembered"]["size"] == 2, damaged
    assert _records(home) == 5
