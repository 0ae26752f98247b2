"""floorguard: refuse known-unsafe agent CLIs at spawn time, and prove it afterwards.

Import cost matters here: hosts import this package on their spawn path, so only the
standard library is imported eagerly; ``packaging``, ``rfc8785``, ``sqlite3`` and
``cryptography`` are imported where they are first used. The public functions below load
their modules on first use for the same reason.
"""

from __future__ import annotations

from floorguard.errors import (
    ChainError,
    ChainWriteError,
    DetectionError,
    FloorguardError,
    FloorMapError,
    KeyFileError,
    SpawnRefused,
    VerificationError,
)

# (not typing's: importing typing was a third of this package's import)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from floorguard._gate.decision import Decision as Decision
    from floorguard._gate.gate import preflight as preflight
    from floorguard._gate.launcher import spawn as spawn
    from floorguard._maps.map_model import Advisory

    FLOOR_MAP: Mapping[str, Advisory]
    FLOOR_MAP_HASH: str
    FLOOR_MAP_VERSION: int

__all__ = [
    "FLOOR_MAP",
    "FLOOR_MAP_HASH",
    "FLOOR_MAP_VERSION",
    "ChainError",
    "ChainWriteError",
    "Decision",
    "DetectionError",
    "FloorMapError",
    "FloorguardError",
    "KeyFileError",
    "SpawnRefused",
    "VerificationError",
    "preflight",
    "spawn",
]


def __getattr__(name: str) -> Any:
    # Resolved at every access: the floor map is the one in force now, not at import time.
    if name in ("FLOOR_MAP", "FLOOR_MAP_HASH", "FLOOR_MAP_VERSION"):
        from floorguard._maps import active_map

        current = active_map.current()
        if name == "FLOOR_MAP_HASH":
            return current.floor_map_hash
        if name == "FLOOR_MAP_VERSION":
            return current.map_version
        # A deep copy: the entries are frozen, but object.__setattr__ still writes through
        # them, and the gate's own map must never be reachable from here.
        import copy
        from types import MappingProxyType

        return MappingProxyType(copy.deepcopy(dict(current.floor_map)))
    # The rest are fixed once imported: kept as the module's own names, so that a host
    # calling floorguard.preflight at every spawn passes through here once (1.6 us a call).
    if name == "preflight":
        from floorguard._gate import gate

        found: Any = gate.preflight
    elif name == "Decision":
        from floorguard._gate import decision

        found = decision.Decision
    elif name == "spawn":
        from floorguard._gate import launcher

        found = launcher.spawn
    else:
        raise AttributeError(f"module 'floorguard' has no attribute {name!r}")
    globals()[name] = found
    return found
