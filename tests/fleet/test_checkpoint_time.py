"""A checkpoint of the shared chain states no time later than the stamp of a record it
leaves out, whatever an appender does.

The server takes a record stamped up to MAX_STAMP_AGE_SECONDS before it stores it (at its
transaction's start, or an estimate of the server's clock written ahead): an appender that
opens its transaction, waits while a checkpoint is signed, then appends stamped at its
start, must not land before the checkpoint's time, or a slice without it would prove a
window holding it.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.hostile_appender import _key, _record_call
from helpers.pg_chain import CANARY, Chain, floorctl, signed_checkpoint

pytestmark = pytest.mark.fleet

STARTED = """to_char(transaction_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')"""


def _time_line(path: Path) -> str:
    return next(line[5:] for line in path.read_text().splitlines() if line.startswith("time "))


def test_a_record_stamped_at_a_transaction_begun_before_a_checkpoint_is_not_left_before_it(
    pg: Chain, tmp_path: Path
) -> None:
    chain = pg.chain()
    for n in range(3):
        chain.append(CANARY, receipt(n=n))
    chain.close()
    before = [*pg.chain().export_lines()]
    with psycopg.connect(pg.url) as hostile:
        started = hostile.execute(f"SELECT {STARTED}").fetchone()[0]  # type: ignore[index]
        time.sleep(1.5)  # the transaction open, the chain's lock not asked for
        checkpoint, _ = signed_checkpoint(pg, tmp_path)
        _record_call(_key(pg), ts=started)(hostile)  # stamped at its transaction's start
        hostile.commit()
    assert len([*pg.chain().export_lines()]) == len(before) + 1
    assert checkpoint.read_text().splitlines()[1] == str(len(before))
    assert _time_line(checkpoint) <= started, (_time_line(checkpoint), started)
    # And the slice without that record proves no window ending at it.
    (tmp_path / "slice.jsonl").write_text("".join(line + "\n" for line in before))
    done = floorctl("verify", "chain", str(tmp_path / "slice.jsonl"), "--checkpoint",
                    str(checkpoint), "--pubkey", str(tmp_path / "keys" / "signing.pub"),
                    "--until", started, env=pg.env(tmp_path / "auditor"))  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "does not cover the end of the window" in done.stdout + done.stderr
