"""A session that holds the PostgreSQL chain's lock cannot stop the fleet's appends.

The lock is taken only inside the chain's functions, and lives until the caller's
transaction ends; a host may switch its own timeouts off and sit on it, idle or busy. An
append waiting for the lock ends (pg_terminate_backend, as the chain's owner, who holds
pg_signal_backend) a session that has held it longer than meta ``lock_hold_limit_ms`` (1 s),
and goes on within its own timeout. What counts is how long the lock has been held, not how
old the holder's transaction is (an honest append that waited long is not ended for it), and
calling the functions again does not renew a hold. The owner's and a superuser's sessions
are never ended. An owner without pg_signal_backend is told so by ``chain init``, and a held
lock then refuses appends within their timeout, as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from helpers.chain_support import receipt
from helpers.pg_chain import CANARY, PARSE_TIME_LOCKS, Chain, _verified, floorctl, timed_append

from floorguard.errors import ChainWriteError

pytestmark = pytest.mark.fleet


TIMEOUT = 5.0  # FLOORGUARD_CHAIN_TIMEOUT's default
MARGIN = 1.5


def _alive(pg: Chain, pid: int) -> bool:
    return pg.sql(f"SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}") == "1"  # noqa: S608


def _given_the_tables(pg: Chain) -> None:
    """What earlier versions granted a host, and an owner might still: USAGE on the
    tables' schema and SELECT on its tables. A host of this version may not name them
    (tests/fleet/test_tables_out_of_reach.py); for a role that may, a waiting append
    ends what it holds or queues on them."""
    pg.sql(
        f"GRANT USAGE ON SCHEMA floorguard TO {pg.appender};"
        f" GRANT SELECT ON floorguard.meta, floorguard.records, floorguard.tree TO {pg.appender}"
    )


def _take(conn: psycopg.Connection[Any]) -> int:
    conn.execute("BEGIN")
    conn.execute("SELECT floorguard_api.open_append(NULL)")
    return int(conn.info.backend_pid)


def test_a_session_idle_on_the_lock_is_ended_and_the_append_goes_on(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    pg.chain().append(CANARY, receipt())
    pid = _take(hostile)
    assert timed_append(pg) < TIMEOUT + MARGIN
    assert not _alive(pg, pid)
    with pytest.raises(psycopg.OperationalError):
        hostile.execute("SELECT 1")
    assert _verified(pg) == 2


def test_a_session_busy_on_the_lock_is_ended_and_the_append_goes_on(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    pid = _take(hostile)
    ended: list[BaseException] = []

    def sleep() -> None:
        try:
            hostile.execute("SELECT pg_sleep(1000)")
        except psycopg.OperationalError as exc:
            ended.append(exc)

    sleeper = threading.Thread(target=sleep, daemon=True)
    sleeper.start()
    assert timed_append(pg) < TIMEOUT + MARGIN
    sleeper.join(10)
    assert ended and not _alive(pg, pid)
    assert _verified(pg) == 1


def test_a_holder_is_ended_for_its_own_hold_not_for_the_time_of_the_one_before(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # The lock may change hands while a waiter looks: here the bookkeeping still names an
    # earlier transaction that took the lock long ago (as between a holder taking it and
    # writing its hold). The session holding it now gets the whole limit, counted from when
    # a waiter first saw it.
    pg.chain().append(CANARY, receipt())
    pg.sql("UPDATE floorguard.meta SET value = '2000' WHERE key = 'lock_hold_limit_ms'")
    pid = _take(hostile)
    pg.sql("SELECT setval('floorguard.lock_since', 1000000), setval('floorguard.lock_holder', 1)")
    assert timed_append(pg, FLOORGUARD_CHAIN_TIMEOUT="8") >= 2.0
    assert not _alive(pg, pid)
    assert _verified(pg) == 2


@pytest.mark.parametrize(
    "again",
    [
        "SELECT floorguard_api.open_append(NULL)",
        # (33 calls: as many turns as the ring of served appends holds, and one more)
        "SELECT floorguard_api.add_tree_nodes('{}'::int[], '{}'::bigint[], '{}'::bytea[])"
        " FROM generate_series(1, 33)",
    ],
    ids=["open_append", "add_tree_nodes"],
)
def test_calling_the_functions_again_does_not_renew_a_hold(
    pg: Chain, hostile: psycopg.Connection[Any], again: str
) -> None:
    # A holder that calls what takes the lock again is not given the lock anew: its hold
    # keeps its time (it is ended) and no turn is written for it (a ring full of its turns
    # would count every waiter as served, and none would claim).
    pid = _take(hostile)
    stop = threading.Event()
    ended: list[Exception] = []

    def renew() -> None:
        try:
            while not stop.wait(0.1):
                hostile.execute(again)
        except psycopg.OperationalError as exc:  # ended while at it
            ended.append(exc)

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        assert timed_append(pg) < TIMEOUT + MARGIN
        renewer.join(10)  # its next call finds its session ended
    finally:
        stop.set()
        renewer.join(10)
    assert ended and not _alive(pg, pid)


def test_a_holder_is_judged_by_how_long_it_held_the_lock_not_by_its_transaction(
    pg: Chain,
) -> None:
    """An append that waited behind the owner (never ended) past the limit, then holds the
    lock briefly, is not ended by another waiting append. (A limit of 3 s: its 0.05 s hold
    stays far below it however long a loaded machine takes to schedule its commit.)"""
    pg.chain().append(CANARY, receipt())
    pg.sql("UPDATE floorguard.meta SET value = '3000' WHERE key = 'lock_hold_limit_ms'")
    with psycopg.connect(pg.owner_url) as owner, psycopg.connect(pg.url) as late:
        owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
        started = threading.Event()

        def late_append() -> None:
            started.set()
            late.execute("SELECT floorguard_api.open_append(NULL)")  # waits behind the owner
            time.sleep(0.05)  # holds it as an append does, its transaction over the limit
            late.commit()

        waiter = threading.Thread(target=late_append, daemon=True)
        waiter.start()
        started.wait()
        time.sleep(0.1)  # in the queue first
        other = threading.Thread(target=timed_append, args=(pg,), daemon=True)
        other.start()
        time.sleep(3.4)  # the late append's transaction is now past the limit
        owner.commit()
        waiter.join(10)
        other.join(10)
        assert not waiter.is_alive() and not other.is_alive()
        assert late.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert late.execute("SELECT 1").fetchone() == (1,)  # never ended
    assert _verified(pg) == 2


def test_the_owners_session_holding_the_lock_is_not_ended(pg: Chain) -> None:
    with psycopg.connect(pg.owner_url) as owner:
        owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
        with pytest.raises(ChainWriteError, match=r"the chain.s lock was not free"):
            timed_append(pg, FLOORGUARD_CHAIN_TIMEOUT="2")
        assert owner.execute("SELECT 1").fetchone() == (1,)


def test_without_pg_signal_backend_init_says_what_to_grant_and_a_holder_refuses_appends(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    pg.server.psql(f"REVOKE pg_signal_backend FROM {pg.owner}")
    env = pg.env(pg.key_file.parent)
    done = floorctl("chain", "init", "--url", pg.owner_url, env=env)
    assert done.returncode == 0, done.stderr
    assert f"GRANT pg_signal_backend TO {pg.owner}" in done.stdout
    pid = _take(hostile)
    started = time.monotonic()
    with pytest.raises(ChainWriteError, match=r"the chain.s lock was not free within 1.8s"):
        timed_append(pg, FLOORGUARD_CHAIN_TIMEOUT="2")
    assert time.monotonic() - started < 2 + MARGIN
    assert _alive(pg, pid)
    hostile.execute("ROLLBACK")
    pg.server.psql(f"GRANT pg_signal_backend TO {pg.owner}")
    done = floorctl("chain", "init", "--url", pg.owner_url, env=env)
    assert "GRANT pg_signal_backend" not in done.stdout


def test_a_savepoint_rolled_back_does_not_leave_a_session_writing_without_the_lock(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # Rolling back to a savepoint releases the lock taken after it, but not what the
    # functions' own bookkeeping says: append_record must ask PostgreSQL for the lock, and
    # so wait for it while another session holds it, before it looks at the record.
    hostile.execute("BEGIN")
    hostile.execute("SAVEPOINT s")
    hostile.execute("SELECT floorguard_api.open_append(NULL)")
    hostile.execute("ROLLBACK TO SAVEPOINT s")
    hostile.execute("RELEASE SAVEPOINT s")
    with psycopg.connect(pg.owner_url) as owner:
        owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
        hostile.execute("SET LOCAL lock_timeout = '1s'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            hostile.execute(
                "SELECT floorguard_api.append_record(0, '', '', '', '', '{}', '', %s,"
                " '{}'::integer[], '{}'::bigint[], '{}'::bytea[])",
                ("0" * 64,),
            )


def test_sessions_taking_turns_just_under_the_hold_limit_cannot_starve_an_append(
    pg: Chain,
) -> None:
    # Four sessions of another host each hold the lock 0.9 s (under the 1 s limit) and take
    # it again at once: once an append has waited the limit unserved, it claims the lock,
    # and is served after the holder of the moment (the session given the lock next lets
    # it go).
    pg.chain().append(CANARY, receipt())
    with _turn_takers(_another_host(pg, "taker"), 4, 0.9):
        for _ in range(3):
            assert timed_append(pg) < TIMEOUT + MARGIN
    assert _verified(pg) == 4


def test_a_ring_full_of_other_hosts_turns_does_not_count_a_waiter_served(pg: Chain) -> None:
    # Hosts in league may take 32 short turns while an append waits its first second: the
    # ring of served turns then holds none older than its wait, which says nothing of its
    # own host. It is starved all the same, claims the lock, and is served after the holder
    # of the moment, though another host's sessions hold 0.9 s each in turn. (The ring is
    # kept full here by the owner, with that host's turns.)
    pg.chain().append(CANARY, receipt())
    taker = _another_host(pg, "taker")
    with _turn_takers(taker, 4, 0.9), _ring_kept_full(pg, f"{pg.appender}_taker"):
        for _ in range(3):
            assert timed_append(pg) < TIMEOUT + MARGIN
    assert _verified(pg) == 4


@contextlib.contextmanager
def _ring_kept_full(pg: Chain, role: str) -> Iterator[None]:
    """For the block, every turn in the ring of served appends is a turn of ``role`` taken
    a moment ago (written every 20 ms)."""
    stop = threading.Event()
    fill = (
        "SELECT pg_catalog.setval(pg_catalog.format('floorguard.lock_served_%s', n)::regclass,"  # noqa: S608 (a test's own role name)
        " ((((EXTRACT(epoch FROM clock_timestamp()) * 1000)::bigint - 1700000000000)"
        f" & 2147483647) << 32) | (SELECT oid FROM pg_roles WHERE rolname = '{role}')::bigint)"
        " FROM generate_series(0, 31) AS n"
    )

    def keep() -> None:
        with psycopg.connect(pg.owner_url, autocommit=True) as conn:
            while not stop.wait(0.02):
                conn.execute(fill)  # type: ignore[arg-type]

    keeper = threading.Thread(target=keep, daemon=True)
    keeper.start()
    try:
        yield
    finally:
        stop.set()
        keeper.join(10)


@contextlib.contextmanager
def _turn_takers(url: str, sessions: int, hold: float) -> Iterator[None]:
    """For the block, ``sessions`` sessions of the role of ``url`` take the chain's lock in
    turn, each holding it ``hold`` seconds and queuing again at once (one always waited
    over a second)."""
    stop = threading.Event()

    def cycle() -> None:
        while not stop.is_set():  # ended: it reconnects
            with contextlib.suppress(psycopg.OperationalError), psycopg.connect(url) as conn:
                while not stop.is_set():
                    conn.execute("SELECT floorguard_api.open_append(NULL)")
                    time.sleep(hold)
                    conn.commit()

    threads = [threading.Thread(target=cycle, daemon=True) for _ in range(sessions)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)


def _held_across_round_trips(url: str, hold: float, results: list[str]) -> None:
    """An append of a distant host: it takes the chain's lock (waiting as an append does)
    and keeps it ``hold`` seconds, idle in its transaction as between its round trips,
    then commits. ``results`` hears "committed" or why not."""
    try:
        with psycopg.connect(url) as conn:
            _open_append(conn)
            time.sleep(hold)
            conn.commit()
            results.append("committed")
    except psycopg.Error as exc:
        results.append(f"{type(exc).__name__}: {exc}")


def test_a_hosts_turn_takers_do_not_end_a_distant_hosts_append(pg: Chain) -> None:
    # One hostile host's sessions take the lock in turn (0.35 s each, four of them): one of
    # them has always waited over a second. An append of a distant host, holding the lock
    # 0.5 s across its round trips (under the limit), commits.
    pg.chain().append(CANARY, receipt())
    results: list[str] = []
    with _turn_takers(_another_host(pg, "taker"), 4, 0.35):
        for _ in range(2):
            _held_across_round_trips(pg.url, 0.5, results)
    assert results == ["committed", "committed"], results


@pytest.mark.parametrize("second_host", ["hostile", "accomplice"])
def test_a_waiter_starved_to_order_does_not_end_a_distant_hosts_append(
    pg: Chain, second_host: str
) -> None:
    # A hostile host holds the lock (taken at once: no turn in the ring) while a distant
    # host queues, queues a second session (its own, or an accomplice host's) behind it,
    # and lets go just before the distant host has waited the limit. The second session
    # has then waited the limit unserved while the distant append holds the lock across
    # its round trips (0.5 s here), and that append waited before (a turn in the ring).
    # No hold is cut short for a waiter: the distant append commits.
    pg.chain().append(CANARY, receipt())
    hostile, distant = _another_host(pg, "hostile"), _another_host(pg, "distant")
    second_url = hostile if second_host == "hostile" else _another_host(pg, second_host)
    results: list[str] = []
    with psycopg.connect(hostile) as holder, psycopg.connect(second_url) as second:
        holder.execute("SET idle_in_transaction_session_timeout = 0")
        _take(holder)
        # The distant host's earlier turn: it waited for the lock, so it is in the ring.
        earlier = threading.Thread(target=_held_across_round_trips, args=(distant, 0, results))
        earlier.start()
        _queued(pg, "distant")
        holder.commit()
        earlier.join(10)
        _take(holder)
        attacked = threading.Thread(target=_held_across_round_trips, args=(distant, 0.5, results))
        attacked.start()
        seen = _queued(pg, "distant")
        queued = threading.Thread(target=_served, args=(second, "second", []), daemon=True)
        queued.start()
        time.sleep(max(0.0, seen + 0.85 - time.monotonic()))
        holder.commit()
        attacked.join(10)
        queued.join(10)
    assert results == ["committed", "committed"], results


def _queued(pg: Chain, name: str) -> float:
    """When a session of the host ``name`` was first seen waiting for the chain's lock."""
    role = f"{pg.appender}_{name}"
    for _ in range(500):
        waiting = pg.sql(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"  # noqa: S608
            " WHERE l.relation = 'floorguard.append_lock'::regclass AND NOT l.granted"
            f" AND a.usename = '{role}'"
        )
        if waiting != "0":
            return time.monotonic()
        time.sleep(0.01)
    pytest.fail(f"no session of {role} ever waited for the chain's lock")


