"""The chain's stored metadata edited beside a long-lived host process between two appends:
the chain id's row deleted, the table dropped, rebuilt without its key with a second chain
id, and a copy whose metadata and records were all relabelled renamed in.

A chain whose metadata does not name the chain its records belong to is refused, in words,
before anything is written; a refusal said to be recorded is in chain-refusals.jsonl.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.long_lived import backup_chain, restore_chain
from helpers.long_lived_prover import LongLivedHost, count_rows, refusals, tamper

BOGUS_ID = "0" * 32


@pytest.fixture
def host(env: dict[str, str]) -> Iterator[LongLivedHost]:
    with LongLivedHost(env) as process:
        process.appended(4)
        yield process


def _refused_and_nothing_written(answer: dict[str, Any], home: Path) -> None:
    assert "refused" in answer, answer
    assert count_rows(home, "records") == 4
    if "The refusal is recorded in" in answer["refused"]:
        assert refusals(home)[-1]["message"] in answer["refused"]


@pytest.mark.parametrize(
    "edit",
    [
        ("DELETE FROM meta WHERE key = 'chain_id'",),
        ("DROP TABLE meta",),
        (
            "CREATE TABLE loose (key, value)",
            "INSERT INTO loose VALUES ('chain_id', '00000000000000000000000000000000')",
            "INSERT INTO loose SELECT key, value FROM meta",
            "DROP TABLE meta",
            "ALTER TABLE loose RENAME TO meta",
        ),
    ],
    ids=["chain-id-row-deleted", "table-dropped", "a-second-chain-id-first"],
)
def test_metadata_that_does_not_name_the_chain_refuses_the_process_and_a_fresh_one(
    host: LongLivedHost, home: Path, env: dict[str, str], edit: tuple[str, ...]
) -> None:
    tamper(home, *edit)
    for _ in range(2):
        _refused_and_nothing_written(host.ask("append"), home)
    with LongLivedHost(env) as fresh:
        _refused_and_nothing_written(fresh.ask("append"), home)


@pytest.mark.parametrize("tree_dropped", [False, True], ids=["tree-kept", "tree-dropped"])
def test_a_copy_relabelled_throughout_and_renamed_in_is_refused(
    host: LongLivedHost, home: Path, tmp_path: Path, tree_dropped: bool
) -> None:
    # Every record's chain id and the stored one changed alike: a consistent label on
    # records whose MACs and links were made under another id, where the host saw that one.
    copy = backup_chain(home, tmp_path / "copy")
    db = sqlite3.connect(copy / "chain.sqlite3")
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'chain_id'", (BOGUS_ID,))
        db.execute("UPDATE records SET chain_id = ?", (BOGUS_ID,))
        if tree_dropped:
            db.execute("DROP TABLE tree")
    db.close()
    restore_chain(copy, home)
    for _ in range(2):
        _refused_and_nothing_written(host.ask("append"), home)


def test_the_chain_id_put_back_lets_the_process_append_again(
    host: LongLivedHost, home: Path
) -> None:
    db = sqlite3.connect(home / "chain.sqlite3")
    chain_id = db.execute("SELECT value FROM meta WHERE key = 'chain_id'").fetchone()[0]
    db.close()
    tamper(home, "DELETE FROM meta WHERE key = 'chain_id'")
    _refused_and_nothing_written(host.ask("append"), home)
    db = sqlite3.connect(home / "chain.sqlite3")
    with db:
        db.execute("INSERT INTO meta VALUES ('chain_id', ?)", (chain_id,))
    db.close()
    assert host.appended(2) == [4, 5]
    assert refusals(home) == []


@pytest.mark.parametrize(
    "edit",
    ["UPDATE meta SET value = '2' WHERE key = 'format'", "DELETE FROM meta WHERE key = 'format'"],
    ids=["another-format", "no-format"],
)
def test_a_stored_format_this_floorguard_does_not_write_stops_the_process_at_once(
    host: LongLivedHost, home: Path, edit: str
) -> None:
    # As a fresh process refuses it on opening the file: no append on a format it does not
    # write, by a process that appended to the file before.
    tamper(home, edit)
    answer = host.ask("append")
    assert "unknown format" in answer.get("refused", ""), answer
    _refused_and_nothing_written(answer, home)
