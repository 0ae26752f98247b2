"""What the benchmarks compare against, written once: the bare floor of each kind of work."""

from __future__ import annotations

import hmac
import json
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path


def read_parse_and_mac(slice_file: Path, key: bytes) -> None:
    """The least any slice verifier must do: read each line, parse it, MAC it once."""
    with slice_file.open("rb") as stream:
        for line in stream:
            json.loads(line)
            hmac.digest(key, line, "sha256")


def interleaved_medians(runs: dict[str, Callable[[], object]], rounds: int = 3) -> dict[str, float]:
    """Median seconds of each run, taking turns so that all see the same machine load."""
    timings: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - started)
    return {name: statistics.median(samples) for name, samples in timings.items()}


class BareDurableTable:
    """One SQLite table with the chain's PRAGMAs (WAL, synchronous=FULL): the floor of a
    durable append is one ``BEGIN IMMEDIATE; INSERT; COMMIT`` of a row of the same size."""

    def __init__(self, path: Path) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, line TEXT NOT NULL)")

    def timed_insert(self, line: str) -> float:
        started = time.perf_counter()
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.execute("INSERT INTO t (line) VALUES (?)", (line,))
        self._conn.execute("COMMIT")
        return time.perf_counter() - started

    def close(self) -> None:
        self._conn.close()


def hash_log2(size: int) -> Callable[[], object]:
    """The least an inclusion proof in a tree of ``size`` leaves must do: hash log2 n nodes
    in Python (the proof's own check of its path does as much)."""
    from floorguard._crypto import merkle

    left, right = b"\x01" * 32, b"\x02" * 32
    depth = size.bit_length()

    def run() -> object:
        result = left
        for _ in range(depth):
            result = merkle.node_hash(result, right)
        return result

    return run
