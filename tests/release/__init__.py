"""Releasing: floorctl build and publish, verify provenance, the release recipe run locally,
the built wheel in a fresh venv, and the notices of the development key."""
