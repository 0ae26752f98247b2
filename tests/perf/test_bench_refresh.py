"""Benchmark: refresh end to end against the floor of the work, measured in the same run.

The floor is what any tool must do with a feed: ``json.load`` plus jsonschema validation of
the whole document. Targets: refresh at most 3x that floor on 10,000 adapters, and the
100,000-adapter run at most about 10x the 10,000 one (linear). These are in-process figures;
issue 11's targets for the command (whole processes, peak memory) are measured in
test_bench_refresh_scale.py.
Run: python -m pytest -m perf tests/perf/test_bench_refresh.py -s
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from floorctl import feeds, refresh

pytestmark = pytest.mark.perf

MODULE = '"""Benchmark host."""\n\n# floor-map:begin\n# floor-map:end\n'


def make_feed(path: Path, adapters: int) -> Path:
    entries = {
        f"adapter-{i:06d}": {
            "min_safe_version": f"{i % 7}.{i % 13}.{i % 17}",
            "advisory_id": f"BSA-{i:06d}",
            "note": f"Example advisory {i}: below the floor is unsafe.",
        }
        for i in range(adapters)
    }
    path.write_text(json.dumps({"schema_version": 1, "adapters": entries}, separators=(",", ":")))
    return path


def median_seconds(work: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def floor_of_the_work(feed: Path) -> None:
    schema = json.loads((resources.files("floorctl._schemas") / "feed.v1.schema.json").read_text())
    with feed.open() as handle:
        document = json.load(handle)
    jsonschema.Draft202012Validator(schema).validate(document)


def full_refresh(feed: Path, module: Path, key: Ed25519PrivateKey) -> None:
    module.write_text(MODULE)
    loaded = feeds.load_feed(feed)
    plan = refresh.plan([loaded], module, module.read_text(), "floorguard")
    refresh.apply(
        plan, receipt_out=module.with_suffix(".receipt.json"), signing_key=lambda: key, chain=None
    )


def test_refresh_against_the_floor_and_linearity(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    small = make_feed(tmp_path / "small.json", 10_000)
    large = make_feed(tmp_path / "large.json", 100_000)
    module = tmp_path / "floor_map.py"

    floor_small = median_seconds(lambda: floor_of_the_work(small), 3)
    refresh_small = median_seconds(lambda: full_refresh(small, module, key), 3)
    refresh_large = median_seconds(lambda: full_refresh(large, module, key), 1)

    ratio = refresh_small / floor_small
    growth = refresh_large / refresh_small
    print(f"\nfloor (json.load + jsonschema), 10k adapters: {floor_small * 1000:.0f} ms")
    print(f"refresh end to end, 10k adapters:            {refresh_small * 1000:.0f} ms")
    print(f"ratio to the floor: {ratio:.2f}x (target <= 3x)")
    print(
        f"refresh, 100k adapters: {refresh_large * 1000:.0f} ms = {growth:.1f}x the 10k run "
        "(target about 10x)"
    )
    assert module.read_text().count("adapter-") == 100_000
