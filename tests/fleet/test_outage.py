"""A PostgreSQL server that stops answering, or cannot be reached: every append, read,
export and ``chain init`` is cut in bounded time (the URL cannot stretch the wait), refused
in one line, and the next append works."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.cli import isolated_env
from helpers.pg_chain import (
    CANARY,
    Chain,
    _bounded,
    _owner_trigger,
    _refused,
    _verified,
    append,
    floorctl,
    signed_checkpoint,
    stalling_proxy,
    verify,
)
from helpers.tree_support import assert_tree_matches_records

from floorguard._base._time import now_ts
from floorguard._chain.chain import AuditChain
from floorguard.chainstore.postgres_schema import LOCK_STATEMENT
from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet

# --- a server that stops answering -----------------------------------------------------------


def test_a_server_that_stops_answering_mid_append_cannot_hang_the_spawn(pg: Chain) -> None:
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"EXECUTE floorguard_open") as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        env = {
            **pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1"),
            "FLOORGUARD_CHAIN_URL": url,
        }
        try:
            done = append(env, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the append hung for 30 s behind a server that stopped answering")
        assert proxy.stalled.is_set()  # the attack happened: the lock's answer was swallowed
    assert done.returncode == 1
    assert "refused: cannot append to the audit chain" in done.stderr
    assert "FLOORGUARD_CHAIN_TIMEOUT" in done.stderr
    # The server itself was fine: the next append through it works and the chain verifies.
    assert append(pg.env(pg.key_file.parent)).returncode == 0
    assert verify(pg).returncode == 0


@pytest.mark.parametrize("trigger", [b"REPEATABLE READ", b"floorguard_api.records("])
def test_a_server_that_stops_answering_mid_read_cannot_hang_an_export(
    pg: Chain, trigger: bytes, tmp_path: Path
) -> None:
    assert append(pg.env(tmp_path)).returncode == 0
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, trigger) as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="1"), "FLOORGUARD_CHAIN_URL": url}
        try:
            done = subprocess.run([sys.executable, "-m", "floorctl", "chain", "export"],
                                  capture_output=True, text=True, env=env, timeout=30)  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail("the export hung for 30 s behind a server that stopped answering")
        assert proxy.stalled.is_set()
    assert done.returncode == 1
    assert "no answer within" in done.stderr and "FLOORGUARD_CHAIN_TIMEOUT" in done.stderr


def test_a_port_that_accepts_but_never_answers_refuses_the_append_not_hangs(
    pg: Chain, tmp_path: Path
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as mute:  # the kernel accepts; no one reads
        url = f"postgresql://{pg.appender}@127.0.0.1:{mute.getsockname()[1]}/{pg.database}"
        env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="1"), "FLOORGUARD_CHAIN_URL": url}
        try:
            done = append(env, timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the append hung for 30 s on a port that never answers")
    assert done.returncode == 1
    assert "cannot append to the audit chain" in done.stderr


# --- bounded waits -----------------------------------------------------------------------------


def test_chain_init_behind_a_server_that_stops_answering_is_cut_not_hung(
    pg: Chain, tmp_path: Path
) -> None:
    """A silent server is cut after twice FLOORGUARD_CHAIN_TIMEOUT and every wait is bounded
    (README): `floorctl chain init` runs its DDL under the watchdog too, so behind a server
    that stops answering it fails in time instead of hanging (killed here after 30 s)."""
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"CREATE SCHEMA") as proxy:
        url = f"postgresql://{pg.owner}@127.0.0.1:{proxy.port}/{pg.database}"
        env = isolated_env(tmp_path / "op", FLOORGUARD_CHAIN_KEY_FILE=str(pg.key_file),
                           FLOORGUARD_CHAIN_TIMEOUT="1")  # fmt: skip
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "floorctl", "chain", "init", "--url", url],
                capture_output=True, text=True, env=env, timeout=30, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            pytest.fail("chain init hung for 30 s behind a server that stopped answering")
        assert proxy.stalled.is_set()
    assert done.returncode != 0
    assert time.monotonic() - started < 15


def test_a_url_asking_for_longer_lock_and_statement_timeouts_cannot_stretch_the_wait(
    pg: Chain, tmp_path: Path
) -> None:
    """The statement, lock and idle-transaction timeouts are always FLOORGUARD_CHAIN_TIMEOUT's,
    whatever the URL asks (README): a URL asking for 8 s waits at most the 2 s."""
    options = quote("-c lock_timeout=8000 -c statement_timeout=8000")
    env = {**pg.env(tmp_path, FLOORGUARD_CHAIN_TIMEOUT="2"),
           "FLOORGUARD_CHAIN_URL": f"{pg.url}&options={options}"}  # fmt: skip
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(pg.owner_url) as conn:
            conn.execute(LOCK_STATEMENT)
            holding.set()
            release.wait(60)
            conn.rollback()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30)
        done = append(env)
    finally:
        release.set()
        holder.join()
    assert done.returncode == 1
    # (the owner's session holds it: the reason names no appender as the holder)
    assert "the chain's lock was not free within 1.8s" in done.stderr, done.stderr
    assert "database's owner" in done.stderr, done.stderr


@pytest.mark.parametrize("pause", [1.5, 2.6], ids=["idle-in-transaction", "watchdog"])
def test_a_pause_between_the_head_and_the_insert_is_refused_then_recovers(
    pg: Chain, pause: float
) -> None:
    """The process stalls after the head was read (1.5 s: the server ends the session for
    idle_in_transaction_session_timeout; 2.6 s: the watchdog cuts the socket while no libpq
    call is running): the INSERT must fail, the append be refused, nothing written."""
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="1")
    chain.append(CANARY, receipt(n=0))
    slow = [True]

    def stalling_clock() -> str:  # read inside the transaction, after the head
        if slow[0]:
            slow[0] = False
            time.sleep(pause)
        return now_ts()

    chain._clock = stalling_clock  # type: ignore[method-assign]
    _refused(chain)
    assert pg.sql("SELECT count(*) FROM floorguard.records") == "1"
    chain.append(CANARY, receipt(n=1))
    chain.append(CANARY, receipt(n=2))
    assert _verified(pg) == 3


# --- the watchdog cuts each of the three calls -----------------------------------------------


@pytest.mark.parametrize(
    "trigger",
    [b"EXECUTE floorguard_open", b"floorguard_append_", b"COMMIT\x00"],
    ids=["open", "insert", "commit"],
)
def test_a_server_that_goes_silent_in_each_libpq_call_is_refused_then_recovers(
    pg: Chain, trigger: bytes
) -> None:
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    assert append(pg.env(pg.key_file.parent)).returncode == 0
    with stalling_proxy(sock, trigger) as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        chain = AuditChain.from_env(
            pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1") | {"FLOORGUARD_CHAIN_URL": url}
        )
        started = time.monotonic()
        error = _refused(chain)
        assert time.monotonic() - started < 10
        assert proxy.stalled.is_set()
        assert "went silent" in str(error) or "FLOORGUARD_CHAIN_TIMEOUT" in str(error), error
        chain.close()
    # the committed-or-not record is decided by the server; the chain must verify
    time.sleep(1.5)  # the stalled session's transaction ends (idle-in-transaction timeout)
    assert append(pg.env(pg.key_file.parent)).returncode == 0
    assert verify(pg).returncode == 0
    assert assert_tree_matches_records(pg.chain()) >= 2


def test_the_same_process_appends_again_after_its_call_was_cut(pg: Chain) -> None:
    """After the watchdog cut the kept session whose append's answer never came, the same
    AuditChain reconnects and appends on. (The statement of that append, prepared in the
    append's own round trip, reached the server with its COMMIT: the record is stored, its
    answer lost, as when a server's answer to a COMMIT is; it verifies with the rest.)"""
    sock = pg.server.socket_dir / ".s.PGSQL.5432"
    with stalling_proxy(sock, b"floorguard_append_2") as proxy:
        url = f"postgresql://{pg.appender}@127.0.0.1:{proxy.port}/{pg.database}"
        chain = AuditChain.from_env(
            pg.env(pg.key_file.parent, FLOORGUARD_CHAIN_TIMEOUT="1") | {"FLOORGUARD_CHAIN_URL": url}
        )
        chain.append(CANARY, receipt(n=0))  # floorguard_append_1
        _refused(chain)  # seq 1: floorguard_append_2, stored, its answer swallowed
        assert proxy.stalled.is_set()
        proxy.trigger = b"\xff never sent \xff"  # new connections pass through
        time.sleep(1.5)
        chain.append(CANARY, receipt(n=1))  # seq 2, on a new connection
        chain.append(CANARY, receipt(n=2))
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


def test_a_server_gone_silent_after_the_pipelined_insert_and_commit_refuses_in_time(
    pg: Chain,
) -> None:
    """Once the pipeline (a ~1 MB receipt's INSERT, then COMMIT) is sent, every answer is
    swallowed (a frozen box in between): the append is a ChainWriteError naming the silence
    within 2x the timeout, not a hang (the watchdog's cut wakes poll()); the next append
    works and the chain verifies (the record may be committed: the known gap)."""

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


SECRET_URL = "postgresql://host-17:s3cretpw@127.0.0.1:1/audit"


def _a_checkpoint(pg: Chain, tmp_path: Path) -> tuple[Path, Path]:
    chain = pg.chain()
    chain.append(CANARY, receipt(n=0))
    chain.close()
    return signed_checkpoint(pg, tmp_path)


@pytest.mark.parametrize("command", ["export", "checkpoint", "prove", "consistency", "init"])
def test_every_chain_command_against_an_unreachable_database_is_one_line_exit_1_no_secret(
    pg: Chain, tmp_path: Path, command: str
) -> None:
    """Each `floorctl chain` command against a database it cannot reach exits 1 within the
    timeout with one `floorctl: error:` line naming the URL without its password, and no
    traceback."""
    cp, key = _a_checkpoint(pg, tmp_path)
    args = {
        "export": ["export"],
        "checkpoint": ["checkpoint", "--signing-key", str(key)],
        "prove": ["prove", "--seq", "0", "--checkpoint", str(cp)],
        "consistency": ["consistency", "--old", str(cp)],
        "init": ["init", "--url", SECRET_URL],
    }[command]
    env = {**pg.env(tmp_path / "other", FLOORGUARD_CHAIN_TIMEOUT="1"),
           "FLOORGUARD_CHAIN_URL": SECRET_URL}  # fmt: skip
    started = time.monotonic()
    done = floorctl("chain", *args, env=env)
    assert time.monotonic() - started < 20
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("floorctl: error:"), done.stderr
    assert "Traceback" not in done.stderr
    assert "s3cret" not in done.stderr + done.stdout
    assert "postgresql://host-17@127.0.0.1:1/audit" in done.stderr, done.stderr


def test_an_append_whose_session_the_server_ended_says_who_may_have_ended_it(
    pg: Chain,
) -> None:
    """A session ended by the server (a waiting append ends one holding the chain's lock
    past its limit, as the server's log says) is not only called unreachable: its refusal
    names the lock's hold limit and the server's log."""
    _owner_trigger(pg, "slow", "PERFORM pg_sleep(5);", when="BEFORE INSERT")
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="8")

    def end_the_appender() -> None:
        for _ in range(100):
            time.sleep(0.1)
            # (the appending session, asleep in the trigger: the server's superuser sees it)
            asleep = f"wait_event = 'PgSleep' AND datname = '{pg.database}'"
            query = f"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE {asleep}"  # noqa: S608
            ended = pg.server.psql(query).strip()
            if ended != "0":
                return

    ender = threading.Thread(target=end_the_appender, daemon=True)
    ender.start()
    message = str(_refused(chain))
    ender.join(15)
    # (libpq may hear the server's goodbye or only the closed socket: either way the lock's
    # limit is named)
    assert "lock_hold_limit_ms" in message and "the server's log" in message, message
