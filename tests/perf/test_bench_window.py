"""Benchmark of the window proof (run with ``-m perf``; excluded from the default run).

- Verifying a 200,000-record slice with the window proof on (mostly spawn permits, each
  re-evaluated against the floor map it pins) against the bare floor of reading its lines,
  one ``json.loads`` and one ``hmac.digest`` per line: target at most 2.5x.
- Memory: the verifier streams, so its peak memory (ru_maxrss of a fresh process) stays
  flat as the slice grows tenfold, 20,000 to 200,000 records.

The numbers are printed (``-s`` shows them); the assertions allow for noisy shared machines
and catch only regressions well past the targets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.bench import interleaved_medians, read_parse_and_mac
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
    for count in (20_000, 200_000):
        path = folder / f"slice-{count}.jsonl"
        write_slice(path, count, KEY, _receipt)
        made[count] = path
    return made


def test_bench_window_proof_200k_records_against_the_bare_floor(slices: dict[int, Path]) -> None:
    count = 200_000
    slice_file = slices[count]
    since = START
    until = START.replace(year=2027)

    def ours() -> None:
        report = prove_path(slice_file, key=KEY, since=since, until=until)
        # The open end is not covered (nothing after T2): integrity and decisions are clean.
        assert not report.violations and report.evaluated == count - 1
        assert len(report.integrity_errors) == 1

    medians = interleaved_medians(
        {"floor": lambda: read_parse_and_mac(slice_file, KEY), "ours": ours}
    )
    floor_s, ours_s = medians["floor"], medians["ours"]
    ratio = ours_s / floor_s
    print(
        f"\nwindow proof over {count} records: {ours_s:.2f} s "
        f"({ours_s / count * 1e6:.1f} us/record), bare floor {floor_s:.2f} s, "
        f"ratio {ratio:.2f}x (target <= 2.5x)"
    )
    assert ratio < 4


_MEASURE = """
import resource, sys
from pathlib import Path
from floorguard._proofs.window_report import prove_path
report = prove_path(Path(sys.argv[1]), key=bytes(range(32)))
assert not report.violations, report.violations[:3]
# ru_maxrss survives exec on Linux (it would report the forking parent's peak); VmHWM
# belongs to this process's own address space.
status = Path("/proc/self/status")
if status.exists():
    print(next(l.split()[1] for l in status.read_text().splitlines() if l.startswith("VmHWM:")))
else:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(path: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return int(done.stdout.strip())


def test_bench_window_proof_memory_is_flat_as_the_slice_grows_tenfold(
    slices: dict[int, Path],
) -> None:
    small, large = _peak_kib(slices[20_000]), _peak_kib(slices[200_000])
    print(
        f"\npeak RSS: 20,000 records {small / 1024:.1f} MiB, 200,000 records "
        f"{large / 1024:.1f} MiB ({format_ts(START)} onwards)"
    )
    assert large - small < 16 * 1024
