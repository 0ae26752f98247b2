"""Review of the PostgreSQL chain (review 17): attacks on the pipelined INSERT + COMMIT
(``_pipelined``), the append_lock row lock and the check_record trigger (commit f46fb1a and
e2d5530). A test whose docstring starts with "Was a BREAK" failed on the code it was
written against and holds since check_record's fix; the others held from the start.

The server is tests/pgserver.py's; the databases and roles are made per test by
test_chain_postgres's ``pg`` fixture.
"""

from __future__ import annotations

import secrets
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, Chain, _next, _verified, stalling_proxy

from floorguard.chain import AuditChain
from floorguard.chain_key import load_key
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


def _bounded(call: Any, seconds: float = 30) -> Any:
    """``call()`` on a thread: its result or exception, or a failure if it hangs."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"the append hung for {seconds} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _count(pg: Chain) -> int:
    return int(pg.sql("SELECT count(*) FROM floorguard.records"))


# --- the pipeline: the INSERT and the COMMIT ---------------------------------------------------


def _owner_trigger(pg: Chain, name: str, body: str, *, when: str = "AFTER INSERT",
                   constraint: bool = False) -> None:  # fmt: skip
    """A trigger on records owned by the chain's owner (as a DBA could add one)."""
    pg.sql(
        f"CREATE FUNCTION public.{name}() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN {body} RETURN NEW; END $$;"
        f" GRANT EXECUTE ON FUNCTION public.{name}() TO PUBLIC;"
        + (
            f" CREATE CONSTRAINT TRIGGER {name} AFTER INSERT ON floorguard.records"
            f" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION public.{name}()"
            if constraint
            else f" CREATE TRIGGER {name} {when} ON floorguard.records"
            f" FOR EACH ROW EXECUTE FUNCTION public.{name}()"
        )
    )


