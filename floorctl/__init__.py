"""floorctl: the build-time toolchain that maintains, signs and verifies adapter floor maps."""

__version__ = "0.2.0"
