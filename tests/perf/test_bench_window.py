"""Benchmark of the window proof (run with ``-m perf``; excluded from the default run).

- Verifying a 200,000-record slice with the window proof on (mostly spawn permits, each
  re-evaluated against the floor map it pins) against the bare floor of reading its lines,
  one ``json.loads`` and one ``hmac.digest`` per line: target under 2x. Fresh processes
  take turns; with ``FLOORGUARD_BENCH_BEFORE=<git revision>`` that revision's proof takes
  turns with this tree's, each against the floor in its own process (before and after).
- Memory: the verifier streams, so its peak memory (VmHWM of a fresh process) stays
  flat as the slice grows tenfold: 20,000, 60,000 and 200,000 records.

The numbers are printed (``-s`` shows them); the assertions allow for noisy shared machines
and catch only regressions well past the targets.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from helpers.bench_verify import before_tree, compare, peak_kib
from helpers.proof_support import MAP_V1, update_receipt
from helpers.slice_writer import START, write_slice

from floorguard._base._time import format_ts
from floorguard._maps.map_model import entries_hash
from floorguard._proofs.window_report import prove_path

pytestmark = pytest.mark.perf

SPAWN = "adapter.spawn_preflight_receipt"
MAP_HASH = entries_hash(MAP_V1)
KEY = bytes(range(32))


def _receipt(n: int) -> dict[str, Any]:
    if n == 0:
        return update_receipt(MAP_V1)
    permit = n % 10 != 0
    return {
        "kind": SPAWN,
        "schema_version": 1,
        "ts": "2026-11-30T03:05:18.123456Z",
        "adapter": "aider",
        "binary": "/usr/local/bin/aider",
        "version": f"0.{60 + n % 7}.{n % 50}" if permit else f"0.59.{n % 100}",
        "detected_by": "--version",
        "floor": "0.60.0",
        "advisory_id": "BSA-0001",
        "verdict": "permit" if permit else "refuse",
        "reason": "aider meets its floor 0.60.0" if permit else "aider is below its floor",
        "policy": "block",
        "floor_map_hash": MAP_HASH,
        "n": n,
    }


@pytest.fixture(scope="module")
def slices(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("slices")
    made = {}
    for count in (20_000, 60_000, 200_000):
        path = folder / f"slice-{count}.jsonl"
        write_slice(path, count, KEY, _receipt)
        made[count] = path
    return made


def test_bench_window_proof_200k_records_against_the_bare_floor(
    slices: dict[int, Path], tmp_path: Path
) -> None:
    count = 200_000
    slice_file = slices[count]
    # The verdict itself, once in this process: the open end is not covered (nothing after
    # T2), integrity and decisions are clean.
    report = prove_path(slice_file, key=KEY, since=START, until=START.replace(year=2027))
    assert not report.violations and report.evaluated == count - 1
    assert len(report.integrity_errors) == 1
    measured = compare(slice_file, "window", before_tree(tmp_path))
    print(f"\nwindow proof over {count} records against read + json.loads + hmac (target < 2x):")
    for tree in sorted(measured.by_tree):
        print("  " + measured.line(tree))
    assert statistics.median(measured.by_tree["after"]) < 4


def test_bench_window_proof_memory_is_flat_as_the_slice_grows_tenfold(
    slices: dict[int, Path],
) -> None:
    peaks = {count: peak_kib(path, "peak-window") for count, path in slices.items()}
    print(
        "\nwindow proof, peak RSS (VmHWM) of a fresh process: "
        + ", ".join(f"{count:,} records {kib / 1024:.1f} MiB" for count, kib in peaks.items())
        + f" ({format_ts(START)} onwards)"
    )
    assert peaks[200_000] - peaks[20_000] < 16 * 1024
