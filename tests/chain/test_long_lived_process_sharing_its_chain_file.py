"""A long-lived process whose read connection opened the chain before its first append,
sharing the file with other honest processes that come and go.

SQLite's locks on the chain file are POSIX locks, held per process and inode: closing any
descriptor of the file in the process lets go of every one of them. While the process holds
its lock, another process closing the chain knows it is not the last one and leaves the
write-ahead log in place, and the process's data version sees every commit; the process must
keep its lock whatever it opens after its first read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.long_lived_prover import LongLivedHost, tamper


def _a_chain_of(env: dict[str, str], count: int) -> None:
    with LongLivedHost(env) as writer:
        writer.appended(count)


@pytest.fixture
def proved_first(env: dict[str, str]) -> Iterator[LongLivedHost]:
    """A process that proved a record before its first append, after which another process
    appended and exited."""
    _a_chain_of(env, 3)
    with LongLivedHost(env) as process:
        assert "proof" in process.prove(1)
        assert process.appended(1) == [3]
        _a_chain_of(env, 1)
        yield process


def test_a_process_that_proved_before_its_first_append_appends_after_another_process_exits(
    proved_first: LongLivedHost, home: Path
) -> None:
    assert (home / "chain.sqlite3-wal").exists()
    assert proved_first.appended(2) == [5, 6]
    assert proved_first.prove(4)["proof"]["tree_size"] == 7


def test_a_process_that_proved_before_its_first_append_sees_a_trigger_planted_after(
    proved_first: LongLivedHost, home: Path
) -> None:
    assert proved_first.prove(4)["proof"]["tree_size"] == 5
    tamper(home, "CREATE TRIGGER planted BEFORE INSERT ON tree BEGIN SELECT 1; END")
    refused = proved_first.prove(2).get("refused", "")
    assert "floorguard does not make" in refused and "planted" in refused
