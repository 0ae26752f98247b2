"""A process that decides again judges the second decision by what holds then, not by what
it kept from the first: a process keeps a version's causes per map (by the map's hash), the
environment as last read and the chain's head, and none of them may carry a decision past
a change of the map, the time (a waiver expiring) or the policy. In process, on aider as
pip installs it, whose version is read once and then cached, as on a busy host.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from helpers.advisory_maps import advisory, entry, extended_module, map_hash, span, waiver
from probes import aider_install

import floorguard
from floorguard._base import _time
from floorguard._maps import active_map

GHSA = "GHSA-wwww-wwww-wwww"
EXPIRES = "2030-06-30T00:00:00Z"


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The map in force is this module file (read, hash-checked), the chain in tmp_path."""
    path = tmp_path / "floor_map.py"
    monkeypatch.setattr(active_map, "BUILTIN_MAP_FILE", path)
    monkeypatch.setenv("FLOORGUARD_HOME", str(tmp_path / "home"))
    for name in ("FLOORGUARD_ADAPTER_FLOOR_POLICY", "FLOORGUARD_FLOOR_MAP",
                 "FLOORGUARD_CHAIN_URL", "FLOORGUARD_UNTRACKED_POLICY"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return path


def _write(module: Path, entries: dict[str, Any]) -> None:
    module.write_text(extended_module(entries), encoding="utf-8")


def _decide(binary: Path) -> floorguard.Decision:
    """The decision, allowed or refused (a refusal is recorded too)."""
    try:
        return floorguard.preflight("aider", binary=str(binary))
    except floorguard.SpawnRefused as refused:
        assert refused.decision is not None, refused
        return refused.decision


def test_a_map_changed_between_two_decisions_judges_the_next_one(
    module: Path, tmp_path: Path
) -> None:
    aider = aider_install(tmp_path / "aider-venv", "0.61.0")
    floor_only = {"aider": entry("PyPI", floor="0.60.0")}
    widened = {"aider": entry("PyPI", advisory(GHSA, span("0.61.0", fixed="0.62.0")),
                              floor="0.60.0")}  # fmt: skip
    _write(module, floor_only)
    first = _decide(aider)
    assert (first.verdict, first.floor_map_hash) == ("permit", map_hash(floor_only))
    _write(module, widened)
    second = _decide(aider)
    assert (second.verdict, second.advisory_id) == ("refuse", GHSA), second.reason
    assert second.floor_map_hash == map_hash(widened)
    _write(module, floor_only)  # back: the first map's judgement holds again
    third = _decide(aider)
    assert (third.verdict, third.floor_map_hash) == ("permit", map_hash(floor_only))
    assert [first.seq, second.seq, third.seq] == [0, 1, 2]


def test_a_waiver_that_expires_between_two_decisions_no_longer_waives(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aider = aider_install(tmp_path / "aider-venv", "2.0.1")
    _write(module, {"aider": entry("PyPI", advisory(GHSA, span("2.0.0", fixed="2.1.3")),
                                   waivers=(waiver("WVR-0001", "2.0.1", GHSA,
                                                   expires=EXPIRES),))})  # fmt: skip
    expiry = _time.parse_ts(EXPIRES)
    now = [expiry - dt.timedelta(hours=1)]
    monkeypatch.setattr(_time, "utc_now", lambda: now[0])
    first = _decide(aider)
    assert (first.verdict, first.waiver_id) == ("waived", "WVR-0001"), first.reason
    # Time moves on: the waiver now expires within the two minutes a decision must hold.
    now[0] = expiry - dt.timedelta(seconds=90)
    second = _decide(aider)
    assert (second.verdict, second.waiver_id) == ("refuse", None), second.reason
    assert GHSA in second.reason and "not waived" in second.reason
    now[0] = expiry + dt.timedelta(days=1)
    assert _decide(aider).verdict == "refuse"


def test_the_policy_changed_between_two_decisions_is_the_one_applied(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aider = aider_install(tmp_path / "aider-venv", "0.59.0")
    _write(module, {"aider": entry("PyPI", floor="0.60.0")})
    assert _decide(aider).verdict == "refuse"
    monkeypatch.setenv("FLOORGUARD_ADAPTER_FLOOR_POLICY", "warn")  # os.environ, read anew
    overridden = _decide(aider)
    assert (overridden.verdict, overridden.policy) == ("warn_override", "warn")
    monkeypatch.delenv("FLOORGUARD_ADAPTER_FLOOR_POLICY")
    assert _decide(aider).verdict == "refuse"


def test_an_untracked_policy_set_between_two_decisions_refuses_the_next_one(
    module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aider = aider_install(tmp_path / "aider-venv", "0.61.0")
    _write(module, {"claude": entry("npm", floor="1.0.0")})
    assert _decide(aider).verdict == "untracked"
    monkeypatch.setenv("FLOORGUARD_UNTRACKED_POLICY", "refuse")
    assert _decide(aider).verdict == "refuse"
