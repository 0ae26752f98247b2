"""Benchmark: schema 3 feeds, checked and refreshed, against the floor of the work.

The floor is ``json.loads`` plus jsonschema validation of the whole document. Targets:
``parse_feed`` (fast path: jsonschema skipped on provably clean entries) at most the floor;
refresh end to end (check, merge, diff, render and the ast read-back) at most 3x the floor.
Run: python -m pytest -m perf tests/perf/test_bench_feed3.py -s
"""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

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
