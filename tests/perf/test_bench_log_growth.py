"""How the transparency log's costs grow with the chain (run with ``-m perf -s``).

One SQLite chain grows through three sizes (FLOORGUARD_BENCH_SIZES, default 100,000,
300,000 and 1,000,000 records, written straight into the store: tests/helpers/grown_chain.py).
At each size, in interleaved rounds:

- ``chain checkpoint`` with 1,000 records appended since the last one: incremental (from the
  last checkpoint signed) against verifying from genesis (what every checkpoint did before)
  and against the baseline, reading every record and hashing it once. Target: incremental
  under 1 s at 1M, flat in n. At the largest size the real command is timed too.
- Making one inclusion proof against a checkpoint, in process: now (one snapshot, one query
  for the nodes, the root once) against the way before (a connection to check the tree, one
  to read it, a query a node, the root twice; reproduced here with plain sqlite3) and
  against the baseline, hashing log2 n nodes in Python. Target: under 10x the baseline.
  Wall-clock and the thread's CPU time are both printed: on a loaded machine the wall clock
  of a sub-millisecond call is mostly waiting for the CPU.

FLOORGUARD_BENCH_PARTS (default ``proofs,checkpoints,command``) picks what is measured,
FLOORGUARD_BENCH_ROUNDS the checkpoint rounds (3).

Every figure is a median; the ratios are of medians measured in the same run. Nothing is
asserted about time.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from helpers.bench import hash_log2
from helpers.bench_chain import read_and_hash_every_record
from helpers.cli import isolated_env
from helpers.grown_chain import CANARY, grow_sqlite

from floorguard._chain.chain import AuditChain, line_text
from floorguard._crypto import merkle
from floorguard._proofs import checkpoint, tlog

pytestmark = pytest.mark.perf

SIZES = tuple(
    int(size)
    for size in os.environ.get("FLOORGUARD_BENCH_SIZES", "100000,300000,1000000").split(",")
)
NEW = 1_000
ROUNDS = int(os.environ.get("FLOORGUARD_BENCH_ROUNDS", "3"))
PROOFS = 400


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _spread(samples: list[float]) -> str:
    return f"{min(samples) * 1000:.3g}-{max(samples) * 1000:.3g} ms"


def _proof_before(db: Path, seq: int, cp: checkpoint.Checkpoint) -> list[bytes]:
    """An inclusion proof as it was made before: a connection to see whether the tree lags
    the records, another to read it, a query for each node, the root computed from the
    stored tree against the checkpoint and again to check the proof."""

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        conn.execute("BEGIN")
        conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return conn

    def sizes(conn: sqlite3.Connection) -> tuple[int, int]:
        records = conn.execute("SELECT max(seq) FROM records").fetchone()[0] + 1
        return records, conn.execute("SELECT max(idx) FROM tree WHERE level = 0").fetchone()[0] + 1

    first = connect()
    sizes(first)
    first.close()
    conn = connect()
    try:
        sizes(conn)

        def subtree(level: int, index: int) -> bytes:
            row = conn.execute(
                "SELECT hash FROM tree WHERE level = ? AND idx = ?", (level, index)
            ).fetchone()
            return bytes(row[0])

        def line(at: int) -> str:
            row = conn.execute("SELECT * FROM records WHERE seq = ?", (at,)).fetchone()
            names = ("seq", "ts", "chain_id", "event", "receipt_id", "receipt_json", "prev", "mac")
            return line_text(**dict(zip(names, row, strict=True)))

        json.loads(line(0))
        assert merkle.root(cp.size, subtree) == cp.root
        text = line(seq)
        leaf = merkle.leaf_hash(text.encode())
        assert subtree(0, seq) == leaf
        hashes = merkle.inclusion_proof(seq, cp.size, subtree)
        merkle.verify_inclusion(seq, cp.size, leaf, hashes, merkle.root(cp.size, subtree))
        return hashes
    finally:
        conn.close()


def _proofs(chain: AuditChain, size: int, cp: checkpoint.Checkpoint) -> None:
    timings: dict[str, list[float]] = {"baseline": [], "before": [], "now": []}
    cpu: dict[str, list[float]] = {name: [] for name in timings}
    baseline = hash_log2(size)

    def proofs_of(offset: int, way: str) -> Callable[[int], Callable[[], object]]:
        if way == "now":
            return lambda n: (
                lambda: tlog.prove_inclusion(chain, seq=(n * 7_919 + offset) % size, checkpoint=cp)
            )
        return lambda n: lambda: _proof_before(chain.db_path, (n * 7_919 + offset) % size, cp)

    # Each way against the baseline in turns, on records no proof has read yet: the way
    # before opens two connections a proof, and run in turns with it a proof of now's
    # would pay for the memory and caches it churns (about 25 us at 1M).
    for way, offset in (("now", 13), ("before", 17)):
        proof = proofs_of(offset, way)
        for n in range(PROOFS):
            runs: dict[str, Callable[[], object]] = {"baseline": baseline, way: proof(n)}
            for name, run in runs.items() if n % 2 else reversed(runs.items()):
                used = time.thread_time()
                started = time.perf_counter()
                run()
                timings[name].append(time.perf_counter() - started)
                cpu[name].append(time.thread_time() - used)
    # The same records again, now and the baseline in turns: the pages each proof reads
    # were read before (SQLite keeps the pages every proof reads, the OS the rest).
    warm: dict[str, list[float]] = {"baseline": [], "now": []}
    proof = proofs_of(13, "now")
    for n in range(PROOFS):
        again = {"baseline": baseline, "now": proof(n)}
        for name, run in again.items() if n % 2 else reversed(again.items()):
            used = time.thread_time()
            run()
            warm[name].append(time.thread_time() - used)
    # the same proof either way
    assert _proof_before(chain.db_path, 7, cp) == list(
        tlog.prove_inclusion(chain, seq=7, checkpoint=cp).hashes
    )
    base, before, now = (_median(timings[name]) for name in ("baseline", "before", "now"))
    print(
        f"  inclusion proof, {size:,} records: now {now * 1000:.3f} ms, before "
        f"{before * 1000:.3f} ms, baseline (hashing {size.bit_length()} nodes) "
        f"{base * 1000:.4f} ms: now {now / base:.1f}x the baseline (before "
        f"{before / base:.1f}x; target < 10x); now {before / now:.1f}x faster"
    )
    base, before, now = (_median(cpu[name]) for name in ("baseline", "before", "now"))
    print(
        f"    in CPU time (the thread's): now {now * 1000:.3f} ms, before {before * 1000:.3f} "
        f"ms, baseline {base * 1000:.4f} ms: now {now / base:.1f}x (before {before / base:.1f}x)"
    )
    base, now = _median(warm["baseline"]), _median(warm["now"])
    print(
        f"    the same records again (CPU): now {now * 1000:.3f} ms, "
        f"baseline {base * 1000:.4f} ms: {now / base:.1f}x"
    )


def _checkpoints(chain: AuditChain, size: int, previous: checkpoint.Checkpoint) -> None:
    """Rounds of 1,000 new records and an incremental checkpoint; verifying from genesis and
    the baseline read once, in the middle round (each is minutes at 1M on a loaded machine)."""
    timings: dict[str, list[float]] = {"incremental": [], "from genesis": [], "read": []}
    for round_ in range(ROUNDS):
        grow_sqlite(chain, NEW)
        started = time.perf_counter()
        made = checkpoint.of_chain(chain, previous=previous)
        timings["incremental"].append(time.perf_counter() - started)
        if round_ == ROUNDS // 2:
            started = time.perf_counter()
            full = checkpoint.of_chain(chain)
            timings["from genesis"].append(time.perf_counter() - started)
            assert (full.size, full.root) == (made.size, made.root)
            started = time.perf_counter()
            read_and_hash_every_record(chain.db_path)
            timings["read"].append(time.perf_counter() - started)
        previous = made
    incremental, full_, read = (_median(v) for v in timings.values())
    print(
        f"  checkpoint, {size:,} records + {NEW:,} new: incremental {incremental:.3f} s "
        f"({_spread(timings['incremental'])}), from genesis {full_:.2f} s, reading the chain "
        f"{read:.2f} s: incremental {incremental / read:.3f}x the read, {full_ / incremental:.0f}x "
        f"faster than from genesis (which is {full_ / read:.1f}x the read)"
    )


def _command(home: Path, rounds: int) -> None:
    """The real `floorctl chain checkpoint` at the chain's size, with 1,000 new records
    each time since the last checkpoint it signed (the first one is put in its place, signed
    with its key over the stored root: verifying a million records from genesis is what the
    in-process figures above already measured)."""
    env = isolated_env(home.parent / "ctl", FLOORGUARD_HOME=str(home))
    # As installed: the first run compiles the modules once, the others read the bytecode.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(home.parent / "pycache")
    folder = home.parent / "keys"
    subprocess.run([sys.executable, "-m", "floorctl", "keygen", "--out", str(folder)], env=env,
                   check=True, capture_output=True)  # fmt: skip
    key = load_pem_private_key((folder / "signing.key").read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    chain = AuditChain(home / "chain.sqlite3", home / "chain.key")
    with chain.tree_snapshot() as snap:
        chain_id = snap.chain_id()
        assert chain_id is not None
        head = checkpoint.new_checkpoint(chain_id, snap.size, merkle.root(snap.size, snap.subtree))
    kept = checkpoint.memory_path(home, chain_id, checkpoint.raw_public(key.public_key()))
    checkpoint.remember(kept, checkpoint.sign(head, key))
    argv = [sys.executable, "-m", "floorctl", "chain", "checkpoint", "--signing-key",
            str(folder / "signing.key"), "--out", str(home.parent / "head.cp")]  # fmt: skip
    times, cpu = [], []
    for n in range(rounds + 1):  # (the first, untimed, compiles the modules)
        grow_sqlite(chain, NEW)
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
        assert done.returncode == 0, done.stderr
        assert "from genesis" not in done.stderr, done.stderr
        if n == 0:
            times.clear()
            cpu.clear()
    print(
        f"  `floorctl chain checkpoint`, whole process, {chain.head().seq + 1:,} records with "  # type: ignore[union-attr]
        f"{NEW:,} new: median {_median(times):.3f} s ({_spread(times)}), CPU time "
        f"{_median(cpu):.3f} s (the wall time waits for the CPU on a loaded machine)"
    )


def test_bench_checkpoints_and_proofs_as_the_chain_grows(tmp_path: Path) -> None:
    home = tmp_path / "home"
    chain = AuditChain(home / "chain.sqlite3", home / "chain.key")
    chain.append(CANARY, {"kind": CANARY, "schema_version": 1, "ts": "2026-01-01T00:00:00Z"})
    parts = os.environ.get("FLOORGUARD_BENCH_PARTS", "proofs,checkpoints,command").split(",")
    print()
    held = 1
    for size in SIZES:
        started = time.perf_counter()
        grow_sqlite(chain, size - held)
        held = size
        print(f"{size:,} records (written in {time.perf_counter() - started:.0f} s):")
        with chain.tree_snapshot() as snap:
            root = merkle.root(size, snap.subtree)
            chain_id = snap.chain_id()
        assert chain_id is not None
        cp = checkpoint.new_checkpoint(chain_id, size, root)
        if "proofs" in parts:
            _proofs(chain, size, cp)
        if "checkpoints" in parts:
            # (the chain is honest: its stored root stands for the checkpoint last signed)
            _checkpoints(chain, size, cp)
            held += NEW * ROUNDS
    if "command" in parts:
        _command(home, ROUNDS)
