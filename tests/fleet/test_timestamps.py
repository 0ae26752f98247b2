"""A record's ts is the server's clock in UTC: a host cannot stamp a record in the future, long
before the server's clock, before the head, or with a time that is no time; a server clock
stepped back does not stop every append."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import (
    CANARY,
    Chain,
    _bounded,
    _call,
    _count,
    _next,
    _verified,
    append,
    floorctl,
)

from floorguard._chain.chain import AuditChain
from floorguard._chain.chain_key import load_key
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- the server's clock ------------------------------------------------------------------------


def test_a_modified_host_cannot_stamp_the_fleets_later_records_with_a_future_time(
    pg: Chain, tmp_path: Path
) -> None:
    """A record's ts is the database server's clock, so no host can push the fleet's later
    records out of every --since/--until window (README). The ts is computed and MACed by
    the client; a trigger refuses a record stamped after the server's clock or before the
    head, so one host (with the fleet's key, as every host has) stamping 2099 cannot make
    every later record 2099."""
    rogue = AuditChain.from_env(
        pg.env(tmp_path / "rogue"), clock=lambda: "2099-01-01T00:00:00.000000Z"
    )
    with pytest.raises(ChainWriteError, match=r"stamped 2099-01-01T00:00:00\.000000Z"):
        rogue.append(CANARY, receipt(n=0))
    rogue.close()
    assert append(pg.env(tmp_path / "first")).returncode == 0
    assert append(pg.env(tmp_path / "honest")).returncode == 0
    ts = pg.sql("SELECT ts FROM floorguard.records WHERE seq = 1")
    assert abs(_ts(ts) - datetime.now(UTC)) < timedelta(minutes=5), ts


def test_records_are_stamped_in_utc_whatever_the_servers_timezone_datestyle_and_lc_time(
    pg: Chain, tmp_path: Path
) -> None:
    """The ts is to_char of clock_timestamp() AT TIME ZONE 'UTC' with no locale pattern, so a
    database set to UTC+14, DMY dates and sql_standard intervals changes nothing; an export
    window around now finds the record."""
    pg.sql(f"ALTER DATABASE {pg.database} SET timezone = 'Pacific/Kiritimati';"
           f" ALTER DATABASE {pg.database} SET datestyle = 'SQL, DMY';"
           f" ALTER DATABASE {pg.database} SET intervalstyle = 'sql_standard';"
           f" ALTER DATABASE {pg.database} SET lc_time = 'C'")  # fmt: skip
    before = datetime.now(UTC)
    assert append(pg.env(tmp_path / "h")).returncode == 0
    ts = pg.sql("SELECT ts FROM floorguard.records WHERE seq = 0")
    assert ts.endswith("Z") and len(ts) == len("2026-01-01T00:00:00.000000Z"), ts
    assert abs(_ts(ts) - before) < timedelta(minutes=1), ts
    env = pg.env(tmp_path / "auditor")
    since = (before - timedelta(minutes=1)).isoformat()
    until = (before + timedelta(minutes=1)).isoformat()
    done = floorctl("chain", "export", "--since", since, "--until", until, env=env)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["ts"] for line in done.stdout.splitlines()] == [ts]


def _owner_writes_the_head(pg: Chain, folder: Path, stamp: str) -> None:
    """Record 0 stamped ``stamp``, written by the owner with the record check off (the
    owner may): a head from before the server's clock moved."""

    pg.sql("ALTER TABLE floorguard.records DISABLE TRIGGER records_next_in_line")
    with psycopg.connect(pg.owner_url) as conn:  # past append_record, which checks ts too
        record, nodes = _next(conn, load_key(pg.key_file), ts=stamp)
        conn.execute("INSERT INTO floorguard.records VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                     record)  # fmt: skip
        for node in nodes:
            conn.execute("INSERT INTO floorguard.tree VALUES (%s, %s, %s)", node)
    pg.sql("ALTER TABLE floorguard.records ENABLE ALWAYS TRIGGER records_next_in_line")


def test_a_server_clock_stepped_back_below_the_head_does_not_stop_every_append(
    pg: Chain, tmp_path: Path
) -> None:
    """chain.py: "an append stamped earlier than the head (the wall clock stepped back) takes
    the head's timestamp", and appends go on (README). The check_record trigger's upper bound
    is the later of the head's ts and the server's clock_timestamp(), so once the server's
    clock steps back below the head's ts (an NTP step, a failover to a standby whose clock is
    behind; here an hour) the fleet's appends are not all refused until the clock catches
    up."""
    # The head as written before the server's clock stepped back by an hour: written by the
    # owner with the trigger off (the owner may), stamped an hour ahead of the clock now.
    future = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _owner_writes_the_head(pg, tmp_path, future)
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    try:
        record = _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    finally:
        chain.close()
    assert record.seq == 1 and record.ts == future
    assert _verified(pg) == 2


def test_a_later_append_stamped_with_the_heads_time_from_before_its_transaction_is_refused(
    pg: Chain,
) -> None:
    """A ts equal to the head's is accepted only when it is not before the appending
    transaction began (the server's clock stepped back below the head: see above); a client
    that reuses an old head's time later is backdating, and is refused."""
    chain = pg.chain()
    first = chain.append(CANARY, receipt(n=0))
    chain.close()
    same = AuditChain.from_env(pg.env(pg.key_file.parent), clock=lambda: first.ts)
    try:
        with pytest.raises(ChainWriteError, match=r"record 1 is stamped .* not between"):
            same.append(CANARY, receipt(n=1))
    finally:
        same.close()
    assert _verified(pg) == 1


# --- the check_record trigger ------------------------------------------------------------------


def test_a_host_cannot_stamp_the_first_record_with_a_ts_that_is_no_time(
    pg: Chain, tmp_path: Path
) -> None:
    """check_record refuses a ts "not in the chain's format": the fields' ranges are checked
    and the ts must read back as itself, not only match a digits-only regex and sort between
    the head and the server's clock. With no head (the lower bound is '') a modified host's
    first record stamped 2000-19-39T29:69:69.999999Z would otherwise be accepted, and the
    append-only chain would never verify again (seq 0: "not an RFC 3339 UTC timestamp"), nor
    `floorctl chain checkpoint` succeed."""
    rogue = AuditChain.from_env(
        pg.env(tmp_path / "rogue"), clock=lambda: "2000-19-39T29:69:69.999999Z"
    )
    try:
        with pytest.raises(ChainWriteError, match=r"is stamped .*not a time in the chain"):
            rogue.append(CANARY, receipt(n=0))
    finally:
        rogue.close()
    assert _count(pg) == 0


def test_a_host_cannot_stamp_a_later_record_with_a_ts_that_is_no_time(
    pg: Chain, tmp_path: Path
) -> None:
    """As above, with a head: minute 69 of the head's hour sorts after the head and before the
    server's clock once the clock is in a later hour (any idle hour of the fleet; here the
    head is an owner-written record of an hour ago, the trigger off while it was written).
    The record is refused, and the chain still verifies."""
    past = datetime.now(UTC) - timedelta(hours=1)
    stamp = past.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    _owner_writes_the_head(pg, tmp_path, stamp)
    bogus = past.strftime("%Y-%m-%dT%H:69:69.000000Z")
    rogue = AuditChain.from_env(pg.env(tmp_path / "rogue"), clock=lambda: bogus)
    try:
        with pytest.raises(ChainWriteError, match=r"is stamped .*not a time in the chain"):
            rogue.append(CANARY, receipt(n=1))
    finally:
        rogue.close()
    assert _count(pg) == 1


@pytest.mark.parametrize(
    "ts",
    ["2026-02-30T00:00:00.000000Z", "2026-01-01T23:59:60.000000Z", "2026-01-01T24:00:00.000000Z"],
)
def test_a_ts_whose_fields_are_in_range_but_that_is_no_time_is_refused(
    pg: Chain, tmp_path: Path, ts: str
) -> None:
    rogue = AuditChain.from_env(pg.env(tmp_path / "rogue"), clock=lambda: ts)
    try:
        with pytest.raises(ChainWriteError, match=r"not a time in the chain|out of range"):
            rogue.append(CANARY, receipt(n=0))
    finally:
        rogue.close()
    assert _count(pg) == 0


@pytest.mark.parametrize("ts", ["2026-01-01T00:00:00.000000Z"])
def test_the_first_record_may_not_be_stamped_long_before_the_servers_clock(
    pg: Chain, ts: str
) -> None:
    """README "A record's ts is the database server's clock when the append's lock was
    granted" / the trigger refuses a record "stamped before the head". The genesis record has
    no head (the trigger's lower bound is ''), so its ts may be no earlier than the
    transaction's start: a host (appender role, with the key) stamping the genesis record
    years in the past is refused, although every later record is the server's clock anyway."""

    key = bytes.fromhex(pg.key_file.read_text().strip())
    with psycopg.connect(pg.url) as conn, pytest.raises(psycopg.Error, match="stamped"):
        _call(conn, *_next(conn, key, ts=ts))
