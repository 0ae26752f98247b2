"""A spawn decision as the gate recorded it, and the words of its verdicts and policies.

Kept apart from the gate so that ``errors`` (``SpawnRefused`` carries a ``Decision``) can
name the type without importing the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BLOCK, WARN = "block", "warn"
PERMIT, REFUSE, WARN_OVERRIDE, UNTRACKED = "permit", "refuse", "warn_override", "untracked"
# A refusal every cause of which an unexpired waiver in the map covers: allowed, recorded.
WAIVED = "waived"


@dataclass(frozen=True)
class Decision:
    """A decision as it was recorded; ``receipt_id`` names its receipt in the chain.

    ``adapter`` is the adapter whose floor was applied, identified from what the binary is;
    ``requested`` is the name the host asked for (the two differ when, say, ``codey`` turns
    out to be aider); ``identified_by`` says how the binary was recognised, if it was.
    """

    verdict: str
    adapter: str
    version: str | None
    floor: str | None
    advisory_id: str | None
    reason: str
    policy: str
    receipt_id: str
    binary: str | None
    detected_by: str | None
    floor_map_hash: str | None
    seq: int
    requested: str | None = None
    identified_by: str | None = None
    waiver_id: str | None = None
    # For an agent that is an MCP client: each server its configuration declares, as
    # recorded in the receipt (name, command, version, verdict, the declaring file).
    mcp_servers: tuple[dict[str, Any], ...] | None = None

    @property
    def allowed(self) -> bool:
        return self.verdict in (PERMIT, WARN_OVERRIDE, UNTRACKED, WAIVED)
