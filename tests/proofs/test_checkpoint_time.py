"""A checkpoint's time says the chain held exactly its records then: no record it leaves out
is stamped before it, even one an appender stamped while the checkpoint was being made.

An appender stamps its record inside its write transaction and commits after; a checkpoint
read meanwhile sees the chain without that record. Stamped with the time it was issued, it
would close a window over a record it does not hold, and a slice without that record would
prove the window. So the time of a checkpoint of the head is read under the chain's write
lock, with the head; when the chain grew in between, the checkpoint is stamped as a prefix
is, with its own last record's time (which closes no window its records do not).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from helpers.chain_support import CANARY, receipt
from helpers.cli import isolated_env
from helpers.tlog_support import ctl, ok, preflights

from floorguard._base._time import now_ts
from floorguard._chain.chain import AuditChain


def _time_line(path: Path) -> str:
    return next(line[5:] for line in path.read_text().splitlines() if line.startswith("time "))


def test_a_record_stamped_while_a_checkpoint_is_made_is_not_left_before_its_time(
    tmp_path: Path,
) -> None:
    ok(ctl(tmp_path, "keygen", "--out", "keys"))
    preflights(tmp_path, "0.61.0", "0.62.0")
    env = isolated_env(tmp_path / "state")
    stamped: list[str] = []

    def stamp_then_linger() -> str:
        # The record's time is taken inside its write transaction, which then goes on a
        # while before it commits (a slow disk, a busy host): the window a checkpoint races.
        stamped.append(now_ts())
        time.sleep(1.0)
        return stamped[-1]

    slow = AuditChain.from_env(env, clock=stamp_then_linger)
    before = [*AuditChain.from_env(env).export_lines()]
    appender = threading.Thread(target=slow.append, args=(CANARY, receipt()))
    appender.start()
    try:
        time.sleep(0.3)  # (the record stamped, not committed)
        ok(ctl(tmp_path, "chain", "checkpoint", "--signing-key", "keys/signing.key",
               "--out", "race.cp"))  # fmt: skip
    finally:
        appender.join(10)
    assert stamped, "the racing append never ran"
    left_out = stamped[0]
    records = [*AuditChain.from_env(env).export_lines()]
    assert len(records) == len(before) + 1
    issued = _time_line(tmp_path / "race.cp")
    assert (tmp_path / "race.cp").read_text().splitlines()[1] == str(len(before))  # its size
    # The checkpoint holds the records before the racing one: its time is not after it.
    assert issued <= left_out, (issued, left_out)

    # And the slice of the records it holds does not prove a window ending at that record.
    (tmp_path / "slice.jsonl").write_text("".join(line + "\n" for line in before))
    done = ctl(tmp_path, "verify", "chain", "slice.jsonl", "--checkpoint", "race.cp",
               "--pubkey", "keys/signing.pub", "--until", left_out)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "does not cover the end of the window" in done.stdout + done.stderr


def test_a_checkpoint_of_a_quiet_chain_closes_the_window_after_its_last_record(
    tmp_path: Path,
) -> None:
    ok(ctl(tmp_path, "keygen", "--out", "keys"))
    preflights(tmp_path, "0.61.0", "0.62.0")
    env = isolated_env(tmp_path / "state")
    lines = [*AuditChain.from_env(env).export_lines()]
    last = AuditChain.from_env(env).head()
    assert last is not None
    time.sleep(0.01)
    until = now_ts()
    ok(ctl(tmp_path, "chain", "checkpoint", "--signing-key", "keys/signing.key",
           "--out", "quiet.cp"))  # fmt: skip
    assert _time_line(tmp_path / "quiet.cp") > until > last.ts
    (tmp_path / "slice.jsonl").write_text("".join(line + "\n" for line in lines))
    ok(ctl(tmp_path, "verify", "chain", "slice.jsonl", "--checkpoint", "quiet.cp",
           "--pubkey", "keys/signing.pub", "--until", until))  # fmt: skip
