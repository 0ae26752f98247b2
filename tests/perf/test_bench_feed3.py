"""Benchmark: schema 3 feeds, checked and refreshed, against the floor of the work.

The floor is ``json.loads`` plus jsonschema validation of the whole document. Targets:
``parse_feed`` (fast path: jsonschema skipped on provably clean entries) at most the floor;
refresh end to end (check, merge, diff, render and the ast read-back) at most 3x the floor.
As whole processes (issue 25): ``floorctl refresh --write`` of a 30,000-adapter feed
(15.7 MB) at most the time of a process that only loads and validates it, and a peak
memory (maximum resident set size) under 200 MiB; runs interleaved, medians compared.
Run: python -m pytest -m perf tests/perf/test_bench_feed3.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.cli import isolated_env
from helpers.process_bench import FLOORCTL, Run, median, run, user_env

from floorctl import feeds, refresh

pytestmark = pytest.mark.perf

MODULE = '"""Benchmark host."""\n\n# floor-map:begin\n# floor-map:end\n'


def advisory(i: int, j: int) -> dict[str, Any]:
    return {
        "id": f"GHSA-{i:04x}-{j:04x}-abcd",
        "aliases": [f"CVE-2025-{i * 100 + j}"],
        "summary": f"Advisory {j} of adapter {i}: commands run without asking.",
        "affected": [
            {"introduced": "0", "fixed": f"1.{j}.7"},
            {"introduced": f"2.{j}.0", "last_affected": f"2.{j}.9-rc.1"},
        ],
        "versions": [f"3.{j}.0"],
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"}],
        "references": [f"https://github.com/advisories/GHSA-{i:04x}-{j:04x}-abcd"],
    }


def make_feed(adapters: int, per_adapter: int) -> bytes:
    document = {
        "schema_version": 3,
        "adapters": {
            f"adapter-{i:05d}": {
                "ecosystem": "npm",
                "min_safe_version": "1.0.0",
                "advisory_id": "BSA-0001",
                "note": "Upgrade.",
                "advisories": [advisory(i, j) for j in range(per_adapter)],
            }
            for i in range(adapters)
        },
    }
    return json.dumps(document, separators=(",", ":")).encode()


def seconds(work: Any) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def test_schema_3_feed_against_the_floor(tmp_path: Path) -> None:
    data = make_feed(1000, 10)
    schema = json.loads((resources.files("floorctl._schemas") / "feed.v3.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    floor = seconds(lambda: validator.validate(json.loads(data)))
    parse = seconds(lambda: feeds.parse_feed(data, "feed.json"))
    module = tmp_path / "floor_map.py"
    module.write_text(MODULE)

    def whole_refresh() -> None:
        loaded = feeds.parse_feed(data, "feed.json")
        plan = refresh.plan([loaded], module, module.read_text(), "floorguard")
        module.write_text(plan.new_text)

    first = seconds(whole_refresh)
    # Again, now against the map it wrote: the diff compares 10,000 advisories.
    again = seconds(whole_refresh)
    print(f"\nfeed: {len(data):,} bytes, 1,000 adapters x 10 advisories")
    print(f"floor (json.loads + jsonschema): {floor:.2f} s")
    print(f"parse_feed:                      {parse:.2f} s ({parse / floor:.2f}x, target <= 1x)")
    print(f"refresh from empty:              {first:.2f} s ({first / floor:.2f}x, target <= 3x)")
    print(f"refresh against itself:          {again:.2f} s ({again / floor:.2f}x)")
    assert parse <= floor
    assert first <= 3 * floor


ROUNDS = 5
MIB = 1024 * 1024
# Written by a child process: a process's peak memory counts the pages of the parent it
# was forked from until it execs, so the test process must not hold the feed itself.
GENERATE = """
import os, sys
sys.path[:0] = [sys.argv[3], os.path.dirname(sys.argv[3])]
from test_bench_feed3 import make_feed
with open(sys.argv[1], "wb") as out:
    out.write(make_feed(int(sys.argv[2]), 1))
"""
# The floor as a process: read the feed, decode it, validate it against the schema.
FLOOR = """
import json, sys
from importlib import resources
import jsonschema
schema = json.loads((resources.files("floorctl._schemas") / "feed.v3.schema.json").read_text())
with open(sys.argv[1], "rb") as feed:
    jsonschema.Draft202012Validator(schema).validate(json.load(feed))
"""


def test_refresh_of_a_30000_adapter_feed_against_loading_and_validating_it(
    tmp_path: Path,
) -> None:
    env = user_env(isolated_env(tmp_path / "state"))
    feed = tmp_path / "feed.json"
    here = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", GENERATE, str(feed), "30000", here], check=True)
    module = tmp_path / "floor_map.py"
    argv = [FLOORCTL, "refresh", "--feed", "feed.json", "--module", "floor_map.py", "--write"]

    def refresh_write() -> Run:
        module.write_text(MODULE)
        measured = run([*argv, "--receipt-out", "receipt.dsse"], cwd=tmp_path, env=env)
        assert module.read_text().count('\n    "adapter-') == 30_000
        return measured

    refresh_write()  # warm: bytecode written, the development key made
    floors: list[Run] = []
    refreshes: list[Run] = []
    for _ in range(ROUNDS):
        floors.append(run([sys.executable, "-c", FLOOR, str(feed)], cwd=tmp_path, env=env))
        refreshes.append(refresh_write())
    peak = max(r.max_rss for r in refreshes)
    cpu = [r.cpu / f.cpu for r, f in zip(refreshes, floors, strict=True)]
    print(
        f"\nfeed: {feed.stat().st_size:,} bytes, 30,000 adapters x 1 advisory;"
        f" {ROUNDS} interleaved runs each, medians"
        f"\nfloor (json.load + jsonschema): {median(floors, 'wall'):.2f} s wall,"
        f" {median(floors, 'cpu'):.2f} s CPU, peak {max(r.max_rss for r in floors) / MIB:.0f} MiB"
        f"\nrefresh --write:                {median(refreshes, 'wall'):.2f} s wall,"
        f" {median(refreshes, 'cpu'):.2f} s CPU, peak {peak / MIB:.0f} MiB"
        f" (runs {', '.join(f'{r.max_rss / MIB:.0f}' for r in refreshes)})"
        f"\nratio {median(refreshes, 'cpu') / median(floors, 'cpu'):.2f}x CPU"
        f" (per round {min(cpu):.2f}-{max(cpu):.2f}x),"
        f" {median(refreshes, 'wall') / median(floors, 'wall'):.2f}x wall (target <= 1x);"
        f" peak {peak / MIB:.0f} MiB (target < 200 MiB); load average {os.getloadavg()[0]:.1f}"
    )
    assert peak < 200 * MIB
