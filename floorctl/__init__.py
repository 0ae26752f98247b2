"""floorctl: the build-time toolchain that maintains, signs and verifies adapter floor maps."""

__version__ = "0.2.0"
# The name it is distributed under: the index's "floorctl" is an unrelated project's, so the
# import package and the command are floorctl, and what pip installs is this.
DISTRIBUTION = "floorguard-floorctl"
