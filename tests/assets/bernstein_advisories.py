"""A host module in the layout of Bernstein's adapter advisories, for floorctl's tests.

The dataclass and the lookup helper are the host's own code; only the block between the
floor-map markers is data that floorctl regenerates. Written for these tests: it mirrors
the shape of the real file, not its text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdapterAdvisory:
    """The lowest version of one agent CLI that is safe to spawn, and why."""

    adapter: str
    min_safe_version: str
    advisory_id: str
    note: str


# floor-map:begin
ADAPTER_MIN_SAFE_VERSIONS: dict[str, AdapterAdvisory] = {
    "aider": AdapterAdvisory(
        adapter="aider",
        min_safe_version="0.60.0",
        advisory_id="BSA-0001",
        note="Older aider releases must not be spawned by the orchestrator.",
    ),
    "goose": AdapterAdvisory(
        adapter="goose",
        min_safe_version="1.0.0",
        advisory_id="BSA-0007",
        note="Pre-1.0 goose lacks the sandbox flag the orchestrator relies on.",
    ),
}
# floor-map:end


def advisory_for(adapter: str) -> AdapterAdvisory | None:
    """The advisory that applies to ``adapter``, or None when it is not tracked."""
    return ADAPTER_MIN_SAFE_VERSIONS.get(adapter)