def test_a_starved_append_served_by_its_claim_keeps_the_whole_limit(pg: Chain) -> None:
    # Two distant hosts wait behind a host's turn takers and both starve: the one served
    # through its claim keeps the lock its 0.5 s, though the other, starved too, waits.
    pg.chain().append(CANARY, receipt())
    first, second = _another_host(pg, "far1"), _another_host(pg, "far2")
    results: list[str] = []
    with _turn_takers(_another_host(pg, "taker"), 4, 0.35):
        threads = [
            threading.Thread(target=_held_across_round_trips, args=(url, 0.5, results))
            for url in (first, second)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert results == ["committed", "committed"], results


# One league runs in CI; two hosts of 4 and the larger leagues (20 to 48 sessions) run
# with the slow suite: on a shared 2-core machine their sessions' CPU stretches every
# wait, and CI's time.
@pytest.mark.parametrize(
    ("hosts", "sessions"),
    [
        pytest.param(1, 8, id="one-host-8"),
        pytest.param(2, 4, id="two-hosts-4-each", marks=pytest.mark.slow),
        pytest.param(1, 20, id="one-host-20", marks=pytest.mark.slow),
        pytest.param(2, 12, id="two-hosts-12-each", marks=pytest.mark.slow),
        pytest.param(9, 2, id="nine-hosts-2-each", marks=pytest.mark.slow),
        pytest.param(8, 6, id="eight-hosts-6-each", marks=pytest.mark.slow),
        pytest.param(8, 7, id="eight-hosts-7-each", marks=pytest.mark.slow),
        pytest.param(12, 6, id="twelve-hosts-6-each", marks=pytest.mark.slow),
    ],
)
def test_sessions_in_league_taking_turns_starve_no_append_nor_init(
    pg: Chain, hosts: int, sessions: int
) -> None:
    # Sessions of other hosts hold the lock 0.24 s (well under the limit, so none is
    # ever ended for its own hold) in turn and queue again at once: a waiting append that
    # left the queue to look for a holder to end rejoined it behind all of them. The
    # starved append claims the lock; sessions older than it may claim ahead of it only
    # while their own host has not been served since they began waiting, so each host is
    # served at most once ahead of it, however many sessions it has.
    pg.chain().append(CANARY, receipt())
    with _league(pg, hosts, sessions):
        for _ in range(3):
            assert timed_append(pg) < TIMEOUT + MARGIN
        # The owner's chain init (run again, as on an upgrade) waits in line as an append.
        again = floorctl("chain", "init", "--url", pg.owner_url, env=pg.env(pg.key_file.parent))
        assert again.returncode == 0, again.stderr
    assert _verified(pg) == 4


@pytest.mark.slow
def test_a_host_appending_now_and_then_goes_before_a_league_of_twenty_hosts(
    pg: Chain,
) -> None:
    # Twenty hosts of two sessions each take the lock in turn (0.24 s each): one turn of
    # each is longer than the append's timeout. A host that appends now and then has gone
    # unserved longer than any of them, so its claim goes first once it has waited the
    # hold limit, rather than after a turn of each host whose session began waiting
    # before it.
    pg.chain().append(CANARY, receipt())
    with _league(pg, 20, 2):
        for _ in range(3):
            assert timed_append(pg) < TIMEOUT + MARGIN
            time.sleep(6.0)  # a turn of the whole league: then, no longer "now"
    assert _verified(pg) == 4


@contextlib.contextmanager
def _league(pg: Chain, hosts: int, sessions: int) -> Iterator[None]:
    """For the block, ``sessions`` sessions of each of ``hosts`` other hosts (roles) take
    the chain's lock in turn, each holding it 0.24 s and queuing again at once."""
    urls = [_another_host(pg, f"league{n}") for n in range(hosts)]
    stop = threading.Event()

    def relay(url: str) -> None:
        while not stop.is_set():  # ended: it reconnects
            with contextlib.suppress(psycopg.OperationalError), psycopg.connect(url) as conn:
                while not stop.is_set():
                    conn.execute("SELECT floorguard_api.open_append(NULL)")
                    time.sleep(0.24)
                    conn.commit()

    relays = [
        threading.Thread(target=relay, args=(url,), daemon=True)
        for url in urls for _ in range(sessions)
    ]  # fmt: skip
    for thread in relays:
        thread.start()
    time.sleep(1.0)
    try:
        yield
    finally:
        stop.set()
        for thread in relays:
            thread.join(10)


def _wake_locks(pg: Chain, pid: int, *, granted: bool, timeout: float = 60) -> str:
    """The advisory locks on a claimant's wake key that session `pid` holds or awaits."""
    from floorguard.chainstore.postgres_schema import CLAIM_WAKE_KEY

    return pg.sql(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"  # noqa: S608
        f" AND classid = {CLAIM_WAKE_KEY} AND objsubid = 2 AND pid = {pid}"
        f" AND granted = {granted}",
        timeout=timeout,
    )


def _until_stopped(pid: int) -> None:
    """Waits for the kernel to stop ``pid``: kill() returns before a SIGSTOP lands."""
    for _ in range(1000):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in {"T", "t"}:
            return
        time.sleep(0.005)
    raise TimeoutError(f"process {pid} was sent SIGSTOP and did not stop")


def _stop_asleep_on_the_wake_lock(pg: Chain, pid: int) -> None:
    """Stops backend ``pid`` inside one of its sleeps on the claimant's wake lock.

    A backend stopped at any other moment may hold one of the lock manager's LWLocks, which
    pg_locks, and any lock request of any database on this server, then waits for with no
    timeout: so each look is bounded, and a backend not seen asleep is continued at once,
    whatever the look raised. Left stopped, it would hold up every test sharing the server."""
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        asleep = False
        try:
            _until_stopped(pid)
            asleep = _wake_locks(pg, pid, granted=False, timeout=5) == "1"
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired):
            pass  # (not seen asleep: continued, and looked at again)
        finally:
            if not asleep:
                os.kill(pid, signal.SIGCONT)
        if asleep:
            return
        time.sleep(0.01)
    pytest.fail("the waiter was never found sleeping on the claimant's wake lock")


