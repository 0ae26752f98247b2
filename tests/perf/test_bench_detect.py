"""Benchmark: a detection from npm metadata (read, and cached while its files are
unchanged) against running a real node CLI's ``--version`` (a probe's answer is never
reused: each judgement asks the program again).

Run with ``pytest -m perf tests/perf/test_bench_detect.py -s``; the target is a cached
detection, and a metadata read, each at least 20 times faster than a probe.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from floorguard._identify.detect import Detection, ProbeSettings, clear_cache, detect_version

pytestmark = pytest.mark.perf

SETTINGS = ProbeSettings(timeout_s=30)


def _median_seconds(action: Callable[[], Detection], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _node_cli(tmp_path: Path) -> Path:
    script = tmp_path / "gemini"
    script.write_text('#!/usr/bin/env node\nconsole.log("0.1.12");\n', encoding="utf-8")
    os.chmod(script, 0o700)
    return script


def _gemini_package(tmp_path: Path) -> Path:
    """gemini's CLI in an npm package folder (detected from its package.json)."""
    package = tmp_path / "lib" / "node_modules" / "@google" / "gemini-cli"
    package.mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": "@google/gemini-cli", "version": "0.1.12", "bin": {"gemini": "gemini"}})
    )
    return _node_cli(package)


def _probe_seconds(tmp_path: Path) -> float:
    outside = _node_cli(tmp_path)  # the same script, outside any npm package
    assert detect_version("gemini", binary=outside, settings=SETTINGS).detected_by == "probe"
    return _median_seconds(lambda: detect_version("gemini", binary=outside, settings=SETTINGS), 7)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_cached_detection_is_much_faster_than_a_node_probe(tmp_path: Path) -> None:
    cli = _gemini_package(tmp_path)
    assert detect_version("gemini", binary=cli, settings=SETTINGS).detected_by == "npm-metadata"
    cached_s = _median_seconds(
        lambda: detect_version("gemini", binary=cli, settings=SETTINGS), 2000
    )
    probe_s = _probe_seconds(tmp_path)
    ratio = probe_s / cached_s
    print(
        f"\nnode --version probe: {probe_s * 1e3:.1f} ms; cached detection: "
        f"{cached_s * 1e6:.1f} us; ratio {ratio:.0f}x"
    )
    assert ratio >= 20


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_npm_metadata_read_is_faster_than_a_node_probe(tmp_path: Path) -> None:
    cli = _gemini_package(tmp_path)

    def metadata() -> Detection:
        clear_cache()
        return detect_version("gemini", binary=cli, settings=SETTINGS)

    assert metadata().detected_by == "npm-metadata"
    metadata_s = _median_seconds(metadata, 200)
    probe_s = _probe_seconds(tmp_path)
    print(
        f"\nnpm metadata read: {metadata_s * 1e6:.1f} us; node probe: {probe_s * 1e3:.1f} ms; "
        f"ratio {probe_s / metadata_s:.0f}x"
    )
    assert probe_s / metadata_s >= 20
