"""floorguard: refuse known-unsafe agent CLIs at spawn time, and prove it afterwards.

Import cost matters here: hosts import this package on their spawn path, so only the
standard library is imported eagerly; ``packaging``, ``rfc8785``, ``sqlite3`` and
``cryptography`` are imported where they are first used.
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

__all__ = [
    "ChainError",
    "ChainWriteError",
    "DetectionError",
    "FloorMapError",
    "FloorguardError",
    "KeyFileError",
    "SpawnRefused",
    "VerificationError",
]