def _another_host(pg: Chain, name: str) -> str:
    """The URL of a new login role granted the appenders' role: another host."""
    role = f"{pg.appender}_{name}"
    pg.server.psql(f"CREATE ROLE {role} LOGIN")
    done = floorctl("chain", "init", "--url", pg.owner_url, "--grant", role,
                    env=pg.env(pg.key_file.parent))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return pg.server.url(role, pg.database)


def _open_append(conn: psycopg.Connection[Any]) -> None:
    """Take the chain's lock as an append does, waiting up to 8 s."""
    conn.execute("SET lock_timeout = '8s'")
    conn.execute("SELECT floorguard_api.open_append(NULL)")


def _served(conn: psycopg.Connection[Any], name: str, served: list[str]) -> None:
    """Take the chain's lock as ``name``, note it in ``served`` (the order of service),
    and let it go."""
    _open_append(conn)
    served.append(name)
    conn.rollback()


@dataclasses.dataclass
class _Claim:
    """A claimant (this host) waiting behind the owner's hold, and a later waiter (another
    host) behind its claim; each appends in its own thread, noting its turn in ``served``."""

    owner: psycopg.Connection[Any]
    claimant: threading.Thread
    late: threading.Thread
    late_pid: int
    served: list[str]

    def serve_claimant(self) -> None:
        """The owner lets the lock go: the claimant is served (and lets it go)."""
        self.owner.rollback()
        self.claimant.join(10)

    def serve(self) -> None:
        """Both are served, in whatever order."""
        self.serve_claimant()
        self.late.join(10)


