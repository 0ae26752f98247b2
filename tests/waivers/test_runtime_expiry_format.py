"""The runtime reads a waiver's ``expires`` by the rule floorctl writes it with: UTC with
``Z`` and at most six fractional digits. A map module carrying any other spelling (an offset,
nanoseconds) was not written by floorctl, whatever hash it states: the runtime refuses it,
with the reason, rather than normalise what a reviewer approved. Decided by the real
preflight in a host process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.advisory_maps import advisory, entry, span, waiver
from hosts import Host
from probes import aider_at

from floorguard._base._canonical import content_address

GHSA = advisory("GHSA-wwww-wwww-wwww", span("2.0.0", fixed="2.1.3"))


def module_with_expiry(expires: str) -> str:
    """A module whose only waiver (WVR-0001, aider 2.0.1) expires at ``expires``, stating
    the hash of exactly that data, as a hand-edited map would."""
    waived = waiver("WVR-0001", "2.0.1", GHSA["id"], expires=expires)
    entries = {"aider": entry("PyPI", GHSA, waivers=(waived,))}
    return (
        "# floor-map:begin\n"
        "FLOOR_MAP_VERSION = 1\n"
        f"FLOOR_MAP_HASH = {content_address(entries)!r}\n"
        f"FLOOR_MAP_ENTRIES = {json.dumps(entries, indent=4)}\n"
        "# floor-map:end\n"
    )


def preflight(tmp_path: Path, module: str) -> dict[str, object]:
    host = Host(tmp_path / "host", {})
    host.set_map(module)
    script = aider_at(tmp_path / "bin" / "aider", "2.0.1")
    return host.preflight("aider", binary=str(script))


@pytest.mark.parametrize(
    "expires",
    [
        "2099-01-01T00:00:00+00:00",
        "2099-01-01T02:00:00+02:00",
        "2099-01-01T00:00:00-00:00",
        "2099-01-01T00:00:00.0000000Z",
        "2099-01-01T00:00:00z",
        "2099-01-01 00:00:00Z",
    ],
)
def test_a_waiver_expiry_floorctl_would_refuse_refuses_the_waived_version(
    tmp_path: Path, expires: str
) -> None:
    decided = preflight(tmp_path, module_with_expiry(expires))
    assert decided["raised"] == "SpawnRefused", decided
    assert decided["verdict"] == "refuse"
    reason = str(decided["reason"])
    assert "floor_map.py: floor map entry 'aider' waiver 0: expires " in reason, reason
    assert "is not an RFC 3339 UTC time with Z and at most six fractional digits" in reason


@pytest.mark.parametrize("expires", ["2099-01-01T00:00:00Z", "2099-01-01T00:00:00.123456Z"])
def test_a_waiver_expiry_in_floorctls_form_still_waives(tmp_path: Path, expires: str) -> None:
    decided = preflight(tmp_path, module_with_expiry(expires))
    assert decided["verdict"] == "waived", decided
