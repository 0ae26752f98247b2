"""Review 18: attacks on the PostgreSQL chain after review 17's fixes (the append_lock row
lock, check_record, chain init run again while hosts append, reads during appends). A test
whose docstring starts with "Was a BREAK" failed on the code it was written against
(commit ba68f0d) and holds since the fix it names.

The server is tests/pgserver.py's; databases and roles are made per test by
test_chain_postgres's ``pg`` fixture.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import CANARY, Chain, _call, _next, _verified, floorctl

from floorguard.chainstore.postgres import LOCK_KEY
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


def _appending(pg: Chain, stop: threading.Event, errors: list[str], done: list[int],
               tag: str) -> threading.Thread:  # fmt: skip
    def run() -> None:
        chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="5")
        n = 0
        try:
            while not stop.is_set():
                try:
                    chain.append(CANARY, receipt(n=n, blob=tag))
                    done.append(n)
                except ChainWriteError as exc:
                    errors.append(str(exc))
                n += 1
        finally:
            chain.close()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker


def test_chain_init_run_again_while_hosts_append_refuses_no_append(pg: Chain) -> None:
    """Was a BREAK (fixed: init takes the appenders' row lock before any DDL): README "chain init
    ... creates, idempotently" / "--grant gives it to existing login roles" and "a decision is
    returned only after COMMIT": the owner re-running `chain init --grant NEW_HOST` while hosts
    append makes the server detect a deadlock and abort appends ("deadlock detected (the
    database is unreachable, or the connection was lost)"): spawns refused. The owner runs init
    while three appenders run: each init must succeed and no spawn may be refused. init's DDL
    takes SHARE ROW EXCLUSIVE on records, then tree, then append_lock; an append holds the row
    lock and takes ROW EXCLUSIVE on the tables of its INSERT: a lock-order inversion would be a
    deadlock that the server resolves by aborting one (a refused spawn or init)."""
    stop = threading.Event()
    errors: list[str] = []
    done: list[int] = []
    workers = [_appending(pg, stop, errors, done, f"h{i}") for i in range(3)]
    inits: list[str] = []
    try:
        time.sleep(0.5)
        for i in range(8):
            host = f"late_{secrets.token_hex(3)}"
            pg.server.psql(f"CREATE ROLE {host} LOGIN")
            env = isolated_env(pg.key_file.parent / f"init{i}",
                               FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file))  # fmt: skip
            res = floorctl("chain", "init", "--url", pg.owner_url, "--grant", host, env=env)
            if res.returncode != 0:
                inits.append(res.stderr.strip())
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)
    assert done, "no append went through"
    assert not errors, f"{len(errors)} appends refused during chain init: {errors[:2]}"
    assert not inits, f"chain init refused while hosts append: {inits[:2]}"
    assert _verified(pg) == len(done)


def test_a_role_with_no_privilege_cannot_stop_chain_init(pg: Chain) -> None:
    """Was a BREAK (fixed: a re-init takes the row lock, not the advisory one): README "only a role
    granted the chain can take it (an advisory lock would be any connecting role's to hold,
    stopping the fleet)": chain init still serialises on pg_advisory_xact_lock(LOCK_KEY), so a
    role with nothing but CONNECT holding that key makes every `chain init` (adding a host,
    first init) fail after the timeout, with the false reason "another appender held the chain".
    A role granted nothing holds the advisory lock chain init serialises on (pg_advisory_lock is
    every connecting role's, as the README itself says of the old append lock): the owner's
    `chain init --grant` (adding a host) must still succeed."""
    nobody = f"nobody_{secrets.token_hex(3)}"
    host = f"new_{secrets.token_hex(3)}"
    pg.server.psql(f"CREATE ROLE {nobody} LOGIN; CREATE ROLE {host} LOGIN")
    with psycopg.connect(pg.server.url(nobody, pg.database), autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        env = isolated_env(pg.key_file.parent / "init", FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                           FLOORGUARD_CHAIN_TIMEOUT="2")  # fmt: skip
        res = floorctl("chain", "init", "--url", pg.owner_url, "--grant", host, env=env)
    assert res.returncode == 0, f"init stopped by a role with no privilege: {res.stderr}"


def test_export_by_the_appender_while_another_host_appends_is_one_verifiable_prefix(
    pg: Chain, tmp_path: Path
) -> None:
    """`chain export --checkpoint-out` and `chain checkpoint` by a host (the appender role)
    while another host appends: each export verifies, and each is a contiguous prefix."""
    from floorguard.slice_verify import verify_slice

    stop = threading.Event()
    errors: list[str] = []
    done: list[int] = []
    worker = _appending(pg, stop, errors, done, "w")
    key = bytes.fromhex(pg.key_file.read_text().strip())
    try:
        time.sleep(0.3)
        for i in range(6):
            res = floorctl("chain", "export", env=pg.env(tmp_path / f"r{i}"))
            assert res.returncode == 0, res.stderr
            lines = res.stdout.splitlines()
            seqs = [json.loads(line)["seq"] for line in lines]
            assert seqs == list(range(len(seqs)))
            report: Any = verify_slice(lines, key=key)
            assert report.ok if hasattr(report, "ok") else report, report
    finally:
        stop.set()
        worker.join(30)
    assert not errors, errors[:2]


def test_an_append_waiting_behind_a_pending_init_is_not_refused(pg: Chain) -> None:
    """A non-appender cannot block init's SHARE ROW EXCLUSIVE directly, but the owner's own
    long read (e.g. `chain export` of a big chain piped to a slow consumer) holds ACCESS
    SHARE only, which init does not conflict with: init during an open owner read must
    neither wait nor make appends wait beyond the timeout."""
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    try:
        chain.append(CANARY, receipt(n=0))
        with psycopg.connect(pg.owner_url) as reader:
            reader.execute("BEGIN; SELECT count(*) FROM floorguard.records")
            env = isolated_env(pg.key_file.parent / "init",
                               FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                               FLOORGUARD_CHAIN_TIMEOUT="2")  # fmt: skip
            res = floorctl("chain", "init", "--url", pg.owner_url, env=env)
            assert res.returncode == 0, res.stderr
            chain.append(CANARY, receipt(n=1))
    finally:
        chain.close()
    assert _verified(pg) == 2


@pytest.mark.parametrize("ts", ["2026-01-01T00:00:00.000000Z"])
def test_the_first_record_may_not_be_stamped_long_before_the_servers_clock(
    pg: Chain, ts: str
) -> None:
    """Was a BREAK (fixed: no earlier than the transaction's start): README "A record's ts is the
    database server's clock when the append's lock was granted" / the trigger refuses a record
    "stamped before the head": the genesis record has no head, so check_record's lower bound is
    '' and a host (appender role) stamps it 2026-01-01 although the server's clock is later;
    accepted. The first record has no head: the trigger's lower bound is ''. A host (appender
    role, with the key) stamps the genesis record years in the past; every later record is the
    server's clock, so this only moves the first record back. The README says ts is the server's
    clock at the lock: a first record stamped before it must be refused."""

    key = bytes.fromhex(pg.key_file.read_text().strip())
    with psycopg.connect(pg.url) as conn, pytest.raises(psycopg.Error, match="stamped"):
        _call(conn, *_next(conn, key, ts=ts))