@contextlib.contextmanager
def _a_claim_and_a_waiter(pg: Chain) -> Iterator[_Claim]:
    pg.chain().append(CANARY, receipt())
    late_url = _another_host(pg, "late")
    served: list[str] = []
    with (
        psycopg.connect(pg.owner_url) as owner,  # never ended: it holds as long as it likes
        psycopg.connect(pg.url) as claimant,
        psycopg.connect(late_url) as late,
    ):
        owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
        first = threading.Thread(target=_served, args=(claimant, "claimant", served), daemon=True)
        first.start()
        time.sleep(1.4)  # it has waited the hold limit: it claims
        claim = int(pg.sql("SELECT last_value FROM floorguard.lock_claim"))
        assert claim & 0x3FFFFF == claimant.info.backend_pid
        assert _wake_locks(pg, claimant.info.backend_pid, granted=True) == "1"
        second = threading.Thread(target=_served, args=(late, "late", served), daemon=True)
        second.start()
        yield _Claim(owner, first, second, late.info.backend_pid, served)


def test_waiters_behind_a_standing_claim_sleep_outside_the_queue_until_it_is_served(
    pg: Chain,
) -> None:
    # Waiters that poll while a claim stands load the server that the claimant and the
    # holder need: so a waiter sleeps on the claimant's own advisory lock, out of the
    # chain lock's queue, and the claimant is served first.
    with _a_claim_and_a_waiter(pg) as claim:
        # (it sleeps 100 ms at a time and looks again in between: seen asleep at some
        # moment of the next few seconds, and never in the queue at any)
        queue = (
            f"SELECT count(*) FROM pg_locks WHERE pid = {claim.late_pid}"  # noqa: S608
            " AND relation = 'floorguard.append_lock'::regclass"
        )
        sleeping, queued = False, False
        for round_ in range(50):
            time.sleep(0.1)
            sleeping = sleeping or _wake_locks(pg, claim.late_pid, granted=False) == "1"
            queued = queued or pg.sql(queue) != "0"
            if sleeping and round_ >= 5:
                break
        assert sleeping and not queued
        claim.serve()
    assert claim.served == ["claimant", "late"]
    assert pg.sql("SELECT last_value FROM floorguard.lock_claim") == "0"


