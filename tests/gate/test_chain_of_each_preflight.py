"""Each preflight records into the chain its environment names at that call: a process that
changes FLOORGUARD_HOME (or, with a relative one, its working directory) between two
preflights records the second decision in the other chain."""

from __future__ import annotations

from pathlib import Path

import pytest
from probes import aider_install

import floorguard
from floorguard._chain.chain import AuditChain

_UNSET = (
    "FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_FLOOR_MAP", "FLOORGUARD_CHAIN_URL",
    "FLOORGUARD_CHAIN_KEY_FILE", "FLOORGUARD_HOST_KEY_FILE", "FLOORGUARD_HOST_KEYS",
)  # fmt: skip


@pytest.fixture
def aider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in _UNSET:
        monkeypatch.delenv(name, raising=False)
    return str(aider_install(tmp_path / "aider-venv", "0.61.0"))


def _seqs(home: Path) -> list[int]:
    chain = AuditChain.from_env({"FLOORGUARD_HOME": str(home)})
    try:
        return [record.seq for record in chain.records()]
    finally:
        chain.close()


def test_a_home_changed_between_two_preflights_receives_the_second(
    aider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    monkeypatch.setenv("FLOORGUARD_HOME", str(first))
    for _ in range(2):
        floorguard.preflight("aider", binary=aider)
    monkeypatch.setenv("FLOORGUARD_HOME", str(second))
    floorguard.preflight("aider", binary=aider)
    monkeypatch.setenv("FLOORGUARD_HOME", str(first))
    floorguard.preflight("aider", binary=aider)
    assert (_seqs(first), _seqs(second)) == ([0, 1, 2], [0])


def test_a_relative_home_is_found_from_the_working_directory_of_each_preflight(
    aider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    monkeypatch.setenv("FLOORGUARD_HOME", "state")
    monkeypatch.chdir(one)
    for _ in range(2):
        floorguard.preflight("aider", binary=aider)
    monkeypatch.chdir(two)  # (the environment itself unchanged)
    floorguard.preflight("aider", binary=aider)
    assert (_seqs(one / "state"), _seqs(two / "state")) == ([0, 1], [0])
