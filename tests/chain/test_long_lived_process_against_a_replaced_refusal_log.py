"""The host's record of refusals (``chain-refusals.jsonl``) replaced by something that is not
a regular file, then the chain rolled back under a long-lived host process.

fleet.md: each refusal is recorded on the host, appended and fsynced. When it cannot be
recorded, the append (and so the spawn) must still be refused, at once and in words: a host
waiting on its refusal log forever has neither spawned nor been told why not.
"""

from __future__ import annotations

import os
import select
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.long_lived import backup_chain, restore_chain
from helpers.long_lived_prover import LongLivedHost, count_rows

PATIENCE = 5.0  # seconds: an append here takes milliseconds


@pytest.fixture
def host(env: dict[str, str], home: Path, tmp_path: Path) -> Iterator[LongLivedHost]:
    """A process whose chain was rolled back from 5 records to 3 after it appended them."""
    process = LongLivedHost(env)
    try:
        process.appended(3)
        backup = backup_chain(home, tmp_path / "backup")
        process.appended(2)
        restore_chain(backup, home)
        yield process
    finally:
        process.process.kill()
        process.process.wait(timeout=60)


def _answer_within(host: LongLivedHost, command: str, seconds: float) -> str | None:
    """The process's answer line, or None when it gave none in time."""
    stdin, stdout = host.process.stdin, host.process.stdout
    assert stdin is not None and stdout is not None
    stdin.write(command + "\n")
    stdin.flush()
    ready, _, _ = select.select([stdout], [], [], seconds)
    return stdout.readline() if ready else None


@pytest.mark.parametrize(
    "replace",
    [Path.mkdir, lambda path: os.symlink("/dev/full", path)],
    ids=["a-folder", "a-link-to-a-device"],
)
def test_a_refusal_log_that_is_no_regular_file_still_refuses_the_rollback_in_words(
    host: LongLivedHost, home: Path, replace: Callable[[Path], object]
) -> None:
    replace(home / "chain-refusals.jsonl")
    line = _answer_within(host, "append", PATIENCE)
    assert line is not None and '"refused"' in line, line
    assert "chain-refusals.jsonl" in line
    # (what was found is in the reason when it is in no record: the rollback, 5 seen, 3 held)
    assert "rollback" in line and "5" in line and "3" in line, line
    assert "the database was altered" not in line, line
    assert "could not be recorded" in line and "is recorded in" not in line, line
    assert count_rows(home, "records") == 3


def test_a_fifo_as_the_refusal_log_still_refuses_the_rollback_at_once(
    host: LongLivedHost, home: Path
) -> None:
    os.mkfifo(home / "chain-refusals.jsonl")
    line = _answer_within(host, "append", PATIENCE)
    assert line is not None and '"refused"' in line, line
    assert "chain-refusals.jsonl" in line and "rollback" in line, line
    assert count_rows(home, "records") == 3


def test_a_fifo_as_the_view_refuses_appends_without_blaming_the_database(
    env: dict[str, str], home: Path
) -> None:
    with LongLivedHost(env) as process:
        process.appended(2)
        (home / "chain-view").unlink()
        os.mkfifo(home / "chain-view")
        line = _answer_within(process, "append", PATIENCE)
    assert line is not None and '"refused"' in line, line
    assert "chain-view" in line and "not a regular file" in line, line
    assert "the database was altered" not in line, line
