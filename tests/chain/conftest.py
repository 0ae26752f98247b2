"""Fixtures of the chain's tests: a host's isolated environment and its FLOORGUARD_HOME
(a file that needs another defines its own)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import isolated_env


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path)


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["FLOORGUARD_HOME"])
