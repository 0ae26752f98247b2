"""Fixtures of the chain's tests: a host's isolated environment and its FLOORGUARD_HOME, a
long-lived host process that has appended 5 records, and an aider at its floor (a file that
needs another of these defines its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cli import isolated_env
from helpers.long_lived_prover import LongLivedHost
from probes import aider_install


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return isolated_env(tmp_path)


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    return Path(env["FLOORGUARD_HOME"])


@pytest.fixture
def aider(tmp_path: Path) -> Path:
    """pip's console script of aider 0.70.0 in a virtual environment."""
    return aider_install(tmp_path / "aider-venv", "0.70.0")


@pytest.fixture
def host(env: dict[str, str]) -> Iterator[LongLivedHost]:
    with LongLivedHost(env) as process:
        process.appended(5)
        yield process
