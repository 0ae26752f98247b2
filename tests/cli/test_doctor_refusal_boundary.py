"""The doctor's "floor" is the boundary the gate actually refuses below: the map's floor raised
by every advisory range (or listed version) that continues the refused versions from the
start, not the stated floor alone. Real doctor on a real host; the boundary agrees with the
gate's own rule (``verdict.assess``) on each side of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.advisory_maps import advisory, entry, extended_module, span
from hosts import Host, write_script

from floorguard._maps import verdict
from floorguard._maps.map_model import from_entries

# Advisories refuse everything below 1.4.7, while the stated floor is 1.0.20.
BACKPORT = advisory("GHSA-back-port-npmx", span("0", fixed="1.4.7"), span("2.0.0", fixed="2.1.3"))
MAP = {"claude": entry("npm", BACKPORT, floor="1.0.20", floor_id="BSA-0002")}


@pytest.fixture
def host(tmp_path: Path) -> tuple[Host, Path]:
    host = Host(tmp_path / "host", {})
    host.set_map(extended_module(MAP))
    bins = tmp_path / "bin"
    bins.mkdir()
    write_script(bins / "claude", "echo '1.2.0 (Claude Code)'")  # above 1.0.20, still refused
    return host, bins


def test_the_doctor_shows_the_boundary_the_advisories_raise_the_floor_to(
    host: tuple[Host, Path],
) -> None:
    site, bins = host
    text = site.python("-m", "floorguard", "doctor", PATH=str(bins))
    assert text.returncode == 1, text.stderr
    [row] = [line for line in text.stdout.splitlines() if line.startswith("claude ")]
    assert "1.4.7" in row.split() and "1.0.20" not in row
    document = json.loads(
        site.python("-m", "floorguard", "doctor", "--json", PATH=str(bins)).stdout
    )
    [claude] = document["adapters"]
    assert claude["status"] == "affected"
    # The map's stated floor stays what it is; the boundary is a field of its own.
    assert (claude["floor"], claude["refuses_below"]) == ("1.0.20", "1.4.7")
    markdown = site.python(
        "-m", "floorguard", "doctor", "--format", "markdown", PATH=str(bins)
    ).stdout
    assert "| claude | 1.2.0 | 1.4.7 |" in markdown


def boundary(**fields: Any) -> str | None:
    made = verdict.refusal_boundary(from_entries({"claude": fields})["claude"])
    return None if made is None else made.describe()


@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        # A floor alone.
        ({"min_safe_version": "1.0.20", "advisory_id": "BSA-0001", "note": "-"}, "1.0.20"),
        # A range from the start past the floor raises it.
        (entry("npm", BACKPORT, floor="1.0.20"), "1.4.7"),
        # ... and without a floor, it is the floor.
        (entry("npm", BACKPORT), "1.4.7"),
        # A range that starts at the floor continues it; one that starts above leaves a gap.
        (entry("npm", advisory("A", span("1.0.20", fixed="1.1.0")), floor="1.0.20"), "1.1.0"),
        (entry("npm", advisory("A", span("1.0.21", fixed="1.1.0")), floor="1.0.20"), "1.0.20"),
        # Ranges that chain, found whatever their order.
        (
            entry(
                "npm",
                advisory("A", span("1.3.0", fixed="1.5.0")),
                advisory("B", span("0", fixed="1.3.0")),
            ),
            "1.5.0",
        ),
        # An inclusive end: everything up to and including it.
        (entry("npm", advisory("A", span("0", last_affected="1.4.6"))), "> 1.4.6"),
        # The floor version itself listed as affected.
        (entry("npm", advisory("A", versions=("1.0.20",)), floor="1.0.20"), "> 1.0.20"),
        # A range from the start with no end: nothing is safe.
        (entry("npm", advisory("A", span("0"))), "none safe"),
        # No floor and nothing from the start: no boundary.
        (entry("npm", advisory("A", span("2.0.0", fixed="2.1.3"))), None),
    ],
)
def test_the_refusal_boundary_of_an_entry(fields: dict[str, Any], shown: str | None) -> None:
    assert boundary(**fields) == shown


@pytest.mark.parametrize(
    ("below", "at"),
    [("1.4.6", "1.4.7"), ("1.0.20", "1.4.7"), ("0.0.1", "1.4.7")],
)
def test_the_gate_refuses_below_the_boundary_and_not_at_it(below: str, at: str) -> None:
    claude = from_entries(MAP)["claude"]
    made = verdict.refusal_boundary(claude)
    assert made is not None and made.version == at
    assert verdict.assess(claude, below, at=None).unsafe
    assert not verdict.assess(claude, at, at=None).unsafe
