"""Let the benchmarks share tests/helpers when tests/perf is run on its own, and free them
from the suite's per-test time limit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = str(Path(__file__).resolve().parents[1])
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A benchmark builds its large inputs (a chain of a million records) inside the test: it
    # is run by hand and watched, so the suite's per-test limit does not apply.
    for item in items:
        if item.get_closest_marker("perf"):
            item.add_marker(pytest.mark.timeout(0))
