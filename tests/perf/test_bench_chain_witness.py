"""Benchmarks of the host's witness check (run with ``-m perf``; excluded by default).

An append that checks the store's tree against what the host has seen and then grows the
view (``floorguard._chain.chain_view``) against the same append without a view, interleaved on
one store: SQLite, and PostgreSQL (where both are also set against a bare INSERT+COMMIT,
target at most 2x). With one appending host the remembered size is the head's, whose
left edge the head read brings; with another host appending in between, the remembered
tree is older and its left edge is looked up node by node (until the store prefetches it
from ``known_size``).

The figures are printed (``-s`` shows them); the assertions allow for noisy machines.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pgserver
import pytest
from helpers.bench_chain import _database, _receipt

from floorguard._chain.chain import AuditChain
from floorguard._chain.chain_view import ChainViews

pytestmark = pytest.mark.perf

server = pytest.fixture(scope="module")(pgserver.provide)
SPAWN = "adapter.spawn_preflight_receipt"


def _pair(chain: AuditChain, views: Path) -> tuple[AuditChain, AuditChain]:
    """The chain's store with and without a view (two objects, one store)."""
    watched = AuditChain(chain.store, chain.key_file, views=ChainViews(views))
    return watched, AuditChain(chain.store, chain.key_file)


def _interleaved(
    watched: AuditChain, bare: AuditChain, rounds: int, between: AuditChain | None = None
) -> tuple[float, float]:
    ours, without = [], []
    for n in range(rounds):
        if between is not None:
            between.append(SPAWN, _receipt(n))  # another host's record: the view lags by one
        started = time.perf_counter()
        watched.append(SPAWN, _receipt(n))
        ours.append(time.perf_counter() - started)
        if between is not None:
            between.append(SPAWN, _receipt(n))
        started = time.perf_counter()
        bare.append(SPAWN, _receipt(n))
        without.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(without)


def _report(what: str, ours: float, without: float) -> None:
    print(
        f"\n{what}: with the view {ours * 1e6:.0f} us, without {without * 1e6:.0f} us, "
        f"+{(ours - without) * 1e6:.0f} us ({ours / without:.2f}x)"
    )


def test_bench_sqlite_append_with_and_without_the_view(tmp_path: Path) -> None:
    chain = AuditChain(tmp_path / "chain.sqlite3", tmp_path / "chain.key")
    chain.append(SPAWN, _receipt(0))
    watched, bare = _pair(chain, tmp_path / "chain-view")
    ours, without = _interleaved(watched, bare, 400)
    _report("sqlite append", ours, without)
    assert ours < 3 * without


@pytest.mark.parametrize("lagging", [False, True], ids=["alone", "another host between"])
def test_bench_postgres_append_with_and_without_the_view(
    server: pgserver.PgServer, tmp_path: Path, lagging: bool
) -> None:
    env = _database(server, tmp_path)
    chain = AuditChain.from_env(env)
    chain.append(SPAWN, _receipt(0))
    watched, bare = _pair(chain, tmp_path / "host" / "chain-view")
    other = AuditChain.from_env(env) if lagging else None
    ours, without = _interleaved(watched, bare, 300, other)
    _report(f"postgres append ({'another host between' if lagging else 'alone'})", ours, without)
    assert ours < 3 * without
