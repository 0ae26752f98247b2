"""Slice verification against its floor, measured in fresh processes: this tree's floorguard
and, when ``FLOORGUARD_BENCH_BEFORE`` names a git revision, that revision's, taking turns.

Each process times the floor (read every line, one ``json.loads`` and one ``hmac.digest``
per line) and the verifier interleaved, so each ratio is of one process on one machine
state; the processes of the two trees alternate, so both see the same neighbours.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

GENERATED = Path(__file__).resolve().parents[2] / "generated"
BEFORE_ENV = "FLOORGUARD_BENCH_BEFORE"

_WORKER = """
import hmac, json, sys, time
from datetime import UTC, datetime
from pathlib import Path

path, what, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
key = bytes(range(32))
mode = what.removeprefix("peak-")
if mode == "window":
    from floorguard._proofs.window_report import prove_path

    since = datetime(2026, 11, 30, tzinfo=UTC)
    until = since.replace(year=2027)

    def ours():
        prove_path(path, key=key, since=since, until=until)
else:
    from floorguard._proofs.slice_verify import verify_path

    def ours():
        assert verify_path(path, key=key).intact

def floor():
    with path.open("rb") as stream:
        for line in stream:
            json.loads(line)
            hmac.digest(key, line, "sha256")

if what.startswith("peak-"):
    (floor if mode == "floor" else ours)()
    status = Path("/proc/self/status").read_text().splitlines()
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
    sys.exit(0)
times = {"floor": [], "ours": []}
for _ in range(rounds):
    for name, run in (("floor", floor), ("ours", ours)):
        started = time.perf_counter()
        run()
        times[name].append(time.perf_counter() - started)
print(json.dumps(times))
"""


@dataclass(frozen=True)
class Ratios:
    """Per tree ("after", and "before" when measured): each process's ratio of medians."""

    by_tree: dict[str, list[float]]
    ours_s: dict[str, list[float]]

    def line(self, tree: str) -> str:
        ratios = self.by_tree[tree]
        seconds = statistics.median(self.ours_s[tree])
        return (
            f"{tree}: ratio median {statistics.median(ratios):.2f}x "
            f"(spread {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} processes), "
            f"{seconds:.2f} s"
        )


def before_tree(scratch: Path) -> Path | None:
    """The ``generated`` folder of the revision ``FLOORGUARD_BENCH_BEFORE`` names, extracted
    into ``scratch``; None when it is not set."""
    revision = os.environ.get(BEFORE_ENV)
    if not revision:
        return None
    target = scratch / "before"
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(GENERATED.parent), "archive", revision, "generated/floorguard"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "generated"


def _run(tree: Path, slice_file: Path, what: str, rounds: int) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, str(slice_file), what, str(rounds)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=True,
    )
    return done.stdout.strip()


def compare(
    slice_file: Path, what: str, before: Path | None, *, processes: int = 3, rounds: int = 3
) -> Ratios:
    """``what`` ("verify" or "window") against the floor, in ``processes`` fresh processes
    per tree, alternating trees; each process takes ``rounds`` turns."""
    trees = {"after": GENERATED, **({"before": before} if before is not None else {})}
    by_tree: dict[str, list[float]] = {name: [] for name in trees}
    ours_s: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(processes):
        for name, tree in trees.items():
            times = json.loads(_run(tree, slice_file, what, rounds))
            ours, floor = statistics.median(times["ours"]), statistics.median(times["floor"])
            by_tree[name].append(ours / floor)
            ours_s[name].append(ours)
    return Ratios(by_tree, ours_s)


def peak_kib(slice_file: Path, what: str) -> int:
    """The peak resident memory (VmHWM, KiB) of a fresh process running ``what``
    ("peak-verify", "peak-window", "peak-floor") over the slice with this tree's
    floorguard."""
    return int(_run(GENERATED, slice_file, what, 1))