def test_a_waiter_woken_as_its_sleep_times_out_keeps_no_lock_on_the_claimant(
    pg: Chain,
) -> None:
    # A waiter sleeps on the claimant's wake lock for at most CLAIM_FRESH_MS. When the
    # claimant lets it go just as that wait times out, PostgreSQL raises the timeout yet
    # grants the lock: a session-level lock so granted is never let go, and the claimant,
    # claiming again later, can no longer take its own wake lock (every waiter then polls).
    # Here the waiter's backend is stopped while it waits, the lock granted and its
    # timeout passed, then continued: both arrive at once.
    with _a_claim_and_a_waiter(pg) as claim:
        late_pid = claim.late_pid
        _stop_asleep_on_the_wake_lock(pg, late_pid)
        try:
            claim.serve_claimant()  # it lets its wake lock go
            assert _wake_locks(pg, late_pid, granted=True, timeout=10) == "1"  # granted, stopped
            time.sleep(0.3)  # and its wait's timeout passed
        finally:
            os.kill(late_pid, signal.SIGCONT)
        claim.serve()
        assert claim.served == ["claimant", "late"]
        held = pg.sql(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"  # noqa: S608
            f" AND pid = {late_pid}"
        )
        assert held == "0"  # (while its session lives on, as a host's does)


def test_chain_init_waiting_behind_a_starved_appends_claim_does_not_end_it(pg: Chain) -> None:
    # Init waits for the chain's lock as an append does, so behind a claim it sleeps on
    # the claimant's advisory lock: its watch must not take the claimant for a session
    # that holds what init needs, and end it.
    pg.chain().append(CANARY, receipt())
    served: list[str] = []

    def append(conn: psycopg.Connection[Any]) -> None:
        _open_append(conn)
        served.append("claimant")
        conn.rollback()

    with (
        psycopg.connect(pg.owner_url) as owner,  # never ended: it holds as long as it likes
        psycopg.connect(pg.url) as claimant,
    ):
        owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
        waiting = threading.Thread(target=append, args=(claimant,), daemon=True)
        waiting.start()
        time.sleep(1.4)  # it has waited the hold limit: it claims
        assert _wake_locks(pg, claimant.info.backend_pid, granted=True) == "1"
        init: list[Any] = []
        env = {**pg.env(pg.key_file.parent), "FLOORGUARD_CHAIN_TIMEOUT": "8"}
        again = threading.Thread(
            target=lambda: init.append(floorctl("chain", "init", "--url", pg.owner_url, env=env)),
            daemon=True,
        )
        again.start()
        time.sleep(1.0)  # init asleep behind the claim; its watch looks every 0.1 s
        owner.rollback()
        waiting.join(10)
        again.join(20)
    assert served == ["claimant"]
    [done] = init
    assert done.returncode == 0, done.stderr
    assert "ended session" not in done.stdout, done.stdout