def test_a_backend_terminated_between_the_insert_and_the_commit_is_refused_not_hung(
    pg: Chain,
) -> None:
    """The server ends the session after the INSERT's row (pg_terminate_backend of the
    appender's own backend, as an operator's kill or a crash would): the append must be a
    ChainWriteError within the timeout, nothing is committed, the next append works."""
    # A sequence: its nextval is not undone by the rollback the termination causes.
    pg.sql("CREATE SEQUENCE public.once; GRANT USAGE ON SEQUENCE public.once TO PUBLIC")
    _owner_trigger(
        pg,
        "kill_self",
        "IF NEW.seq = 1 AND nextval('public.once') = 1 THEN"
        " PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;",
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    chain.append(CANARY, receipt(n=0))
    started = time.monotonic()
    with pytest.raises(ChainWriteError) as caught:
        _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    assert time.monotonic() - started < 15
    assert "\n" not in str(caught.value)
    assert _count(pg) == 1
    _bounded(lambda: chain.append(CANARY, receipt(n=2)))
    chain.close()
    assert _verified(pg) == 2


def test_a_deferred_constraint_failing_at_commit_refuses_the_append_and_the_next_one_works(
    pg: Chain,
) -> None:
    """The INSERT succeeds and only the COMMIT fails (a deferred constraint trigger raises):
    the append is a one-line ChainWriteError, the record is not in the chain, and the next
    append on the same AuditChain object (the connection had been in pipeline mode) works."""
    pg.sql("CREATE SEQUENCE public.once; GRANT USAGE ON SEQUENCE public.once TO PUBLIC")
    _owner_trigger(
        pg,
        "refuse_at_commit",
        "IF nextval('public.once') = 1 THEN RAISE EXCEPTION 'deferred refusal'; END IF;",
        constraint=True,
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    with pytest.raises(ChainWriteError, match="deferred refusal") as caught:
        _bounded(lambda: chain.append(CANARY, receipt(n=0)))
    assert "\n" not in str(caught.value)
    assert _count(pg) == 0
    record = _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    assert record.seq == 0
    record = _bounded(lambda: chain.append(CANARY, receipt(n=2)))
    assert record.seq == 1
    chain.close()
    assert _verified(pg) == 2


def test_an_insert_refused_inside_the_pipeline_leaves_the_next_append_working(
    pg: Chain,
) -> None:
    """The INSERT itself fails (a BEFORE trigger raises), so the pipelined COMMIT is
    aborted: one-line ChainWriteError; the same object's next appends work."""
    pg.sql("CREATE SEQUENCE public.once; GRANT USAGE ON SEQUENCE public.once TO PUBLIC")
    _owner_trigger(
        pg,
        "refuse_insert",
        "IF NEW.seq = 1 AND nextval('public.once') = 1 THEN"
        " RAISE EXCEPTION 'insert refusal'; END IF;",
        when="BEFORE INSERT",
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    chain.append(CANARY, receipt(n=0))
    with pytest.raises(ChainWriteError, match="insert refusal") as caught:
        _bounded(lambda: chain.append(CANARY, receipt(n=1)))
    assert "\n" not in str(caught.value)
    for n in range(2, 5):
        _bounded(lambda n=n: chain.append(CANARY, receipt(n=n)))
    chain.close()
    assert _verified(pg) == 4


def test_a_megabyte_receipt_while_the_server_floods_notices_commits_or_refuses_in_time(
    pg: Chain,
) -> None:
    """A trigger of the owner's raises thousands of NOTICEs while the client is still
    sending a ~1 MB receipt (the non-blocking flush loop must read meanwhile, or client and
    server deadlock until the watchdog): the append commits, well within the timeout."""
    _owner_trigger(
        pg,
        "chatty",
        "FOR i IN 1..20000 LOOP RAISE NOTICE '%', repeat('n', 200); END LOOP;",
        when="BEFORE INSERT",
    )
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="10")
    big = receipt(n=0, blob="x" * ((1 << 20) - 1000))
    started = time.monotonic()
    record = _bounded(lambda: chain.append(CANARY, big), 60)
    assert record.seq == 0
    assert time.monotonic() - started < 15
    chain.append(CANARY, receipt(n=1))
    chain.close()
    assert _verified(pg) == 2


# --- the server's clock ------------------------------------------------------------------------


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
    """Was a BREAK (fixed: the upper bound is the later of the head's ts and the server's
    clock): chain.py says "an append stamped earlier than the head (the wall clock
    stepped back) takes the head's timestamp" and the README's guarantee is that appends
    go on; but the check_record trigger refuses any ts later than the server's
    clock_timestamp(), so once the server's clock steps back below the head's ts (an NTP
    step, a failover to a standby whose clock is behind) the head's ts is refused, and
    every append of the fleet is refused until the clock catches up (here: an hour)."""
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
    that reuses an old head's time later is backdating, and is refused (review 18)."""
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
    """Was a BREAK (fixed: the fields' ranges are checked and the ts must read back as
    itself): check_record is said to refuse a ts "not in the chain's format"; it checks
    only a digits-only regex and the text order between the head and the server's clock.
    With no head (the lower bound is '') a modified host's first record stamped
    2000-19-39T29:69:69.999999Z is accepted; the chain then never verifies again (seq 0:
    "not an RFC 3339 UTC timestamp") and `floorctl chain checkpoint` refuses forever, as
    the records are append-only."""
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
    """Was a BREAK (fixed as above): as above, with a head: minute 69 of the head's hour
    sorts after the head and before the server's clock once the clock is in a later hour
    (any idle hour of the fleet; here the head is an owner-written record of an hour ago,
    the trigger off while it was written). The record was accepted, and the chain no
    longer verified."""
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


def test_a_row_inserted_by_hand_with_a_seq_gap_or_an_earlier_ts_is_refused(pg: Chain) -> None:
    """Holds: the appender's role may not insert by SQL at all, and even the owner's row
    cannot skip a seq or stamp before the head."""
    chain = pg.chain()
    head = chain.append(CANARY, receipt(n=0))
    chain.close()
    for seq, ts in ((2, head.ts), (1, "2000-01-01T00:00:00.000000Z"), (1, head.ts + " ")):
        forged = f"({seq}, '{ts}', 'c', 'e', 'r', '{{}}', 'p', 'm')"
        with pytest.raises(RuntimeError, match="permission denied"):
            pg.sql(f"INSERT INTO floorguard.records VALUES {forged}", as_owner=False)  # noqa: S608
        with pytest.raises(RuntimeError, match="floorguard: record"):
            pg.sql(f"INSERT INTO floorguard.records VALUES {forged}")  # noqa: S608
    assert _count(pg) == 1


# --- the chain's lock --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "LOCK TABLE floorguard.append_lock IN ACCESS EXCLUSIVE MODE",
        "LOCK TABLE floorguard.append_lock IN ACCESS SHARE MODE",
        "SELECT id FROM floorguard.append_lock FOR KEY SHARE",
        "LOCK TABLE floorguard.records IN SHARE MODE",
    ],
)
def test_a_role_that_is_not_an_appender_cannot_take_a_lock_on_the_chain(
    pg: Chain, statement: str
) -> None:
    """Holds: a login role that is no member of the appenders' role (PUBLIC has CONNECT)
    cannot take a lock that conflicts with the append's."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN")
    with (
        psycopg.connect(pg.server.url(nobody, pg.database)) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(statement)


def test_a_role_that_is_not_an_appender_cannot_lock_the_chains_tables_by_oid(
    pg: Chain,
) -> None:
    """A role with no privilege may still call functions that open a relation by oid (the
    oids are in pg_class, readable by all); if one of them takes a lock that conflicts with
    the append's FOR UPDATE or INSERT and is held in an open transaction, every append of
    the fleet waits. Appends must still succeed while such a session stays open."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN")
    with psycopg.connect(pg.server.url(nobody, pg.database)) as conn:
        oids = [row[0] for row in conn.execute(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'floorguard'").fetchall()]  # fmt: skip
        for oid in oids:
            for probe in ("pg_relation_size(%s)", "pg_total_relation_size(%s)",
                          "pg_table_size(%s)", "pg_indexes_size(%s)"):  # fmt: skip
                try:
                    conn.execute(f"SELECT {probe}", (oid,))
                except psycopg.Error:
                    conn.rollback()
        chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
        try:
            _bounded(lambda: chain.append(CANARY, receipt(n=0)))
        finally:
            chain.close()


def test_a_server_gone_silent_after_the_pipelined_insert_and_commit_refuses_in_time(
    pg: Chain,
) -> None:
    """Holds: once the pipeline (a ~1 MB receipt's INSERT, then COMMIT) is sent, every answer
    is swallowed (a frozen box in between): the append is a ChainWriteError naming the
    silence within 2x the timeout, not a hang (the watchdog's cut wakes poll()); the next
    append works and the chain verifies (the record may be committed: the known gap)."""

    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"floorguard_append_") as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        env = {**pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1")}
        env["FLOORGUARD_CHAIN_URL"] = url
        chain = AuditChain.from_env(env)
        started = time.monotonic()
        with pytest.raises(ChainWriteError, match=r"silent|no answer") as caught:
            _bounded(lambda: chain.append(CANARY, receipt(n=0, blob="y" * 900_000)))
        assert time.monotonic() - started < 10
        assert "\n" not in str(caught.value)
        assert proxy.stalled.is_set()
        chain.close()
    after = pg.chain()
    after.append(CANARY, receipt(n=1))
    after.close()
    assert _verified(pg) in (1, 2)


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
