"""Benchmarks of the audit chain's transparency log (run with ``-m perf -s``).

- Building the Merkle tree of an existing 200,000-record chain (one that predates the tree)
  against reading every record and hashing its export line once: target at most 3x.
- In a 1,000,000-record chain: an inclusion proof holds at most 20 hashes, is produced in
  under 10 ms and verified in under 1 ms (medians); likewise a consistency proof between
  sizes 500,000 and 1,000,000.

Records are written straight into the database (tests/helpers/grown_chain.py: linked, with
their MACs) so that a million of them take seconds, not the hours a million durable appends
take; the tree is then dropped and built again by the chain itself. Assertions allow for
noisy shared machines.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from pathlib import Path

import pytest
from helpers.bench_chain import read_and_hash_every_record
from helpers.grown_chain import grow_sqlite

from floorguard._chain.chain import AuditChain
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog

pytestmark = pytest.mark.perf

CANARY = "adapter.canary_receipt"


def _chain_of(folder: Path, count: int) -> AuditChain:
    """A chain of ``count`` linked records with their MACs and no tree, as the code before
    the tree left one: grown straight into the database, then its tree dropped."""
    chain = AuditChain(folder / "chain.sqlite3", folder / "chain.key")
    chain.append(CANARY, {"kind": CANARY, "schema_version": 1, "ts": "2026-01-01T00:00:00Z"})
    grow_sqlite(chain, count - 1)
    conn = sqlite3.connect(chain.db_path, isolation_level=None)
    conn.execute("DROP TABLE tree")
    conn.close()
    return AuditChain(chain.db_path, chain.key_file)


def test_bench_building_the_tree_of_a_200k_record_chain(tmp_path: Path) -> None:
    chain = _chain_of(tmp_path, 200_000)
    started = time.perf_counter()
    read_and_hash_every_record(chain.db_path)
    floor = time.perf_counter() - started
    started = time.perf_counter()
    assert chain.ensure_tree() == 200_000
    build = time.perf_counter() - started
    ratio = build / floor
    print(f"\ntree build, 200k records: {build:.2f} s; read and hash once {floor:.2f} s; "
          f"ratio {ratio:.2f}x (target <= 3x)")  # fmt: skip
    assert ratio < 6


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def test_bench_proofs_in_a_million_record_chain(tmp_path: Path) -> None:
    size = 1_000_000
    chain = _chain_of(tmp_path, size)
    started = time.perf_counter()
    chain.ensure_tree()
    print(f"\ntree build, 1M records: {time.perf_counter() - started:.1f} s")
    cp_new = _checkpoint(chain, size)
    cp_old = _checkpoint(chain, size // 2)
    made, checked, lengths = [], [], []
    for seq in range(0, size, size // 101):
        started = time.perf_counter()
        proof = tlog.prove_inclusion(chain, seq=seq, checkpoint=cp_new)
        made.append(time.perf_counter() - started)
        leaf = merkle.leaf_hash(proof.record.encode())
        started = time.perf_counter()
        merkle.verify_inclusion(seq, size, leaf, proof.hashes, cp_new.root)
        checked.append(time.perf_counter() - started)
        lengths.append(len(proof.hashes))
    print(f"inclusion in 1M: at most {max(lengths)} hashes, produced median "
          f"{_median_ms(made):.2f} ms, verified median {_median_ms(checked):.3f} ms "
          "(targets 20, 10 ms, 1 ms)")  # fmt: skip
    assert max(lengths) <= 20
    assert _median_ms(made) < 50 and _median_ms(checked) < 10
    made, checked = [], []
    for _ in range(21):
        started = time.perf_counter()
        proof_c = tlog.prove_consistency(chain, cp_old, cp_new)
        made.append(time.perf_counter() - started)
        started = time.perf_counter()
        merkle.verify_consistency(size // 2, size, cp_old.root, cp_new.root, proof_c.hashes)
        checked.append(time.perf_counter() - started)
    print(f"consistency 500k -> 1M: {len(proof_c.hashes)} hashes, produced median "
          f"{_median_ms(made):.2f} ms, verified median {_median_ms(checked):.3f} ms")  # fmt: skip
    assert len(proof_c.hashes) <= 40
    assert _median_ms(made) < 50 and _median_ms(checked) < 10


def _checkpoint(chain: AuditChain, size: int) -> checkpoint.Checkpoint:
    with chain.tree_snapshot() as snap:
        root = merkle.root(size, snap.subtree)
        first = snap.line(0)
    assert first is not None
    return checkpoint.new_checkpoint(json.loads(first)["chain_id"], size, root)