def test_a_claim_a_session_left_behind_is_cleared_when_it_waits_again(pg: Chain) -> None:
    # A claimant cancelled before its grant leaves its claim, and the advisory lock others
    # sleep on while it claims; the same session (or one given its pid later) waiting again
    # must not be served on that old claim, nor keep others asleep. Nor may it keep another
    # claimant's wake lock that it was granted as its wait timed out (an older floorguard
    # kept such a lock): that claimant could not take it again.
    from floorguard.chainstore.postgres_schema import (
        CLAIM_EPOCH_MS,
        CLAIM_PID_BITS,
        CLAIM_WAKE_KEY,
    )

    pg.chain().append(CANARY, receipt())
    holder = psycopg.connect(pg.url)
    waiter = psycopg.connect(pg.url)
    try:
        _take(holder)
        old_start = int(time.time() * 1000) - 60_000 - CLAIM_EPOCH_MS
        stale = old_start << CLAIM_PID_BITS | waiter.info.backend_pid
        pg.sql(f"SELECT setval('floorguard.lock_claim', {stale})")
        waiter.execute("SELECT pg_advisory_lock(%s, pg_backend_pid())", (CLAIM_WAKE_KEY,))
        waiter.execute(
            "SELECT pg_advisory_lock_shared(%s, %s)", (CLAIM_WAKE_KEY, holder.info.backend_pid)
        )
        waiter.commit()
        assert _wake_locks(pg, waiter.info.backend_pid, granted=True) == "2"
        waiting = threading.Thread(target=lambda: _take(waiter), daemon=True)
        waiting.start()
        time.sleep(0.5)  # waiting, and not yet for the limit: no claim of its own
        assert pg.sql("SELECT last_value FROM floorguard.lock_claim") == "0"
        assert _wake_locks(pg, waiter.info.backend_pid, granted=True) == "0"
        holder.rollback()
        waiting.join(10)
        assert not waiting.is_alive()
    finally:
        holder.close()
        waiter.close()


@pytest.mark.parametrize("looked_ms_ago", [0, 60_000])
def test_a_claim_whose_session_no_longer_waits_stops_standing(
    pg: Chain, looked_ms_ago: int
) -> None:
    # A claimant whose statement was cancelled, its session left idle: its claim stands at
    # most 100 ms after it last looked, then appends take the lock as if unclaimed.
    pg.chain().append(CANARY, receipt())
    with psycopg.connect(pg.url) as idle:
        _claim_as(pg, idle.info.backend_pid, seen_in_ms=-looked_ms_ago)
        for _ in range(3):
            assert timed_append(pg) < 1.0
    assert _verified(pg) == 4


def test_the_claim_of_an_ended_session_stops_standing_though_the_clock_stepped_back(
    pg: Chain,
) -> None:
    # The claimant last looked "a minute from now": the server's clock stepped back after
    # it did. Its session has ended, so its claim stands no longer, whatever the clock says.
    pg.chain().append(CANARY, receipt())
    with psycopg.connect(pg.url) as ended:
        pid = ended.info.backend_pid
    _claim_as(pg, pid, seen_in_ms=60_000)
    for _ in range(3):
        assert timed_append(pg) < 1.0
    assert _verified(pg) == 4


@pytest.mark.parametrize(
    "target", ["floorguard.records", "floorguard.meta", "floorguard.lock_since"]
)
def test_a_queued_ddl_request_on_the_chains_tables_is_ended_and_appends_go_on(
    pg: Chain, hostile: psycopg.Connection[Any], target: str
) -> None:
    # An appender may not run DDL, but PostgreSQL queues its request for the lock before it
    # checks: an ACCESS SHARE held by one session, then CREATE RULE queued by another,
    # would stall every append behind the queued request.
    _given_the_tables(pg)
    pg.chain().append(CANARY, receipt())
    # What the request queues behind: an ACCESS SHARE a host may take, or the lock of an
    # append left idle (whose own bookkeeping sequence the request then waits on).
    hostile.execute("BEGIN")
    if target != "floorguard.lock_since":
        hostile.execute(f"SELECT count(*) FROM {target}")  # noqa: S608
    else:
        hostile.execute("SELECT floorguard_api.open_append(NULL)")
    queued = psycopg.connect(pg.url, autocommit=True)
    queued.execute("SET lock_timeout = 0")
    queued.execute("SET statement_timeout = 0")
    pid = int(queued.info.backend_pid)
    failed: list[Exception] = []

    def ask() -> None:
        try:
            queued.execute(f"CREATE RULE r AS ON INSERT TO {target} DO INSTEAD NOTHING")
        except psycopg.Error as exc:  # ended (or refused once it gets the lock)
            failed.append(exc)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    time.sleep(0.5)
    try:
        assert timed_append(pg) < TIMEOUT + MARGIN
        assert timed_append(pg) < TIMEOUT + MARGIN
    finally:
        with contextlib.suppress(psycopg.OperationalError):  # ended too, as a holder
            hostile.execute("ROLLBACK")
        asker.join(10)
        queued.close()
    assert failed and not _alive(pg, pid)
    assert _verified(pg) == 3


