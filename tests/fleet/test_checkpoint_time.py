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


# The owner (who owns the API's functions) has open_append report the server's clock an hour
# ahead: what it returns is the chain's time as a checkpoint reads it.
CLOCK_AHEAD = """
BEGIN;
CREATE SCHEMA aside;
GRANT USAGE ON SCHEMA aside TO PUBLIC;
ALTER FUNCTION floorguard_api.open_append(bigint) SET SCHEMA aside;
CREATE FUNCTION floorguard_api.open_append(known_size bigint, OUT clock text, OUT seq bigint,
  OUT ts text, OUT chain_id text, OUT event text, OUT receipt_id text, OUT receipt text,
  OUT prev text, OUT mac text, OUT nodes text)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
  SELECT to_char((r.clock::timestamptz + interval '1 hour') AT TIME ZONE 'UTC',
                 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
         r.seq, r.ts, r.chain_id, r.event, r.receipt_id, r.receipt, r.prev, r.mac, r.nodes
  FROM aside.open_append(known_size) r
$f$;
GRANT EXECUTE ON FUNCTION floorguard_api.open_append(bigint) TO floorguard_appender_{db};
COMMIT;
"""


def test_a_server_clock_ahead_of_the_host_s_dates_no_checkpoint_later_than_the_host_s(
    pg: Chain, tmp_path: Path
) -> None:
    """A host signs no time its own clock has not reached: a record an honest host appends
    after the checkpoint, stamped now, is not left before it."""
    from floorguard._base._time import now_ts

    chain = pg.chain()
    for n in range(2):
        chain.append(CANARY, receipt(n=n))
    chain.close()
    pg.sql(CLOCK_AHEAD.format(db=pg.database))
    checkpoint, _ = signed_checkpoint(pg, tmp_path)
    assert _time_line(checkpoint) <= now_ts(), _time_line(checkpoint)
