"""Benchmark: ``floorctl refresh --check`` on the shipped feed, as a whole process.

Target (issue 11): within 1.2x of ``python -c 'import click, jinja2, jsonschema,
packaging.version'``, the libraries the command was thought unable to avoid. The installed
console script runs against the committed module (in sync with feeds/example.v1.json);
both commands are run many times, interleaved, and medians compared.
Run: python -m pytest -m perf tests/perf/test_bench_startup.py -s
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.process_bench import FLOORCTL, median, run, user_env

pytestmark = pytest.mark.perf

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 31
CHECK = [FLOORCTL, "refresh", "--feed", "feeds/example.v1.json", "--check"]
LIBRARIES = [sys.executable, "-c", "import click, jinja2, jsonschema, packaging.version"]
NOTHING = [sys.executable, "-c", "pass"]


def test_refresh_check_starts_within_1_2x_of_importing_its_libraries(tmp_path: Path) -> None:
    env = user_env(isolated_env(tmp_path))
    for argv in (CHECK, LIBRARIES, NOTHING):  # warm: bytecode written, files cached
        run(argv, cwd=REPO, env=env)
    check, libraries, nothing = [], [], []
    for _ in range(ROUNDS):
        check.append(run(CHECK, cwd=REPO, env=env))
        libraries.append(run(LIBRARIES, cwd=REPO, env=env))
        nothing.append(run(NOTHING, cwd=REPO, env=env))
    ours, theirs, bare = (median(runs, "wall") for runs in (check, libraries, nothing))
    ratio = ours / theirs
    cpu_ratio = median(check, "cpu") / median(libraries, "cpu")
    print(
        f"\n{ROUNDS} interleaved runs each, medians (wall): refresh --check {ours * 1000:.1f} ms;"
        f" import click, jinja2, jsonschema, packaging.version {theirs * 1000:.1f} ms;"
        f" python -c pass {bare * 1000:.1f} ms"
        f"\nratio {ratio:.2f}x (target <= 1.2x); CPU time ratio {cpu_ratio:.2f}x;"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    assert ratio <= 1.2
