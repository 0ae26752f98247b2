"""floorctl: the build-time toolchain that maintains, signs and verifies adapter floor maps."""

from __future__ import annotations

# The release, read by the build (pyproject.toml) and printed by -V without reading the
# installed metadata (a test checks the two agree).
__version__ = "0.2.0"
# The name it is distributed under: the index's "floorctl" is an unrelated project's, so the
# import package and the command are floorctl, and what pip installs is this.
DISTRIBUTION = "floorguard-floorctl"


def version_line() -> str:
    """What ``floorctl -V`` prints: the runtime floorctl builds maps for is part of the answer."""
    from floorguard._version import __version__ as floorguard_version  # noqa: PLC0415

    return f"floorctl {__version__} (floorguard {floorguard_version})"