@pytest.mark.parametrize("statement", list(PARSE_TIME_LOCKS.values()), ids=list(PARSE_TIME_LOCKS))
def test_a_lock_taken_without_privilege_on_the_chains_lock_table_is_ended(
    pg: Chain, hostile: psycopg.Connection[Any], statement: str
) -> None:
    _given_the_tables(pg)
    pg.chain().append(CANARY, receipt())
    hostile.execute("BEGIN")
    for part in statement.split("; "):
        hostile.execute(part)
    pid = int(hostile.info.backend_pid)
    assert timed_append(pg) < TIMEOUT + MARGIN
    assert not _alive(pg, pid)
    assert _verified(pg) == 2


def test_a_write_lock_held_outside_an_append_with_ddl_queued_behind_it_is_ended(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # MERGE ... DO NOTHING needs no write privilege, yet locks its target ROW EXCLUSIVE;
    # DDL another session keeps asking for (queued before its privilege is checked) waits
    # behind it, and every append's lock on the table behind that.
    _given_the_tables(pg)
    pg.chain().append(CANARY, receipt())
    hostile.execute("BEGIN")
    for table in ("records", "tree"):
        hostile.execute(
            f"MERGE INTO floorguard.{table} x USING (SELECT 1) s ON false "
            "WHEN NOT MATCHED THEN DO NOTHING"
        )
    holder = int(hostile.info.backend_pid)
    stop = threading.Event()

    def keep_asking() -> None:
        while not stop.is_set():
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(pg.url, autocommit=True) as queued,
            ):
                queued.execute("SET lock_timeout = 0")
                queued.execute("CREATE RULE r AS ON INSERT TO floorguard.tree DO INSTEAD NOTHING")
            time.sleep(0.01)

    askers = [threading.Thread(target=keep_asking, daemon=True) for _ in range(2)]
    for asker in askers:
        asker.start()
    time.sleep(0.5)
    try:
        assert timed_append(pg) < TIMEOUT + MARGIN
        assert timed_append(pg) < TIMEOUT + MARGIN
    finally:
        stop.set()
        for asker in askers:
            asker.join(10)
    assert not _alive(pg, holder)
    assert _verified(pg) == 3


