"""How the PostgreSQL chain's costs grow with it (run with ``-m perf -s``).

A fleet's chain reaches millions of records in weeks. One PostgreSQL chain grows through
three sizes (FLOORGUARD_BENCH_SIZES, default 100,000, 300,000 and 1,000,000 records, copied
in by its owner: tests/helpers/grown_chain.py, then vacuumed and checkpointed, as the
server would soon do itself), and at each size this measures:

- A host's durable append against a bare psycopg INSERT of the same row with its COMMIT
  into a table of as many rows, in turns (target at most 2x, and flat in n).
- One inclusion proof against a checkpoint, in process (the thread's CPU time), against
  hashing log2 n nodes in Python.
- ``chain checkpoint`` in process with 1,000 records appended since the last one:
  incremental, from the last checkpoint (target flat in n).

Every figure is a median of its own run; nothing is asserted about time.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pgserver
import pytest
from helpers.bench import hash_log2
from helpers.bench_chain import SPAWN, _receipt, database_and_owner
from helpers.grown_chain import grow_postgres

from floorguard._chain.chain import AuditChain
from floorguard._chain.chain_key import load_key
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog

pytestmark = pytest.mark.perf

server = pytest.fixture(scope="module")(pgserver.provide)

SIZES = tuple(
    int(size)
    for size in os.environ.get("FLOORGUARD_BENCH_SIZES", "100000,300000,1000000").split(",")
)
APPENDS = 300
PROOFS = 200
NEW = 1_000
ROUNDS = 3
# The bare rows' seqs, clear of the chain's (copied into the bare table too).
BARE_SEQ = 10**12


def _appends(chain: AuditChain, bare: object, row: tuple[object, ...], first: int) -> None:
    import psycopg

    assert isinstance(bare, psycopg.Connection)
    ours, floor = [], []
    for n in range(APPENDS):  # in turns: both see the same server and the same load
        started = time.perf_counter()
        chain.append(SPAWN, _receipt(n))
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        bare.execute("INSERT INTO bare VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", (first + n, *row))
        bare.commit()
        floor.append(time.perf_counter() - started)
    mine, theirs = statistics.median(ours), statistics.median(floor)
    print(
        f"  append: median {mine * 1e6:.0f} us, bare INSERT+COMMIT {theirs * 1e6:.0f} us, "
        f"ratio {mine / theirs:.2f}x (target <= 2x)"
    )


def _proofs(chain: AuditChain, size: int, cp: checkpoint.Checkpoint) -> None:
    cpu: dict[str, list[float]] = {"baseline": [], "proof": []}
    baseline = hash_log2(size)
    for n in range(PROOFS):
        seq = (n * 7_919 + 13) % size
        runs: dict[str, Callable[[], object]] = {
            "baseline": baseline,
            "proof": lambda: tlog.prove_inclusion(chain, seq=seq, checkpoint=cp),  # noqa: B023
        }
        for name, run in runs.items():
            used = time.thread_time()
            run()
            cpu[name].append(time.thread_time() - used)
    base, proof = (statistics.median(cpu[name]) for name in ("baseline", "proof"))
    print(
        f"  inclusion proof (CPU): {proof * 1000:.3f} ms, baseline (hashing "
        f"{size.bit_length()} nodes) {base * 1000:.4f} ms: {proof / base:.1f}x"
    )


def _checkpoints(
    chain: AuditChain, owner_url: str, key: bytes, previous: checkpoint.Checkpoint
) -> checkpoint.Checkpoint:
    times = []
    for _ in range(ROUNDS):
        grow_postgres(owner_url, key, NEW)
        started = time.perf_counter()
        made = checkpoint.of_chain(chain, previous=previous)
        times.append(time.perf_counter() - started)
        previous = made
    print(
        f"  checkpoint with {NEW:,} new records: incremental {statistics.median(times):.3f} s "
        f"({min(times):.3f}-{max(times):.3f})"
    )
    return previous


def test_bench_postgres_costs_as_the_chain_grows(server: pgserver.PgServer, tmp_path: Path) -> None:
    import psycopg

    env, owner_url = database_and_owner(server, tmp_path)
    key = load_key(Path(env["FLOORGUARD_CHAIN_KEY_FILE"]))
    chain = AuditChain.from_env(env)
    chain.append(SPAWN, _receipt(0))
    head = chain.head()
    assert head is not None
    row = (head.ts, head.chain_id, head.event, head.receipt_id, next(chain.export_lines()),
           head.prev, head.mac)  # fmt: skip
    bare = psycopg.connect(env["FLOORGUARD_CHAIN_URL"])  # a transaction per INSERT
    print()
    for size in SIZES:
        held = chain.head().seq + 1  # type: ignore[union-attr]
        started = time.perf_counter()
        grow_postgres(owner_url, key, size - held)
        with psycopg.connect(owner_url, autocommit=True) as owner:
            # The bare table holds as many rows as the chain: an insert into as large an index.
            owner.execute(
                "INSERT INTO bare SELECT * FROM floorguard.records WHERE seq >="
                " (SELECT coalesce(max(seq) + 1, 0) FROM bare WHERE seq < %s)",
                (BARE_SEQ,),
            )
            # What autovacuum and the server's checkpointer would do after such a load, done
            # now: else they run during the appends measured next.
            owner.execute("VACUUM (ANALYZE) floorguard.records, floorguard.tree, bare")
        server.psql("CHECKPOINT")
        print(f"{size:,} records (grown in {time.perf_counter() - started:.0f} s):")
        _appends(chain, bare, row, BARE_SEQ + size)
        with chain.tree_snapshot() as snap:
            cp = checkpoint.new_checkpoint(
                snap.chain_id() or "", snap.size, merkle.root(snap.size, snap.subtree)
            )
        _proofs(chain, cp.size, cp)
        _checkpoints(chain, owner_url, key, cp)
    bare.close()
    assert chain.head().seq + 1 >= SIZES[-1]  # type: ignore[union-attr]