def test_append_record_called_alone_never_waits_in_the_locks_queue(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # An honest append takes the lock in open_append (take_lock: a bounded wait that serves
    # a starved append first) and then calls append_record in the same transaction. Called
    # alone while another holds the lock, append_record must refuse at once: queued with
    # its caller's lock_timeout (0: for ever), outside take_lock, sessions of one host took
    # turns in the queue ahead of every other host's append.
    pg.chain().append(CANARY, receipt())
    with psycopg.connect(pg.url) as holder:
        _take(holder)
        hostile.execute("SET statement_timeout = 3000")  # (before the fix: cancelled here)
        started = time.monotonic()
        with pytest.raises(psycopg.errors.LockNotAvailable):
            hostile.execute(
                "SELECT floorguard_api.append_record(1, 'x', 'x', 'x', 'x', '{}', 'x', 'x',"
                " '{}', '{}', '{}')"
            )
        assert time.monotonic() - started < 1.0


def test_a_lock_taken_at_once_is_held_by_a_transaction_with_its_id_from_the_start(
    pg: Chain,
) -> None:
    # A waiter knows a hold by its transaction's id, and times a hold it has not seen
    # before from its first look. A hold taken at once (an append run ahead, or
    # append_record called alone) had no id until its INSERT: a record that took long to
    # check (a large receipt) was given an id, and so a new time, half way through its
    # hold. Watched here while appends of large receipts run: never a hold seen without an
    # id and later with one. (The other way round is a commit releasing its locks, one
    # partition of the lock table after another: seen now and then on a loaded machine.)
    chain = pg.chain()
    chain.append(CANARY, receipt())
    stop = threading.Event()
    seen: dict[str, list[bool]] = {}  # each hold's transaction: has it an id, at each look

    def watch() -> None:
        with psycopg.connect(pg.owner_url, autocommit=True) as conn:
            while not stop.is_set():
                # (One reading of the lock table: a transaction with an id holds a lock
                # on it there.)
                rows = conn.execute(
                    "WITH locks AS MATERIALIZED (SELECT * FROM pg_locks)"
                    " SELECT l.virtualtransaction, EXISTS (SELECT 1 FROM locks t"
                    "   WHERE t.locktype = 'transactionid' AND t.granted"
                    "     AND t.virtualtransaction = l.virtualtransaction)"
                    " FROM locks l WHERE l.relation = 'floorguard.append_lock'::regclass"
                    " AND l.granted AND l.mode = 'ExclusiveLock'"
                ).fetchall()
                for hold, has_id in rows:
                    seen.setdefault(hold, []).append(has_id)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        for n in range(8):  # (about 0.5 MB each: checked for tens of ms under the lock)
            chain.append(CANARY, receipt(padding=[{"k": f"{n}-{i}"} for i in range(20_000)]))
    finally:
        stop.set()
        watcher.join(10)
    assert any(True in looks for looks in seen.values())  # (the watch saw holds at all)
    given_late = [hold for hold, looks in seen.items() if True in looks and not looks[0]]
    assert not given_late, {hold: seen[hold] for hold in given_late}


def test_a_busy_lock_is_waited_for_once_on_a_kept_session(pg: Chain) -> None:
    # A session kept from an earlier append that finds the lock busy past its wait is
    # refused: not taken for a session gone stale (a server restarted, which a fresh one
    # retries) and its wait run again on another, which doubled it past the timeout.
    chain = pg.chain(FLOORGUARD_CHAIN_TIMEOUT="2")
    chain.append(CANARY, receipt())  # (its session is kept)
    stop = threading.Event()
    waiting: set[int] = set()

    waiters = (
        "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"  # noqa: S608
        " WHERE l.relation = 'floorguard.append_lock'::regclass"
        f" AND NOT l.granted AND a.usename = '{pg.appender}'"
    )

    def watch() -> None:
        with psycopg.connect(pg.owner_url, autocommit=True) as conn:
            while not stop.wait(0.02):
                waiting.update(pid for (pid,) in conn.execute(waiters))  # type: ignore[arg-type]

    with psycopg.connect(pg.owner_url) as owner:  # (never ended: it holds as long as it likes)
        owner.execute("LOCK TABLE floorguard.append_lock IN EXCLUSIVE MODE")
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            with pytest.raises(ChainWriteError, match=r"the chain.s lock was not free within 1.8s"):
                chain.append(CANARY, receipt())
        finally:
            stop.set()
            watcher.join(10)
    assert len(waiting) == 1, waiting


def test_a_claim_stands_only_while_its_claimant_waits_for_the_chains_lock_itself(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # A claimant that has cancelled its wait may park another request on the lock table
    # (here SHARE UPDATE EXCLUSIVE, which brin_summarize_new_values asks of the index's
    # table before it checks any privilege): that is no wait for the chain's lock, and the
    # claim must not stand on it, or every other append sleeps behind it while the holder
    # sits on the lock for good.
    from floorguard.chainstore.postgres_schema import CLAIM_EPOCH_MS, CLAIM_PID_BITS

    pg.chain().append(CANARY, receipt())
    index = pg.sql(
        "SELECT i.indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'floorguard' AND c.relname = 'append_lock'"
    )
    holder = psycopg.connect(pg.url)  # (ended by the append: closed, not committed)
    try:
        _take(holder)
        now_ms = int(time.time() * 1000)
        claim = (now_ms - 5_000 - CLAIM_EPOCH_MS) << CLAIM_PID_BITS | hostile.info.backend_pid
        pg.sql(
            f"SELECT setval('floorguard.lock_claim', {claim}),"
            f" setval('floorguard.lock_claim_seen', {now_ms - 60_000})"
        )
        parked = threading.Thread(
            target=_quietly,
            args=(hostile, f"SELECT brin_summarize_new_values({index}::regclass)"),
            daemon=True,
        )
        parked.start()
        time.sleep(0.3)
        assert (
            pg.sql(
                "SELECT count(*) FROM pg_locks WHERE NOT granted"  # noqa: S608 (a pid)
                f" AND pid = {hostile.info.backend_pid}"
            )
            == "1"
        )
        assert timed_append(pg) < TIMEOUT
    finally:
        holder.close()
    parked.join(10)
    assert _verified(pg) == 2


def _quietly(conn: psycopg.Connection[Any], statement: str) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.execute(statement)  # type: ignore[arg-type]


def _claim_for(pg: Chain, claimant: psycopg.Connection[Any]) -> None:
    """A claim of ``claimant``'s session that stands for a minute (seen in the future)."""
    _claim_as(pg, claimant.info.backend_pid, seen_in_ms=60_000)


def _claim_as(pg: Chain, pid: int, *, seen_in_ms: int) -> None:
    """A claim of session ``pid``, waiting for 5 s, as the chain's functions leave it: its
    claimant last looked ``seen_in_ms`` from now (negative: ago)."""
    from floorguard.chainstore.postgres_schema import CLAIM_EPOCH_MS, CLAIM_PID_BITS

    now_ms = int(time.time() * 1000)
    claim = (now_ms - 5_000 - CLAIM_EPOCH_MS) << CLAIM_PID_BITS | pid
    pg.sql(
        f"SELECT setval('floorguard.lock_claim', {claim}),"
        f" setval('floorguard.lock_claim_seen', {now_ms + seen_in_ms})"
    )


def test_append_record_called_alone_refuses_while_another_append_claims_the_free_lock(
    pg: Chain, hostile: psycopg.Connection[Any]
) -> None:
    # The lock is free, but a starved append claims it: a session calling append_record
    # alone must not take it ahead of the claimant (append_next refuses so too).
    pg.chain().append(CANARY, receipt())
    with psycopg.connect(pg.url) as claimant:
        _claim_for(pg, claimant)
        try:
            with pytest.raises(psycopg.errors.LockNotAvailable, match="claims"):
                hostile.execute(
                    "SELECT floorguard_api.append_record(1, 'x', 'x', 'x', 'x', '{}', 'x', 'x',"
                    " '{}', '{}', '{}')"
                )
        finally:
            pg.sql("SELECT setval('floorguard.lock_claim', 0)")
    assert _verified(pg) == 1


def test_append_record_goes_on_in_the_transaction_that_took_the_lock_despite_a_claim(
    pg: Chain,
) -> None:
    # The honest append: open_append took the lock; a claim made meanwhile does not refuse
    # its append_record (it holds the lock, and the claimant waits for it to let go).
    from helpers.hostile_appender import APPEND_RECORD, _key, columns
    from helpers.pg_chain import _next

    pg.chain().append(CANARY, receipt())
    with psycopg.connect(pg.url) as claimant, psycopg.connect(pg.url) as conn:
        record, nodes = _next(conn, _key(pg))  # (open_append: the lock, and the head)
        _claim_for(pg, claimant)
        try:
            conn.execute(APPEND_RECORD, (*record, *columns(nodes)))
            conn.commit()
        finally:
            pg.sql("SELECT setval('floorguard.lock_claim', 0)")
    assert _verified(pg) == 2
